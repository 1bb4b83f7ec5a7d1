"""The KV cache: fixed-shape keys/values per layer group, the segment id of every slot, and the write offset."""

from __future__ import annotations

import flax.struct
import jax.numpy as jnp

from jaxseeker.model.config import ModelConfig

CACHE_AXES = ("layers", "batch", "seq", "kv_heads", "head_dim")


@flax.struct.dataclass
class KVCache:
    """k, v: one `[layers, batch, max_len, kv_heads, head_dim]` array per layer group; segment_ids
    `[batch, max_len]` (0 = empty or padding); end `[batch]`: where the next token of each row is written."""

    k: tuple[jnp.ndarray, ...]
    v: tuple[jnp.ndarray, ...]
    segment_ids: jnp.ndarray
    end: jnp.ndarray

    @property
    def max_len(self) -> int:
        """Slots per row."""
        return self.segment_ids.shape[1]


def init_cache(cfg: ModelConfig, batch: int, max_len: int, dtype: str | None = None) -> KVCache:
    """An empty cache of `batch` rows × `max_len` slots (dtype defaults to the compute dtype)."""
    dt = jnp.dtype(dtype or cfg.compute_dtype)
    shapes = [(n, batch, max_len, cfg.num_kv_heads, cfg.head_dim) for _, n in cfg.layer_groups]
    return KVCache(
        k=tuple(jnp.zeros(s, dt) for s in shapes),
        v=tuple(jnp.zeros(s, dt) for s in shapes),
        segment_ids=jnp.zeros((batch, max_len), jnp.int32),
        end=jnp.zeros((batch,), jnp.int32),
    )


def reset_rows(cache: KVCache, rows: jnp.ndarray) -> KVCache:
    """Empty the rows where `rows` `[batch]` is True (their slots become padding, end 0); keys stay as
    garbage that the segment ids mask out."""
    return cache.replace(
        segment_ids=jnp.where(rows[:, None], 0, cache.segment_ids),
        end=jnp.where(rows, 0, cache.end),
    )
