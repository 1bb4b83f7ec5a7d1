"""LoRA adapters as their own pytree beside the frozen params: initialisation, logical axes, attach and merge.

A target matrix W of a layer (`q`, `k`, `v`, `o`, `gate`, `up`, `down`; axes `[layers, (experts,) in…, out…]`
as in `params.param_axes`) gets two factors, A `[layers, (experts,) in…, lora_rank]` and
B `[layers, (experts,) lora_rank, out…]`, and the adapted layer computes x·W + s·(x·A)·B with s = alpha / rank
(Hu et al. 2021, arXiv 2106.09685; PEFT's `lora_A` is A transposed, `lora_B` is B transposed). A starts
uniform in ±1/√fan_in (PEFT's default Kaiming-uniform with a = √5) and B at zero, so an adapted model starts
equal to its base.

Two ways to apply them, both pure functions of (params, adapters):
  `attach_lora`  puts the factors (B scaled by s) beside each layer's weights under the key "lora"; the layers
                 then add the low-rank term to their matmuls (`layers.add_lora`). Training runs this way: W + s·A·B
                 is never formed, and the backward pass computes no gradient of the frozen W (in full fine-tuning
                 those weight-gradient matmuls are about a third of the FLOPs).
  `merge_lora`   returns the params with W + s·A·B in place of W: plain weights again, for generation and export.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp

from jaxseeker.model.config import ConfigError, ModelConfig
from jaxseeker.model.params import Axes, param_axes, param_shapes

# Per-layer matrices LoRA may adapt, and how many of each one's axes (after `layers` and, for MoE expert
# weights, `experts`) are its input (the axes x is contracted over); the rest are its output.
TARGET_INPUTS = {"q": 1, "k": 1, "v": 1, "o": 2, "gate": 1, "up": 1, "down": 1}
TARGETS = tuple(TARGET_INPUTS)
# The module each target is in a Hugging Face Llama / Qwen layer (PEFT's `target_modules`).
HF_MODULES = {
    "q": "q_proj",
    "k": "k_proj",
    "v": "v_proj",
    "o": "o_proj",
    "gate": "gate_proj",
    "up": "up_proj",
    "down": "down_proj",
}
RANK_AXIS = "lora_rank"


@dataclasses.dataclass(frozen=True)
class LoraConfig:
    """Low-rank adapters of a model: `rank` (0 = off: full fine-tuning), `alpha` (the update is scaled by
    alpha / rank), `targets` (which per-layer matrices get adapters)."""

    rank: int = 0  # 0: no adapters (full fine-tuning)
    alpha: float = 16.0  # the update is scaled by alpha / rank
    targets: tuple[str, ...] = TARGETS  # per-layer matrices adapted: q, k, v, o, gate, up, down

    def __post_init__(self):
        targets = (self.targets,) if isinstance(self.targets, str) else tuple(self.targets)
        object.__setattr__(self, "targets", targets)
        if isinstance(self.rank, bool) or not isinstance(self.rank, int) or self.rank < 0:
            raise ConfigError(f"lora.rank: must be an integer >= 0 (0: no adapters), got {self.rank!r}")
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, int | float) or not self.alpha > 0:
            raise ConfigError(f"lora.alpha: must be a number > 0, got {self.alpha!r}")
        unknown = [t for t in targets if t not in TARGET_INPUTS]
        if unknown:
            raise ConfigError(f"lora.targets: {unknown[0]!r} is not one of {list(TARGETS)}")
        if not targets or len(set(targets)) != len(targets):
            raise ConfigError(
                f"lora.targets: give each of {list(TARGETS)} at most once, at least one; got {list(targets)}"
            )

    @property
    def enabled(self) -> bool:
        """Whether there are adapters at all (rank > 0)."""
        return self.rank > 0

    @property
    def scale(self) -> float:
        """s = alpha / rank, the factor of A·B in the adapted weight."""
        return self.alpha / self.rank


def _split(name: str, axes: Axes) -> tuple[Axes, Axes, Axes]:
    """(leading, input, output) parts of the logical axes `axes` of target `name`."""
    lead = 2 if axes[1] == "experts" else 1
    n_in = TARGET_INPUTS[name]
    return axes[:lead], axes[lead : lead + n_in], axes[lead + n_in :]


def lora_axes(cfg: ModelConfig, lora: LoraConfig) -> dict:
    """The logical axes of every adapter leaf, in the structure of `init_lora(cfg, lora, …)`: a target's own axes
    with `lora_rank` (replicated by the rules) in place of its output (A) or input (B) axes."""
    out = []
    for group in param_axes(cfg)["blocks"]:
        adapted = {}
        for name in lora.targets:
            lead, ins, outs = _split(name, group[name])
            adapted[name] = {"a": lead + ins + (RANK_AXIS,), "b": lead + (RANK_AXIS,) + outs}
        out.append(adapted)
    return {"blocks": tuple(out)}


def lora_shapes(cfg: ModelConfig, lora: LoraConfig) -> dict:
    """The shape of every adapter leaf, in the structure of `init_lora(cfg, lora, …)`."""
    out = []
    for axes, shapes in zip(param_axes(cfg)["blocks"], param_shapes(cfg)["blocks"]):
        group = {}
        for name in lora.targets:
            lead, ins, _ = _split(name, axes[name])
            w = shapes[name]  # [layers, (experts,) in…, out…]
            cut = len(lead) + len(ins)
            group[name] = {"a": w[:cut] + (lora.rank,), "b": w[: len(lead)] + (lora.rank,) + w[cut:]}
        out.append(group)
    return {"blocks": tuple(out)}


@functools.partial(jax.jit, static_argnums=(0, 1))
def init_lora(cfg: ModelConfig, lora: LoraConfig, rng: jax.Array) -> dict:
    """Fresh float32 adapters: A uniform in ±1/√fan_in (fan_in: the product of the target's input axes), B zero."""
    if not lora.enabled:
        raise ConfigError("lora.rank is 0: there are no adapters to initialise")
    shapes = lora_shapes(cfg, lora)
    out = []
    for g, group in enumerate(shapes["blocks"]):
        leaves = {}
        for i, (name, ab) in enumerate(group.items()):
            fan_in = math.prod(ab["a"][-1 - TARGET_INPUTS[name] : -1])
            bound = 1.0 / math.sqrt(fan_in)
            key = jax.random.fold_in(jax.random.fold_in(rng, g), i)
            leaves[name] = {
                "a": jax.random.uniform(key, ab["a"], jnp.float32, -bound, bound),
                "b": jnp.zeros(ab["b"], jnp.float32),
            }
        out.append(leaves)
    return {"blocks": tuple(out)}


def attach_lora(params: dict, adapters: dict, lora: LoraConfig) -> dict:
    """`params` with each layer group's adapters beside its weights (key "lora", B scaled by alpha / rank): the
    model's layers then compute x·W + s·(x·A)·B (`layers.add_lora`); W is not changed."""
    blocks = tuple(
        {**group, "lora": {name: {"a": ab["a"], "b": lora.scale * ab["b"]} for name, ab in adapted.items()}}
        for group, adapted in zip(params["blocks"], adapters["blocks"])
    )
    return {**params, "blocks": blocks}


def merge_lora(params: dict, adapters: dict, cfg: ModelConfig, lora: LoraConfig) -> dict:
    """`params` with W + (alpha / rank)·A·B in place of every adapted W, summed in float32 and cast back to W's
    dtype: plain weights for generation and export, equal to the attached model's up to rounding."""
    blocks = []
    for axes, group, adapted in zip(param_axes(cfg)["blocks"], params["blocks"], adapters["blocks"]):
        group = dict(group)
        for name, ab in adapted.items():
            n_lead = len(_split(name, axes[name])[0])
            w = group[name]  # [layers, (experts,) in…, out…]
            lead = w.shape[:n_lead]
            a = ab["a"].astype(jnp.float32).reshape(lead + (-1, lora.rank))  # [layers, (experts,) in, lora_rank]
            b = ab["b"].astype(jnp.float32).reshape(lead + (lora.rank, -1))  # [layers, (experts,) lora_rank, out]
            delta = jnp.matmul(a, b).reshape(w.shape)  # [layers, (experts,) in…, out…]
            group[name] = (w.astype(jnp.float32) + lora.scale * delta).astype(w.dtype)
        blocks.append(group)
    return {**params, "blocks": tuple(blocks)}
