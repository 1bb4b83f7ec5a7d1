"""The length of the engine's KV cache: the smallest `min_window · 2^k` (capped at `max_len`, in whole attention
blocks) that covers every context the engine holds, grown when a call needs more and halved when the contexts fall
below 3/8 of it; and the cache's shardings at each length on the engine's mesh."""

from __future__ import annotations

from jaxseeker.generation import layout
from jaxseeker.model import ModelConfig


class CacheWindow:
    """The cache lengths of an engine of `slots` rows of at most `max_len` tokens (see the module docstring)."""

    def __init__(
        self, cfg: ModelConfig, *, slots: int, max_len: int, min_window: int, block: int, mesh=None, rules=None
    ):
        self.cfg, self.slots, self.max_len, self.min_window, self.block = cfg, slots, max_len, min_window, block
        self.mesh, self.rules = mesh, rules
        self._shardings: dict[int, layout.LayerCache] = {}

    def length(self, need: int) -> int:
        """The cache length covering `need` slots: min_window · 2^k, capped at max_len, rounded up to whole attention
        blocks."""
        window = self.min_window
        while window < need:
            window *= 2
        window = min(window, self.max_len)
        return -(-window // self.block) * self.block

    def sharding(self, length: int) -> layout.LayerCache | None:
        """The NamedShardings of a cache of `length` slots per row (None without a mesh)."""
        if self.mesh is None:
            return None
        if length not in self._shardings:
            self._shardings[length] = layout.cache_shardings(self.cfg, self.slots, length, self.mesh, self.rules)
        return self._shardings[length]

    def fit(self, cache: layout.LayerCache, need: int) -> layout.LayerCache:
        """`cache` resized (if it must be) to cover `need` slots, `need` being at least every held context's end."""
        length = cache.length
        if need > length or (length > self.min_window and need <= length * 3 // 8):
            target = self.length(need)
            if target != length:
                return layout.resize(cache, length=target, sharding=self.sharding(target))
        return cache
