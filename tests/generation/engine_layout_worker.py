"""The rollout engine in the RL layout on 8 fake CPU devices: its compiled programs, read back.

Run by `test_engine_layout.py` in a subprocess whose `XLA_FLAGS` asks for 8 host devices. The engine sits on
`parallel.replica_meshes(2)`: 4 replicas of 2 devices (data × tensor), `parallel.GENERATION_RULES`, its weights
handed over from params in the trainer's layout (fsdp = 8, float32). For contrast, the same engine under the
training rules on an fsdp = 8 mesh (the engine's old layout). Prints one JSON line: the tokens against unsharded
greedy decoding, the all-gathers of each compiled decode step (result shape, whether inside the decode loop),
the parameters' shapes, the cache's shards, and the per-device bytes of the compiled programs next to `plan`'s.
"""

import json
import sys
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hlo_support import all_gathers

from generation.reference import CFG, engine_tokens, numpy_params, random_prompts, reference_greedy
from jaxseeker import model
from jaxseeker.generation import Engine, SamplingConfig, handoff, layout, steps
from jaxseeker.parallel import DEFAULT_RULES, MeshConfig, make_mesh, replica_meshes, tree_shardings
from jaxseeker.planning.memory import StageShape
from jaxseeker.planning.rollout import engine_calls, engine_memory

SLOTS, LENGTH, CHUNK, STEPS = 16, 512, 32, 4
SAMPLING = SamplingConfig(temperature=1.0)  # RL samples: the decode step runs the sampler over the vocabulary


def decode_program(engine: Engine):
    """The engine's decode step for all its slots, compiled on its current weights and cache."""
    zeros = np.zeros(engine.slots, np.int32)
    return steps.decode.lower(
        engine._params,
        engine._cache,
        None,  # every slot in order, as a sharded engine decodes
        zeros,
        zeros,
        engine._pages.table,
        zeros + STEPS,
        zeros,
        zeros,
        np.int32(0),
        None,
        cfg=engine.cfg,
        sampling=SAMPLING.static,
        steps=STEPS,
        tile=engine.slots,
        sharding=engine._sharding,
    ).compile()


def prefill_program(engine: Engine):
    """The engine's prefill of a chunk into every slot (an engine whose slots are split prefills them all), compiled."""
    rows = engine.slots
    return steps.prefill.lower(
        engine._params,
        engine._cache,
        np.arange(rows, dtype=np.int32),
        np.zeros((rows, CHUNK), np.int32),
        np.zeros(rows, np.int32),
        np.zeros(engine.slots, np.int32),
        engine._pages.table,
        cfg=engine.cfg,
        sharding=engine._sharding,
    ).compile()


def peak(compiled) -> int:
    """XLA's peak bytes per device of a compiled program."""
    return int(compiled.memory_analysis().peak_memory_in_bytes)


def per_device(tree) -> int:
    """Bytes of the arrays of `tree` on one device (the mean over the 8)."""
    return int(sum(s.data.nbytes for x in jax.tree.leaves(tree) for s in x.addressable_shards) // jax.device_count())


def main() -> None:
    """Build both engines, compile, print the report."""
    params = numpy_params(CFG, seed=0)
    train_mesh = make_mesh(MeshConfig(data=1, fsdp=8))
    trainer = jax.device_put(params, tree_shardings(model.param_axes(CFG), params, train_mesh, DEFAULT_RULES))
    mesh, handoff_mesh = replica_meshes(2)
    engine = Engine(
        trainer,
        CFG,
        slots=SLOTS,
        max_len=LENGTH,
        steps_per_call=STEPS,
        prefill_chunk=CHUNK,
        mesh=mesh,
        handoff_mesh=handoff_mesh,
        stacked_prefill=False,
    )
    prompts = random_prompts([5, 40, 9], seed=2)
    tokens = engine_tokens(engine, prompts, 8)

    cache = engine._cache
    init = layout._zeros.lower(CFG, engine._shape, "float32", engine._sharding).compile()
    handed = (
        jax.jit(lambda p: handoff.handoff_fn(CFG, dtype="float32", stacked=False, mesh=mesh)(p))
        .lower(trainer)
        .compile()
    )
    decode = decode_program(engine)
    prefill = prefill_program(engine)
    stage = StageShape(
        "rl",
        "rl",
        rows=1,
        seq=LENGTH,
        slots=SLOTS,
        cache_len=LENGTH,
        prefill_chunk=CHUNK,
        engine_tensor=2,
        engine_dtype="float32",
        stacked_prefill=False,
    )
    train_engine = Engine(
        trainer,
        CFG,
        slots=64,
        max_len=LENGTH,
        steps_per_call=STEPS,
        prefill_chunk=CHUNK,
        mesh=train_mesh,
        rules=DEFAULT_RULES,
    )
    weights = jax.tree.leaves((engine._params, params))
    print(
        json.dumps(
            {
                "devices": jax.device_count(),
                "mesh": dict(mesh.shape),
                "equal": tokens == reference_greedy(params, prompts, 8),
                "param_shapes": sorted({tuple(x.shape) for x in weights}),
                "param_shards": sorted(
                    {tuple(s.data.shape) for x in jax.tree.leaves(engine._params) for s in x.addressable_shards}
                ),
                "gathers": all_gathers(decode.as_text()),
                "prefill_gathers": all_gathers(prefill.as_text()),
                "train_gathers": all_gathers(decode_program(train_engine).as_text()),
                "k_spec": str(cache.k[0].sharding.spec),
                "k_shards": sorted({tuple(s.data.shape) for s in cache.k[0].addressable_shards}),
                "cache_init": {"output": int(init.memory_analysis().output_size_in_bytes), "peak": peak(init)},
                "compiled": {
                    "decode": peak(decode),
                    "prefill": peak(prefill),
                    "handoff": peak(handed),
                },
                "plan": engine_memory(CFG, stage, chips=8, per_host=8),
                "plan_calls": engine_calls(CFG, stage, chips=8, per_host=8),
                "trainer_bytes_per_device": per_device(trainer),
                "handoff_dtype": sorted(
                    {
                        str(x.dtype)
                        for x in jax.tree.leaves(
                            Engine(trainer, CFG, slots=SLOTS, max_len=64, mesh=mesh, dtype="bfloat16")._params
                        )
                    }
                ),
                "cache_bytes_per_device": per_device(cache),
            }
        )
    )


if __name__ == "__main__":
    main()
