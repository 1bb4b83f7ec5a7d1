"""The two compiled device steps of the engine: chunked prefill into some cache slots, and several decode
steps over some slots in one call. Both donate the cache and compile once per rows bucket (the cache's pool and page
tables are of fixed size)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from jaxseeker.generation.cached_forward import decode_forward, prefill_forward, unrolled_prefill
from jaxseeker.generation.layout import LayerCache
from jaxseeker.generation.sampling import SamplingConfig, row_keys, sample, sample_rows
from jaxseeker.model import ModelConfig

DECODE_TILE = 4  # rows whose keys a decode call's attention reads together (`ragged_attention`'s tile)


def _constrain(cache: LayerCache, sharding: LayerCache | None) -> LayerCache:
    """Pin the cache to its sharding (a LayerCache of NamedShardings) when one is given."""
    return cache if sharding is None else jax.lax.with_sharding_constraint(cache, sharding)


@functools.partial(jax.jit, static_argnames=("cfg", "sharding"), donate_argnames="cache")
def prefill(
    params: dict,
    cache: LayerCache,
    rows: jnp.ndarray,
    tokens: jnp.ndarray,
    counts: jnp.ndarray,
    ends: jnp.ndarray,
    table: jnp.ndarray,
    *,
    cfg: ModelConfig,
    sharding: LayerCache | None = None,
) -> LayerCache:
    """Write `tokens` `[n, chunk]` into cache slots `rows` `[n]` (distinct) at each slot's end; `params` stacked as
    `model.init_params` makes them (`cached_forward.prefill_forward` scans the layers) or in the engine's per-layer
    layout (`layout.engine_params`: the layers unrolled).

    counts `[n]`: each row's real tokens, left-aligned (`end` advances by them; a row of padding only writes
    nothing). ends `[slots]` and table `[slots, row_pages]` set every slot's end and page table first (the host owns
    both, so rolling back is free); the pages a row writes into must be its own. When n equals the number of slots,
    `rows` must be `arange(slots)`. The unrolled layers write the pools in place; the scanned ones stack each group's
    pools for the scan. No logits are computed.
    """
    cache = cache.replace(end=ends, table=table)
    picked = None if rows.shape[0] == ends.shape[0] else rows  # None: every slot in order
    forward = unrolled_prefill if "layers" in params else prefill_forward
    return _constrain(forward(params, tokens, counts, picked, cache, cfg), sharding)


@functools.partial(jax.jit, static_argnames=("cfg", "sampling", "steps", "sharding", "tile"), donate_argnames="cache")
def decode(
    params: dict,
    cache: LayerCache,
    rows: jnp.ndarray | None,
    tokens: jnp.ndarray,
    ends: jnp.ndarray,
    table: jnp.ndarray,
    budget: jnp.ndarray,
    request: jnp.ndarray,
    count: jnp.ndarray,
    seed: jnp.ndarray,
    row_sampling: tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray] | None = None,
    *,
    cfg: ModelConfig,
    sampling: SamplingConfig | None,
    steps: int,
    tile: int,
    sharding: LayerCache | None = None,
) -> tuple[LayerCache, jnp.ndarray, jnp.ndarray]:
    """`steps` decode steps over the cache slots `rows` `[n]` (distinct; None: every slot in order) → (cache, tokens
    `[n, steps]`, log-probs `[n, steps]`). Attention reads each row's own keys only (`ragged_attention`, page by
    page, tiles of `tile` rows: order the rows by length); the slots not in `rows` are not touched.

    tokens `[n]`: each row's newest context token, not yet in the cache; a step writes it at the row's
    end and samples the next one from its logits. ends `[slots]`, table `[slots, row_pages]`: every slot's end and
    page table (the pages a row writes into must be its own). budget `[n]`: how many steps each
    row takes (0 = idle); a row past its budget writes nothing, keeps its end and its input token.
    request `[n]` and count `[n]` (tokens this request has sampled before) key the PRNG per (seed, request,
    step); the seed is a traced scalar (`sampling.seed` is ignored, so new seeds do not recompile).
    Per-row sampling: `sampling=None`, `row_sampling` = (temperature, top_p, top_k), each `[n]` and traced, and
    `seed` may be one per row `[n]`.
    Outputs past a row's budget are meaningless. Every running row's end + budget must fit in its pages.
    """
    n = tokens.shape[0]
    cache = cache.replace(end=ends, table=table)

    def body(i, carry):
        cache, tok, out_tok, out_lp = carry
        active = i < budget  # [n]
        logits, cache = decode_forward(params, tok, active, rows, cache, cfg, tile=tile)
        if sampling is None:
            new, lp = sample_rows(logits, row_keys(seed, request, count + i), *row_sampling)  # [n], [n]
        else:
            keys = None if sampling.greedy else row_keys(seed, request, count + i)
            new, lp = sample(logits, keys, sampling)  # [n], [n]
        tok = jnp.where(active, new, tok)
        return cache, tok, out_tok.at[:, i].set(new), out_lp.at[:, i].set(lp)

    init = (cache, tokens, jnp.zeros((n, steps), jnp.int32), jnp.zeros((n, steps), jnp.float32))
    cache, _, out_tok, out_lp = jax.lax.fori_loop(0, steps, body, init)
    return _constrain(cache, sharding), out_tok, out_lp
