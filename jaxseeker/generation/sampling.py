"""Token sampling as pure functions: greedy, temperature, top-k, top-p, with per-request PRNG keys.

The log-prob returned with each token is `log_softmax(logits / temperature)` at that token (temperature 1
when greedy), taken BEFORE top-k / top-p truncation: it is the log-probability under the policy that the
trainer recomputes, not under the truncated sampling distribution.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

_NEG_INF = float("-inf")


@dataclasses.dataclass(frozen=True)
class SamplingConfig:
    """How tokens are drawn. temperature 0 → greedy (argmax); top_k 0 and top_p 1 → no truncation."""

    temperature: float = 0.0  # 0: greedy
    top_p: float = 1.0  # nucleus sampling; 1: off
    top_k: int = 0  # 0: off
    seed: int = 0  # the sampling's randomness

    def __post_init__(self):
        if self.temperature < 0:
            raise ValueError(f"SamplingConfig.temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"SamplingConfig.top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"SamplingConfig.top_k must be >= 0 (0 = off), got {self.top_k}")

    @property
    def static(self) -> SamplingConfig:
        """This config with the seed zeroed: the part that shapes compiled code (the seed is passed traced)."""
        return dataclasses.replace(self, seed=0)

    @property
    def greedy(self) -> bool:
        """True when tokens are the argmax (temperature 0)."""
        return self.temperature == 0.0


def row_keys(seed: int | jnp.ndarray, request: jnp.ndarray, step: jnp.ndarray) -> jax.Array:
    """One PRNG key per row from (seed, request hash `[batch]`, token index `[batch]`): the same request
    draws the same randomness at the same step whichever slot it occupies. `seed` (a scalar, or one per
    row `[batch]`) may be traced."""
    seeds = jnp.broadcast_to(jnp.asarray(seed, jnp.int32), jnp.shape(request))  # [batch]
    return jax.vmap(lambda k, r, s: jax.random.fold_in(jax.random.fold_in(jax.random.key(k), r), s))(
        seeds, request, step
    )


def truncate(scaled: jnp.ndarray, *, top_k: int, top_p: float) -> jnp.ndarray:
    """Set to -inf the logits `[batch, vocab]` outside the top-k, then outside the nucleus.

    top-k keeps the k largest (ties at the k-th value are all kept). top-p keeps, per row, the smallest
    set of most likely tokens whose cumulative probability (of the top-k-renormalised distribution) is
    ≥ top_p; the kept probabilities are renormalised by the softmax that follows.
    """
    if top_k > 0 and top_k < scaled.shape[-1]:
        kth = jax.lax.top_k(scaled, top_k)[0][:, -1:]  # [batch, 1]
        scaled = jnp.where(scaled < kth, _NEG_INF, scaled)
    if top_p < 1.0:
        order = jnp.argsort(-scaled, axis=-1)  # [batch, vocab] most likely first
        sorted_logits = jnp.take_along_axis(scaled, order, axis=-1)
        probs = jax.nn.softmax(sorted_logits, axis=-1)
        before = jnp.cumsum(probs, axis=-1) - probs  # mass of the strictly more likely tokens
        keep_sorted = before < top_p  # the first token is always kept
        rows = jnp.arange(scaled.shape[0])[:, None]
        keep = jnp.zeros_like(keep_sorted).at[rows, order].set(keep_sorted)
        scaled = jnp.where(keep, scaled, _NEG_INF)
    return scaled


def sample(logits: jnp.ndarray, keys: jax.Array | None, sampling: SamplingConfig) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Draw one token per row of `logits` `[batch, vocab]` (f32) → (tokens `[batch]` int32, log-probs `[batch]`).

    keys: one PRNG key per row (`row_keys`); unused (may be None) when greedy. The log-prob is
    `log_softmax(logits / T)[token]` before truncation (T = 1 when greedy).
    """
    logits = logits.astype(jnp.float32)
    if sampling.greedy:
        tokens = jnp.argmax(logits, axis=-1).astype(jnp.int32)
        scaled = logits
    else:
        scaled = logits / sampling.temperature  # [batch, vocab]
        masked = truncate(scaled, top_k=sampling.top_k, top_p=sampling.top_p)
        tokens = jax.vmap(jax.random.categorical)(keys, masked).astype(jnp.int32)
    logprobs = jax.nn.log_softmax(scaled, axis=-1)  # [batch, vocab]
    return tokens, jnp.take_along_axis(logprobs, tokens[:, None], axis=-1)[:, 0]


def truncate_rows(scaled: jnp.ndarray, top_k: jnp.ndarray, top_p: jnp.ndarray) -> jnp.ndarray:
    """`truncate` with one top-k `[batch]` (0 = off) and one top-p `[batch]` per row, both traced."""
    vocab = scaled.shape[-1]
    order = jnp.argsort(-scaled, axis=-1)  # [batch, vocab] most likely first
    sorted_logits = jnp.take_along_axis(scaled, order, axis=-1)
    kth = jnp.take_along_axis(sorted_logits, jnp.clip(top_k - 1, 0, vocab - 1)[:, None], axis=-1)  # [batch, 1]
    kth = jnp.where(top_k[:, None] > 0, kth, _NEG_INF)
    sorted_logits = jnp.where(sorted_logits < kth, _NEG_INF, sorted_logits)  # ties at the k-th value kept
    probs = jax.nn.softmax(sorted_logits, axis=-1)
    before = jnp.cumsum(probs, axis=-1) - probs  # mass of the strictly more likely tokens
    kept = jnp.where(before < top_p[:, None], sorted_logits, _NEG_INF)  # the first token is always kept
    rows = jnp.arange(scaled.shape[0])[:, None]
    return jnp.zeros_like(scaled).at[rows, order].set(kept)


def sample_rows(
    logits: jnp.ndarray, keys: jax.Array, temperature: jnp.ndarray, top_p: jnp.ndarray, top_k: jnp.ndarray
) -> tuple[jnp.ndarray, jnp.ndarray]:
    """`sample` with each row's own temperature `[batch]` (0 = greedy), top-p `[batch]` and top-k `[batch]`.

    logits `[batch, vocab]`; keys: one per row (`row_keys`), unused on greedy rows. The same tokens and
    log-probs as `sample` with that row's SamplingConfig; the sort of top-k / top-p is skipped when no
    sampled row truncates.
    """
    logits = logits.astype(jnp.float32)
    greedy = temperature <= 0.0  # [batch]
    scaled = logits / jnp.where(greedy, 1.0, temperature)[:, None]  # [batch, vocab]
    truncating = jnp.any(~greedy & ((top_k > 0) | (top_p < 1.0)))
    masked = jax.lax.cond(truncating, lambda s: truncate_rows(s, top_k, top_p), lambda s: s, scaled)
    drawn = jax.vmap(jax.random.categorical)(keys, masked)  # [batch]
    tokens = jnp.where(greedy, jnp.argmax(logits, axis=-1), drawn).astype(jnp.int32)
    logprobs = jax.nn.log_softmax(scaled, axis=-1)  # [batch, vocab]
    return tokens, jnp.take_along_axis(logprobs, tokens[:, None], axis=-1)[:, 0]
