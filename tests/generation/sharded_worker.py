"""The engine on a (data 2 × tensor 2) mesh of fake CPU devices against unsharded greedy decoding, once with two
prompts and once with one prompt's group of three rollouts in four slots (the second shares the first's prompt pages,
the third, on the other part of the pool, prefills its own), and once with a pool too small for one part's two
requests while the other part goes on; then on a (tensor 2) mesh, whose devices each hold every slot, with three
prompts in four slots.

Run by `test_sharded_engine.py` in a subprocess whose `XLA_FLAGS` asks for 4 host devices (the flag must
be set before JAX starts). Prints one JSON line: the cache's PartitionSpecs and whether the tokens agree.
"""

import json
import sys
from pathlib import Path

import jax

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from generation.reference import CFG, engine_tokens, numpy_params, random_prompts, reference_greedy
from jaxseeker import model
from jaxseeker.generation import Engine
from jaxseeker.parallel import MeshConfig, make_mesh, tree_shardings


def main() -> None:
    """Generate on the mesh and print the report."""
    params = numpy_params(CFG, seed=0)
    mesh = make_mesh(MeshConfig(data=2, fsdp=1, tensor=2, expert=1))
    sharded = jax.device_put(params, tree_shardings(model.param_axes(CFG), params, mesh))
    engine = Engine(sharded, CFG, slots=2, max_len=64, steps_per_call=4, prefill_chunk=8, mesh=mesh)
    prompts = random_prompts([5, 9], seed=1)
    tokens = engine_tokens(engine, prompts, 10)
    group = random_prompts([24], seed=2) * 3  # one prompt, three rollouts: slots 0 and 1 on one part, 2 on the other
    grouped = Engine(sharded, CFG, slots=4, max_len=64, steps_per_call=4, prefill_chunk=8, mesh=mesh)
    group_tokens = engine_tokens(grouped, group, 10)
    cache = grouped._cache
    # Two parts of 4 pages of 8: part 0's requests (18 and 19 positions) each need three, part 1's one request
    # (31 positions) goes on. Part 0 is held up on its own and its last request is written again later, so its first
    # one ends before part 1's longer one.
    small = Engine(
        sharded, CFG, slots=4, max_len=32, steps_per_call=4, prefill_chunk=8, mesh=mesh, page=8, pages=8, share_prefix=0
    )
    parts = random_prompts([6, 7, 5], seed=4)
    budgets = {"a": 12, "b": 12, "long": 26}
    order, parted = [], {}
    for name, prompt in zip(budgets, parts, strict=True):
        small.submit(name, prompt, max_new_tokens=budgets[name])
    while small.has_work():
        for event in small.step():
            order.append(event.request_id)
            parted[event.request_id] = event.tokens
            small.release(event.request_id)
    parts_equal = all(
        parted[name] == reference_greedy(params, [prompt], budgets[name])[0]
        for name, prompt in zip(budgets, parts, strict=True)
    )
    # A mesh of tensor parallelism only holds every slot on each device: the engine decodes the running rows alone.
    tensor_mesh = make_mesh(MeshConfig(data=1, fsdp=1, tensor=2, expert=1), jax.devices()[:2])
    on_tensor = jax.device_put(params, tree_shardings(model.param_axes(CFG), params, tensor_mesh))
    whole = Engine(on_tensor, CFG, slots=4, max_len=64, steps_per_call=4, prefill_chunk=8, mesh=tensor_mesh)
    three = random_prompts([5, 9, 13], seed=3)
    whole_tokens = engine_tokens(whole, three, 10)
    print(
        json.dumps(
            {
                "devices": jax.device_count(),
                "k_spec": str(cache.k[0].sharding.spec),  # str of a PartitionSpec: P(...)
                "end_spec": str(cache.end.sharding.spec),
                "equal": tokens == reference_greedy(params, prompts, 10),
                "group_equal": group_tokens == reference_greedy(params, group, 10),
                "shared_tokens": grouped.shared_tokens,
                "rows_split": [engine.rows_split, whole.rows_split],
                "tensor_k_spec": str(whole._cache.k[0].sharding.spec),
                "tensor_equal": whole_tokens == reference_greedy(params, three, 10),
                "parts_order": order,
                "parts_preempted": small.preempted,
                "parts_equal": parts_equal,
            }
        )
    )


if __name__ == "__main__":
    main()
