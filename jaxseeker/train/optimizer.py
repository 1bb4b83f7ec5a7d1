"""AdamW with warmup + cosine decay, global-norm clipping, masked weight decay and grad accumulation.

The transformation is  MultiSteps_k( clip_by_global_norm(c) → adamw(lr_t, b1, b2, eps, wd, mask) ):
gradients of k micro-batches are averaged, clipped to global norm c, then AdamW updates the f32
master params. lr_t rises linearly from 0 to `lr` over `warmup_steps` updates, then follows a
cosine down to `min_lr` at `total_steps` updates (WebSailor RFT: lr 5e-6, min 1e-10, wd 0.1).
Weight decay is off for norm scales and biases (leaves whose name ends in "norm" or "bias").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import optax

NO_DECAY_SUFFIXES = ("norm", "bias")


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
    """AdamW hyperparameters; steps count optimizer updates (one update = `grad_accum` micro-batches)."""

    lr: float = 1e-3  # peak learning rate, after the warm-up
    min_lr: float = 1e-5  # the cosine's end (lr = min_lr: constant after the warm-up)
    warmup_steps: int = 20  # updates of linear warm-up from 0
    total_steps: int = 1000  # updates until min_lr
    weight_decay: float = 0.1  # AdamW's, not applied to norm scales and biases
    b1: float = 0.9
    b2: float = 0.95
    eps: float = 1e-8  # Adam's epsilon
    clip_norm: float | None = 1.0  # clip the gradient to this global norm; null: no clipping
    grad_accum: int = 1  # micro-batches averaged into one update

    def __post_init__(self):
        checks = {
            "lr": self.lr > 0,
            "min_lr": 0 <= self.min_lr <= self.lr,
            "warmup_steps": 0 <= self.warmup_steps <= self.total_steps,
            "total_steps": self.total_steps >= 1,
            "weight_decay": self.weight_decay >= 0,
            "b1": 0 <= self.b1 < 1,
            "b2": 0 <= self.b2 < 1,
            "eps": self.eps > 0,
            "clip_norm": self.clip_norm is None or self.clip_norm > 0,
            "grad_accum": isinstance(self.grad_accum, int) and self.grad_accum >= 1,
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            values = {name: getattr(self, name) for name in bad}
            raise ValueError(
                f"OptimizerConfig: invalid {values} (need lr > 0, 0 <= min_lr <= lr, "
                "0 <= warmup_steps <= total_steps, total_steps >= 1, weight_decay >= 0, 0 <= b1, b2 < 1, "
                "eps > 0, clip_norm > 0 or None, grad_accum >= 1)"
            )

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> OptimizerConfig:
        """Build from a config mapping; unknown keys are an error listing the known ones."""
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ValueError(f"optimizer: unknown keys {unknown}; known keys: {known}")
        return cls(**values)


def lr_schedule(cfg: OptimizerConfig) -> optax.Schedule:
    """Learning rate at optimizer update n: linear 0 → lr over warmup, cosine lr → min_lr at total_steps."""
    if cfg.warmup_steps == cfg.total_steps:  # no cosine part (optax refuses an empty one): the warm-up alone
        return optax.linear_schedule(0.0, cfg.lr, cfg.warmup_steps)
    return optax.warmup_cosine_decay_schedule(
        init_value=0.0,
        peak_value=cfg.lr,
        warmup_steps=cfg.warmup_steps,
        decay_steps=cfg.total_steps,
        end_value=cfg.min_lr,
    )


def learning_rate_at(cfg: OptimizerConfig, train_step: jax.Array) -> jax.Array:
    """The learning rate applied by the update that micro-step `train_step` (0-based) contributes to."""
    return lr_schedule(cfg)(jnp.asarray(train_step) // cfg.grad_accum)


def weight_decay_mask(params: Any) -> Any:
    """True for leaves that get weight decay: all but norm scales and biases (by leaf name)."""

    def decays(path, _leaf) -> bool:
        last = path[-1] if path else None
        name = str(getattr(last, "key", getattr(last, "name", "")))
        return not name.endswith(NO_DECAY_SUFFIXES)

    return jax.tree.map_with_path(decays, params)


def make_optimizer(cfg: OptimizerConfig) -> optax.GradientTransformation:
    """The optax transformation described in the module docstring (MultiSteps only when grad_accum > 1)."""
    inner = optax.chain(
        optax.clip_by_global_norm(cfg.clip_norm) if cfg.clip_norm else optax.identity(),
        optax.adamw(
            lr_schedule(cfg),
            b1=cfg.b1,
            b2=cfg.b2,
            eps=cfg.eps,
            weight_decay=cfg.weight_decay,
            mask=weight_decay_mask,
        ),
    )
    if cfg.grad_accum == 1:
        return inner
    return optax.MultiSteps(inner, every_k_schedule=cfg.grad_accum).gradient_transformation()
