"""The host side of the engine's paged KV cache: which pages each slot holds, which are free, who shares them, and
the prefixes kept after their requests left.

The device only reads the page table (`generation.layout`); this keeps it. A slot takes pages as its context grows
(`reserve`), as many as are free; a slot that shares another's prompt takes that prompt's whole pages by reference
and copies only the page it goes on writing into (`share`); a page goes back to the free list when the last holder
lets go (`release`). A released request's written pages may be kept as a prefix of its tokens (`keep`), for a later
request that opens with the same tokens (a client resending a conversation): a kept prefix is dropped, the least
recently used first, when a page is wanted and none is free. Pages are counted per part of the pool: a slot takes
pages from its own part only (the part a mesh keeps on the slot's devices).

Written here rather than taken from a serving library: vLLM's and JetStream's block managers are tied to their own
schedulers and devices; this is the few lines of counting the engine needs.
"""

from __future__ import annotations

import collections
import dataclasses

import numpy as np

# Positions a page holds by default: attention reads each row's keys a page at a time, for tiles of
# `steps.DECODE_TILE` rows (`ragged_attention`); the rows of a call are ordered by length, so a tile reads about its
# rows' contexts.
PAGE = 128


def page_shape(max_len: int, page: int = PAGE) -> tuple[int, int]:
    """(positions a page, pages a slot) of a cache whose slots hold `max_len` positions: pages of `page` positions, at
    most the power of two that covers max_len."""
    page = min(page, 1 << (max_len - 1).bit_length())
    return page, -(-max_len // page)


@dataclasses.dataclass(frozen=True)
class Kept:
    """A prefix kept after its request left: its `tokens` (positions 0 … len - 1) on `pages` of pool part `part`."""

    part: int
    tokens: tuple[int, ...]
    pages: tuple[int, ...]


class Pages:
    """Pages of a pool of `shards` parts of `pages` pages each, for `slots` slots (split into the parts in order) of at
    most `row_pages` pages of `page` positions; `table` `[slots, row_pages]` is what the device calls read."""

    def __init__(self, slots: int, row_pages: int, pages: int, page: int, shards: int = 1):
        self.page, self.part_pages = page, pages
        self.table = np.zeros((slots, row_pages), np.int32)
        self._held: list[list[int]] = [[] for _ in range(slots)]
        self._refs = np.zeros((shards, pages), np.int32)
        self._free = [list(range(pages - 1, -1, -1)) for _ in range(shards)]  # popped from the end: page 0 first
        self._per_shard = slots // shards
        self._kept: collections.OrderedDict[int, Kept] = collections.OrderedDict()  # least recently used first
        self._kept_ids = 0

    def shard(self, slot: int) -> int:
        """The part of the pool slot `slot` takes its pages from."""
        return slot // self._per_shard

    def free(self) -> int:
        """Pages neither a slot nor a kept prefix holds, over every part."""
        return sum(len(f) for f in self._free)

    def positions(self, slot: int) -> int:
        """Positions the pages slot `slot` holds can take."""
        return len(self._held[slot]) * self.page

    def reserve(self, slot: int, positions: int) -> int:
        """Give slot `slot` pages for its first `positions` positions, as many as are free (kept prefixes dropped for
        them), and return the positions its pages then hold (fewer than asked when its part of the pool ran out)."""
        held = self._held[slot]
        want = min(-(-positions // self.page), self.table.shape[1])
        while len(held) < want and (at := self._pop_free(self.shard(slot))) is not None:
            self._take(slot, at)
        return self.positions(slot)

    def share(self, slot: int, donor: int, positions: int) -> tuple[int, tuple[int, int, int] | None]:
        """Slot `slot` (holding nothing) takes the first `positions` positions of slot `donor` (of the same part,
        already written): its whole pages by reference, and a page of its own for the rest of the last one. Returns
        (the positions shared, (part, donor's page, own page) to copy, or None): with no page free, only the whole
        pages are shared."""
        return self._share(slot, self._held[donor], positions)

    def keep(self, slot: int, tokens: tuple[int, ...]) -> None:
        """Slot `slot` lets go of its pages, those holding its written `tokens` kept as a prefix for later requests
        (`kept`, `share_kept`) until a page is wanted; the rest are released."""
        whole = -(-len(tokens) // self.page)
        if tokens:
            pages = tuple(self._held[slot][:whole])
            for at in pages:
                self._refs[self.shard(slot), at] += 1
            self._kept[self._kept_ids] = Kept(self.shard(slot), tuple(tokens), pages)
            self._kept_ids += 1
        self.release(slot)

    def kept(self, part: int) -> dict[int, tuple[int, ...]]:
        """The kept prefixes of pool part `part`: id → tokens."""
        return {key: k.tokens for key, k in self._kept.items() if k.part == part}

    def share_kept(self, slot: int, key: int, positions: int) -> tuple[int, tuple[int, int, int] | None]:
        """`share` from kept prefix `key` instead of a slot (it becomes the most recently used)."""
        self._kept.move_to_end(key)
        return self._share(slot, list(self._kept[key].pages), positions)

    def forget_kept(self) -> None:
        """Drop every kept prefix (new weights make their keys and values stale)."""
        while self._kept:
            self._drop_oldest(None)

    def release(self, slot: int) -> None:
        """Slot `slot` lets go of its pages; each one nothing else holds is free again."""
        shard = self.shard(slot)
        for at in self._held[slot]:
            self._let_go(shard, at)
        self._held[slot] = []
        self.table[slot] = 0

    def _share(self, slot: int, donor: list[int], positions: int) -> tuple[int, tuple[int, int, int] | None]:
        if self._held[slot]:
            raise ValueError(f"Pages.share: slot {slot} already holds pages")
        whole, rest = divmod(positions, self.page)
        for at in donor[:whole]:
            self._take(slot, at)
        shard = self.shard(slot)
        own = self._pop_free(shard) if rest else None
        if own is None:
            return whole * self.page, None
        self._take(slot, own)
        return positions, (shard, donor[whole], own)

    def _pop_free(self, part: int) -> int | None:
        """A free page of part `part`, dropping its least recently used kept prefixes until one is free (None: none)."""
        free = self._free[part]
        while not free and any(k.part == part for k in self._kept.values()):
            self._drop_oldest(part)
        return free.pop() if free else None

    def _drop_oldest(self, part: int | None) -> None:
        """Drop the least recently used kept prefix (of part `part`; None: of any)."""
        key = next(key for key, k in self._kept.items() if part is None or k.part == part)
        kept = self._kept.pop(key)
        for at in kept.pages:
            self._let_go(kept.part, at)

    def _let_go(self, part: int, at: int) -> None:
        self._refs[part, at] -= 1
        if not self._refs[part, at]:
            self._free[part].append(at)

    def _take(self, slot: int, at: int) -> None:
        """Slot `slot`'s next page is page `at` of its part."""
        held = self._held[slot]
        self.table[slot, len(held)] = at
        self._refs[self.shard(slot), at] += 1
        held.append(at)
