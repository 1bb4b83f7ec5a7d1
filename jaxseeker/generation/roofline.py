"""The roofline of a generation workload: the least time this machine could take, from what the work must compute and
read, so that a benchmark's wall reads as a fraction of what the hardware allows.

A workload is its FLOPs (every prefilled and decoded token through the model, attention over each token's own causal
context) and the bytes a decode step must read (every weight once per step, each row's cached keys and values up to
its own context). Its roofline is FLOPs at the measured matmul ceiling plus bytes at the measured memory bandwidth
(`measure`): prefill is bound by the first, decode mostly by the second.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from jaxseeker.model import ModelConfig
from jaxseeker.model.flops import BYTES, active_params, fastest_call, kv_cache_bytes, matmul_ceiling


@dataclasses.dataclass(frozen=True)
class Workload:
    """What a generation run must compute and read: FLOPs of prefill and decode, bytes of weights and KV read."""

    prefill_flops: float
    decode_flops: float
    weight_bytes: float
    kv_bytes: float

    def seconds(self, flops_per_s: float, bytes_per_s: float) -> float:
        """The roofline: FLOPs at `flops_per_s` plus bytes at `bytes_per_s`."""
        flops, read = self.prefill_flops + self.decode_flops, self.weight_bytes + self.kv_bytes
        return flops / flops_per_s + read / bytes_per_s

    def __sub__(self, other: Workload) -> Workload:
        return Workload(*(a - b for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(other), strict=True)))


@dataclasses.dataclass
class Tally:
    """The work an engine's calls really needed, counted call by call (`Engine.tally`): the context tokens prefilled,
    the tokens decoded and kept (a stop's rolled-back tail and padding rows are not work), the keys each of them
    attended, and the decode steps in which at least one row kept a token (each reads every weight once)."""

    cfg: ModelConfig
    dtype: str
    prefill_tokens: int = 0
    prefill_contexts: int = 0
    decode_tokens: int = 0
    decode_contexts: int = 0
    decode_steps: int = 0

    def prefill(self, tokens: int, start: int) -> None:
        """A row's `tokens` context tokens written after its first `start`."""
        self.prefill_tokens += tokens
        self.prefill_contexts += _keys(tokens, start)

    def decode(self, tokens: int, start: int) -> None:
        """A row's `tokens` kept decode steps, the first at a context of `start` cached tokens."""
        self.decode_tokens += tokens
        self.decode_contexts += _keys(tokens, start)

    def workload(self) -> Workload:
        """The counted work as a `Workload`."""
        cfg, per_token = self.cfg, 2 * active_params(self.cfg)
        logits = 2 * cfg.hidden_size * cfg.vocab_size
        return Workload(
            self.prefill_tokens * (per_token - logits) + _attention_flops(cfg, self.prefill_contexts),
            self.decode_tokens * per_token + _attention_flops(cfg, self.decode_contexts),
            self.decode_steps * active_params(cfg) * BYTES[self.dtype],
            kv_cache_bytes(cfg, self.decode_contexts, self.dtype),
        )


def _attention_flops(cfg: ModelConfig, contexts: float) -> float:
    """Scores and values of queries attending `contexts` keys in all (summed over the queries)."""
    return 4 * cfg.num_layers * cfg.num_heads * cfg.head_dim * contexts


def _keys(tokens: int, start: int) -> int:
    """Keys attended by `tokens` consecutive tokens after `start` cached ones, each seeing itself and all before."""
    return tokens * start + tokens * (tokens + 1) // 2


def generate_workload(
    cfg: ModelConfig, *, rows: int, prompt_len: int, new_tokens: int, distinct_prompts: int, dtype: str = "float32"
) -> Workload:
    """The work of greedy generation of `new_tokens` tokens for `rows` rows of `prompt_len`-token prompts, of which
    `distinct_prompts` differ (a group's copies are prefilled once): every prompt token but the last prefilled (no
    logits), then one decode step per new token, all rows together, each row attending its own context."""
    tally = Tally(cfg, dtype, decode_steps=new_tokens)
    for _ in range(distinct_prompts):
        tally.prefill(prompt_len - 1, 0)  # the last prompt token is the first decode step's input
    for _ in range(rows):
        tally.decode(new_tokens, prompt_len - 1)
    return tally.workload()


def memory_bandwidth(nbytes: int = 1 << 28, repeats: int = 5) -> float:
    """Measured read bandwidth of the default device in bytes/s (the fastest of `repeats` jitted sums over `nbytes` of
    float32): the rate a decode step streams weights and cache at."""
    return nbytes / fastest_call(jax.jit(jnp.sum), jnp.ones((nbytes // 4,), jnp.float32), repeats=repeats)


def measure(n: int = 2048) -> tuple[float, float]:
    """(matmul FLOP/s, memory bytes/s) of this machine, measured now (`model.flops.matmul_ceiling` of an n³ product,
    `memory_bandwidth`): measure in the run a wall is compared against, as the machine may be shared."""
    return matmul_ceiling(n), memory_bandwidth()


def best(*measured: tuple[float, float]) -> tuple[float, float]:
    """The highest (FLOP/s, bytes/s) of several `measure`s: one taken while other work ran reads low, and a roofline
    at a low ceiling looks nearer than the hardware's."""
    return max(m[0] for m in measured), max(m[1] for m in measured)


def report(work: Workload, wall_s: float, ceilings: tuple[float, float]) -> str:
    """One line: a run's work, its roofline at the measured `ceilings` (FLOP/s, bytes/s) and its wall against it."""
    flops, read = work.prefill_flops + work.decode_flops, work.weight_bytes + work.kv_bytes
    roof = work.seconds(*ceilings)
    return (
        f"work {flops / 1e12:.2f} TFLOP and {read / 1e9:.1f} GB read: roofline {roof:.1f} s at the measured "
        f"{ceilings[0] / 1e9:.0f} GFLOP/s and {ceilings[1] / 1e9:.1f} GB/s; wall {wall_s:.1f} s, "
        f"{wall_s / max(roof, 1e-9):.2f}x the roofline"
    )
