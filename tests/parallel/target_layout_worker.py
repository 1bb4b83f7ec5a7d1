"""One SFT or RL step of each target's layout scaled down to 8 fake CPU devices against one device; prints one JSON
line.

Run by `test_target_layouts.py` in a subprocess whose `XLA_FLAGS` asks for 8 host devices (the flag must be set
before JAX starts). Argument: the JSON of the cases by target (`test_target_layouts.scaled_case`): the kind, the
scaled mesh, the model (the target's head layout and kernel at tiny widths) and the plan's batching.

  sft  one update of `grad_accum` micro-batches of packed rows (`make_sft_step`) on the mesh and on one device:
       every micro-step's loss and the params after the update; the params' and optimizer state's bytes on a
       device; in the compiled step, the embedding lookup's shape and every array of a whole row by the width.
  rl   episodes the real engine samples in the plan's layout (replicas of `engine_tensor` devices, its slots and
       prefill), then the update (`train.rl.update.update`: the plan's mini-batches, rows per pass, packed rows and
       remat) on the mesh and on one device from the same params, episodes and rewards: its metrics and new params.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

import jax
import numpy as np

from jaxseeker import model
from jaxseeker.parallel import MeshConfig, batch_sharding, make_mesh, shard_batch
from jaxseeker.train.optimizer import OptimizerConfig, make_optimizer
from jaxseeker.train.state import train_state_from_params

os.environ["JAXSEEKER_INTERPRET_KERNELS"] = "1"  # splash: the Pallas TPU kernel interpreted on CPU
# Adam turns gradient noise d into update noise up to lr · d / (4 · eps) where a gradient entry is near 0
# (see sharded_step_worker.py): lr 1e-4, eps 1e-6 keep it far under the test's tolerance. Both kinds use it.
OPT = dict(lr=1e-4, warmup_steps=0, total_steps=10, eps=1e-6)


def max_diff(a: Any, b: Any) -> float:
    """Largest absolute difference over two pytrees of arrays."""
    return max(
        float(np.max(np.abs(np.asarray(x) - np.asarray(y)))) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))
    )


def sft_rows(vocab: int, rows: int, seq: int, seed: int) -> dict[str, np.ndarray]:
    """`rows` packed rows of `seq` tokens: two documents each (the second from a quarter in), the loss on all but
    each document's first two tokens."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(1, vocab, (rows, seq + 1))
    cut = seq // 4 + np.arange(rows) % 3
    index = np.arange(seq)[None]
    segment_ids = np.where(index < cut[:, None], 1, 2).astype(np.int32)
    positions = np.where(index < cut[:, None], index, index - cut[:, None]).astype(np.int32)
    return dict(
        tokens=tokens[:, :-1],
        targets=tokens[:, 1:],
        loss_mask=(positions >= 2).astype(np.int32),
        segment_ids=segment_ids,
        positions=positions,
    )


def device_bytes(state: Any) -> int:
    """Bytes of the params and optimizer state (Adam's moments, the gradient accumulator) on the first device."""
    first = jax.devices()[0]
    leaves = jax.tree.leaves((state.params, state.opt_state))
    return sum(shard.data.nbytes for x in leaves for shard in x.addressable_shards if shard.device == first)


def embedding_shapes(hlo: str, cfg: model.ModelConfig, seq: int, fsdp: int) -> dict[str, list]:
    """In the compiled step: the results of the forward's embedding lookup (the `gather` of op `jvp()/gather`), and
    every array of `seq` positions (a whole row) by the width or the width's fsdp share, whatever its rows."""
    lookups = re.findall(r"= \w+\[([\d,]+)\]\S* gather\(.*op_name=\"[^\"]*/jvp\(\)/gather\"", hlo)
    widths = "|".join(str(w) for w in {cfg.hidden_size, cfg.hidden_size // fsdp})
    arrays = re.findall(rf"\w+\[(\d+,{seq},(?:{widths}))\]", hlo)
    return {
        "lookups": sorted({tuple(int(d) for d in x.split(",")) for x in lookups}),
        "whole_rows": sorted({tuple(int(d) for d in x.split(",")) for x in arrays}),
    }


def sft_update(
    cfg: model.ModelConfig, params: dict, micro_batches: list[dict], mesh: Any, grad_accum: int
) -> tuple[list[float], dict, dict]:
    """Every micro-step's loss and the params after one update of `grad_accum` micro-batches on `mesh`, and the
    state's bytes on one device and the embedding shapes of the compiled step (`device_bytes`, `embedding_shapes`)."""
    from jaxseeker.train.sft.step import make_sft_step

    tx = make_optimizer(OptimizerConfig(grad_accum=grad_accum, **OPT))
    state, shardings = train_state_from_params(params, model.param_axes(cfg), tx, 0, mesh)
    sharding = batch_sharding(mesh, micro_batches[0]["tokens"].shape)
    step = make_sft_step(cfg, tx, mesh=mesh, state_shardings=shardings, batch_sharding=sharding)
    first = shard_batch(micro_batches[0], sharding)
    layout = {"state_bytes": device_bytes(state)}
    hlo = step.lower(state, first).compile().as_text()
    layout |= embedding_shapes(hlo, cfg, first["tokens"].shape[1], dict(mesh.shape)["fsdp"])
    losses = []
    for batch in micro_batches:
        state, metrics = step(state, shard_batch(batch, sharding))
        losses.append(float(metrics["loss"]))
    return losses, jax.device_get(state.params), layout


def run_sft(case: dict) -> dict:
    """The `sft` case (module docstring)."""
    cfg = model.ModelConfig(**case["model"])
    params = jax.device_get(jax.jit(model.init_params, static_argnums=0)(cfg, jax.random.PRNGKey(0)))
    grad_accum, rows, seq = case["grad_accum"], case["rows"], case["seq"]
    micro_batches = [sft_rows(cfg.vocab_size, rows, seq, seed) for seed in range(grad_accum)]
    mesh = make_mesh(MeshConfig(**case["mesh"]))
    mesh_losses, mesh_params, layout = sft_update(cfg, params, micro_batches, mesh, grad_accum)
    one = make_mesh(MeshConfig(), jax.devices()[:1])
    one_losses, one_params, one_layout = sft_update(
        cfg.replace(attention_impl="xla"), params, micro_batches, one, grad_accum
    )
    return {
        "losses": mesh_losses,
        "one_device_losses": one_losses,
        "param_diff": max_diff(mesh_params, one_params),
        "params_moved": max_diff(one_params, params),
        "layout": layout,
        "one_device_state_bytes": one_layout["state_bytes"],
    }


def sampled_episodes(cfg: model.ModelConfig, params: dict, case: dict) -> list:
    """`groups × group_size` episodes the real engine samples in the plan's layout (replicas of `engine.tensor`
    devices, its slots per replica, its prefill): a random prompt per group (not trained) and `new_tokens` sampled
    tokens with the engine's log-probs, each longer than half a row, so that a packed row holds one."""
    from jaxseeker.agent import Episode
    from jaxseeker.generation import Engine, SamplingConfig
    from jaxseeker.parallel import GENERATION_RULES, replica_meshes

    mesh, handoff = replica_meshes(case["engine_tensor"])
    engine = Engine(
        params,
        cfg,
        slots=case["slots"],
        max_len=case["seq"] + 1,
        sampling=SamplingConfig(temperature=1.0, seed=3),
        mesh=mesh,
        rules=GENERATION_RULES,
        handoff_mesh=handoff,
        stacked_prefill=case["stacked_prefill"],
    )
    rng = np.random.default_rng(2)
    groups, group_size, new_tokens = case["groups"], case["group_size"], case["new_tokens"]
    prompts = [
        rng.integers(1, cfg.vocab_size, n).tolist()
        for n in rng.integers(case["seq"] // 2, case["seq"] - new_tokens, groups)
    ]
    requests = [(f"{g}.{i}", prompts[g]) for g in range(groups) for i in range(group_size)]
    results, waiting = {}, requests[::-1]
    while waiting or engine.has_work():
        while waiting and engine.free_slots():
            request_id, prompt = waiting.pop()
            engine.submit(request_id, prompt, max_new_tokens=new_tokens)
        for event in engine.step():
            results[event.request_id] = (event.tokens, [float(x) for x in event.logprobs])
            engine.release(event.request_id)
    episodes = []
    for request_id, prompt in requests:
        tokens, logprobs = results[request_id]
        episodes.append(
            Episode(
                question=request_id.split(".")[0],
                messages=[],
                token_ids=prompt + tokens,
                loss_mask=[0] * len(prompt) + [1] * len(tokens),
                logprobs=[0.0] * len(prompt) + logprobs,
                termination="answer",
            )
        )
    return episodes


def rl_update(
    cfg: model.ModelConfig, params: dict, episodes: list, rewards: np.ndarray, case: dict, mesh: Any
) -> tuple[dict, dict]:
    """The update's metrics and new params on `mesh`: the plan's mini-batches, `rows_per_pass` rows per
    forward/backward (`rl.update_tokens`) and packed rows, WebSailor's objective and Adam."""
    import types

    from jaxseeker.parallel import DEFAULT_RULES
    from jaxseeker.train.rl.config import RLConfig
    from jaxseeker.train.rl.step import RLStepConfig
    from jaxseeker.train.rl.update import update

    kwargs = {"eps_low": 0.2, "eps_high": 0.28, "agg": "token-mean"}
    rl = RLConfig(
        batch_questions=case["groups"],
        group_size=case["group_size"],
        mini_batches=case["mini_batches"],
        selection="dupo",
        pack=True,
        update_tokens=case["rows_per_pass"] * case["seq"],
        objective_kwargs=kwargs,
    )
    step_cfg = RLStepConfig(objective_kwargs=tuple(sorted(kwargs.items())), chunk_size=64)
    opt_cfg = OptimizerConfig(**OPT, min_lr=OPT["lr"], clip_norm=None)
    run = types.SimpleNamespace(
        rl=rl, cfg=cfg, step_cfg=step_cfg, opt_cfg=opt_cfg, mesh=mesh, rules=DEFAULT_RULES, lora=None, base=None,
        ref_params=None, kl_reward_coef=0.0,
    )  # fmt: skip
    state, _ = train_state_from_params(params, model.param_axes(cfg), make_optimizer(opt_cfg), 0, mesh)
    state, metrics = update(run, state, episodes, rewards, case["seq"], step=0)
    return metrics, jax.device_get(state.params)


def run_rl(case: dict) -> dict:
    """The `rl` case (module docstring)."""
    cfg = model.ModelConfig(**case["model"])
    params = jax.device_get(jax.jit(model.init_params, static_argnums=0)(cfg, jax.random.PRNGKey(0)))
    episodes = sampled_episodes(cfg, params, case)
    rewards = np.random.default_rng(4).integers(0, 2, (case["groups"], case["group_size"])).astype(np.float64)
    rewards[:, 0], rewards[:, 1] = 0.0, 1.0  # every group informative (what DUPO's selection leaves)
    metrics, new_params = rl_update(cfg, params, episodes, rewards, case, make_mesh(MeshConfig(**case["mesh"])))
    one = make_mesh(MeshConfig(), jax.devices()[:1])
    reference = cfg.replace(attention_impl="xla")  # the dense reference attention on one device
    one_metrics, one_params = rl_update(reference, params, episodes, rewards, case, one)
    keys = ("loss", "grad_norm", "update_rows", "micro_rows")
    return {
        "mesh": {k: metrics[k] for k in keys},
        "one_device": {k: one_metrics[k] for k in keys},
        "param_diff": max_diff(new_params, one_params),
        "params_moved": max_diff(one_params, params),
    }


def main() -> None:
    """Run the cases given as JSON on the command line and print the JSON report, by target."""
    if jax.device_count() != 8:
        raise SystemExit(
            f"needs 8 devices: XLA_FLAGS=--xla_force_host_platform_device_count=8 (has {jax.device_count()})"
        )
    cases = json.loads(sys.argv[1])
    print(json.dumps({name: {"sft": run_sft, "rl": run_rl}[case["kind"]](case) for name, case in cases.items()}))


if __name__ == "__main__":
    main()
