"""A toy next-token model (embed → MLP → vocab) with logical axes: compiles in about a second.

The real model's sharded step is tested in tests/parallel (in a subprocess with 8 devices); these
tests exercise the train state, optimizer, step and checkpoints with a model that costs nothing,
which also shows that any pure `loss_fn(params, batch, cfg)` plugs into the step.
"""

from __future__ import annotations

import dataclasses
import functools
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxseeker import losses
from jaxseeker.parallel import MeshConfig, make_mesh
from jaxseeker.train.optimizer import OptimizerConfig, make_optimizer
from jaxseeker.train.state import create_train_state

# Trade runtime speed for XLA compile time (about 3x faster compiles of these tiny steps).
FAST_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    vocab: int = 32
    embed: int = 16
    mlp: int = 32
    compute_dtype: str = "float32"


def toy_init(cfg: ToyConfig, rng: jax.Array) -> dict:
    """Params of the toy model; norms and biases start at 1 and 0."""
    shapes = {
        "embed": (cfg.vocab, cfg.embed),
        "up": (cfg.embed, cfg.mlp),
        "down": (cfg.mlp, cfg.embed),
        "lm_head": (cfg.embed, cfg.vocab),
    }
    sizes = [int(np.prod(s)) for s in shapes.values()]
    draws = jnp.split(0.3 * jax.random.normal(rng, (sum(sizes),)), np.cumsum(sizes)[:-1])  # one RNG kernel
    w = {name: d.reshape(shape) for (name, shape), d in zip(shapes.items(), draws)}
    return {
        "embed": w["embed"],
        "mlp": {"up": w["up"], "up_bias": jnp.zeros(cfg.mlp), "down": w["down"]},
        "final_norm": jnp.ones(cfg.embed),
        "lm_head": w["lm_head"],
    }


def toy_axes(cfg: ToyConfig) -> dict:
    """Logical axes of `toy_init`'s params."""
    return {
        "embed": ("vocab", "embed"),
        "mlp": {"up": ("embed", "mlp"), "up_bias": ("mlp",), "down": ("mlp", "embed")},
        "final_norm": ("embed",),
        "lm_head": ("embed", "vocab"),
    }


def toy_loss(params: dict, batch: dict, cfg: ToyConfig):
    """Masked NLL of predicting `targets` from each token alone."""
    x = params["embed"][batch["tokens"]]  # [batch, seq, embed]
    mlp = params["mlp"]
    h = jax.nn.gelu(x @ mlp["up"] + mlp["up_bias"]) @ mlp["down"]  # [batch, seq, embed]
    logits = (x + h) * params["final_norm"] @ params["lm_head"]  # [batch, seq, vocab]
    return losses.masked_nll(logits, batch["targets"], batch["loss_mask"])


def toy_batch(cfg: ToyConfig, batch: int = 4, seq: int = 8, seed: int = 0) -> dict:
    """Random tokens with a fixed next-token map to memorise; loss on the second half of each row."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, cfg.vocab, (batch, seq))
    loss_mask = np.zeros((batch, seq), np.int32)
    loss_mask[:, seq // 2 :] = 1
    return {
        "tokens": tokens,
        "targets": (tokens * 7 + 3) % cfg.vocab,
        "loss_mask": loss_mask,
        "segment_ids": np.ones((batch, seq), np.int32),
        "positions": np.tile(np.arange(seq), (batch, 1)),
    }


@pytest.fixture(scope="session")
def toy():
    """The toy model's config, init, axes, loss, a batch (numpy; do not modify) and XLA compile options."""
    cfg = ToyConfig()
    return types.SimpleNamespace(
        compiler_options=FAST_COMPILE,
        cfg=cfg,
        init=functools.partial(toy_init, cfg),
        axes=toy_axes(cfg),
        loss=toy_loss,
        batch=toy_batch(cfg),
    )


@pytest.fixture(scope="session")
def toy_state(toy):
    """A TrainState of the toy model (bf16 init → f32 master params; AdamW with 2-step accumulation)."""

    def bf16_init(rng):
        return jax.tree.map(lambda x: x.astype(jnp.bfloat16), toy.init(rng))

    mesh = make_mesh(MeshConfig())
    tx = make_optimizer(OptimizerConfig(grad_accum=2))
    state, shardings = create_train_state(bf16_init, toy.axes, tx, 0, mesh, compiler_options=toy.compiler_options)
    return types.SimpleNamespace(state=state, shardings=shardings, init=bf16_init, tx=tx, mesh=mesh)
