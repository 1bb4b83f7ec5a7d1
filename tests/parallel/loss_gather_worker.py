"""Where the compiled steps gather the unembedding, on 8 fake CPU devices; prints one JSON line.

Run by `test_loss_gather.py` in a subprocess whose `XLA_FLAGS` asks for 8 host devices (the flag must be set
before JAX starts). On an fsdp = 8 mesh, where the `[embed, vocab]` unembedding (the lm_head, or the transposed
embedding when tied) is split by `embed`, it compiles (never runs) the SFT step with `sft_loss` (tied and untied),
the step with the RL loss (`rl_loss`, entropy bonus on) and the RL old-log-prob pass, all with the chunked loss over
several chunks, and reports per case the all-gathers whose result is the whole unembedding: inside a loop (the
chunk loop's forward, recompute or backward) or outside.
"""

import functools
import json
import sys
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hlo_support import all_gathers

from jaxseeker import model
from jaxseeker.data.packing import ROW_KEYS
from jaxseeker.parallel import MeshConfig, batch_sharding, make_mesh, replicated
from jaxseeker.train.optimizer import OptimizerConfig, make_optimizer
from jaxseeker.train.rl.step import RLStepConfig, make_rl_step, rl_loss
from jaxseeker.train.sft.step import make_sft_step, sft_loss
from jaxseeker.train.state import abstract_train_state

ROWS, SEQ, CHUNK = 8, 64, 16  # 4 chunks of the sequence
VOCAB = 1000  # unlike every other dimension of the tiny model, so a [64, 1000] gather is the unembedding's
OPT = OptimizerConfig(lr=1e-4, warmup_steps=0, total_steps=10)
RL = RLStepConfig(chunk_size=CHUNK, entropy_coef=0.01)


def unembed_gathers(hlo: str, cfg: model.ModelConfig) -> dict[str, int]:
    """How many all-gathers of the whole unembedding (either orientation) run inside a loop and outside one."""
    whole = ([cfg.hidden_size, cfg.vocab_size], [cfg.vocab_size, cfg.hidden_size])
    found = [g["in_loop"] for g in all_gathers(hlo) if g["dims"] in whole]
    return {"in_loop": sum(found), "outside": len(found) - sum(found)}


def step_hlo(cfg: model.ModelConfig, loss_fn, mesh, keys: tuple[str, ...]) -> str:
    """The compiled text of the SFT step with `loss_fn` over a `[ROWS, SEQ]` batch of `keys` (plus `loss_scale`)."""
    tx = make_optimizer(OPT)
    state = abstract_train_state(functools.partial(model.init_params, cfg), model.param_axes(cfg), tx, mesh)
    sharding = batch_sharding(mesh, (ROWS, SEQ))
    batch = {
        k: jax.ShapeDtypeStruct((ROWS, SEQ), np.float32 if k.endswith(("logp", "advantages")) else np.int32)
        for k in keys
    }
    batch_shardings = {k: sharding for k in keys}
    if "advantages" in keys:
        batch["loss_scale"] = jax.ShapeDtypeStruct((), np.float32)
        batch_shardings["loss_scale"] = replicated(mesh)
    step = make_sft_step(
        cfg,
        tx,
        loss_fn,
        mesh=mesh,
        state_shardings=jax.tree.map(lambda x: x.sharding, state),
        batch_sharding=batch_shardings,
    )
    return step.lower(state, batch).compile().as_text()


def logprobs_hlo(cfg: model.ModelConfig, mesh) -> str:
    """The compiled text of the RL step's old-log-prob pass."""
    step = make_rl_step(cfg, RL, OPT, mesh=mesh, rows=ROWS, seq=SEQ)
    params = jax.eval_shape(functools.partial(model.init_params, cfg), jax.random.PRNGKey(0))
    params = jax.tree.map(
        lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), params, step.state_shardings.params
    )
    batch = {k: jax.ShapeDtypeStruct((ROWS, SEQ), np.int32) for k in ROW_KEYS}
    return step.logprobs.lower(params, batch).compile().as_text()


def main() -> None:
    mesh = make_mesh(MeshConfig(1, 8, 1, 1))
    tied = model.ModelConfig.tiny(vocab_size=VOCAB)
    untied = model.ModelConfig.tiny(vocab_size=VOCAB, tie_word_embeddings=False)
    sft = functools.partial(sft_loss, chunk_size=CHUNK)
    rl = functools.partial(rl_loss, step_cfg=RL)
    rl_keys = ROW_KEYS + ("old_logp", "advantages")
    report = {
        "sft_tied": unembed_gathers(step_hlo(tied, sft, mesh, ROW_KEYS), tied),
        "sft_untied": unembed_gathers(step_hlo(untied, sft, mesh, ROW_KEYS), untied),
        "rl_untied": unembed_gathers(step_hlo(untied, rl, mesh, rl_keys), untied),
        "rl_logprobs_untied": unembed_gathers(logprobs_hlo(untied, mesh), untied),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
