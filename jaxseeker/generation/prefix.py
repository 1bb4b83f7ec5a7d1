"""Prompt prefixes shared between an engine's requests: which held request's pages, or which prefix a released one
left (`Pages.keep`), a new prompt shares its leading tokens from (`Engine(share_prefix=…)`) instead of prefilling them
again, and the sharing once they are written."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from jaxseeker.generation import layout

if TYPE_CHECKING:
    from jaxseeker.generation.pages import Pages
    from jaxseeker.generation.requests import Slot


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens `a` and `b` share."""
    n = min(len(a), len(b))
    differ = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(differ[0]) if differ.size else n


def pick_donor(
    prompt: Sequence[int], held: Sequence[tuple[Sequence[int], int]], *, least: int, chunk: int
) -> tuple[int, int] | None:
    """(index in `held` of the (prompt, tokens written) whose prompt shares the most leading tokens with `prompt`,
    how many of them may be copied) or None.

    Never a prompt's last token, which enters the cache only when decoding starts. None under `least` tokens (or
    `least` 0), and None where those tokens are not written yet and waiting for them would not spare `prompt` a
    prefill call of `chunk` tokens (its tail would need as many chunks as the whole)."""
    if not least:
        return None
    best, most = None, least - 1
    for i, (other, _) in enumerate(held):
        n = min(common_prefix(prompt, other), len(prompt) - 1, len(other) - 1)
        if n > most:
            best, most = i, n
    if best is None:
        return None
    own = len(prompt) - 1
    if held[best][1] < most and -(-(own - most) // chunk) == -(-own // chunk):
        return None
    return best, most


def pick_kept(prompt: Sequence[int], kept: dict[int, Sequence[int]], *, least: int) -> tuple[int, int] | None:
    """(the key in `kept` of the kept prefix (`Pages.keep`) that shares the most leading tokens with `prompt`, how many
    of them) or None (under `least`, or `least` 0). Never a prompt's last token."""
    if not least:
        return None
    scored = [(min(common_prefix(prompt, tokens), len(prompt) - 1), key) for key, tokens in kept.items()]
    n, key = max(scored, default=(0, None))
    return None if n < least else (key, n)


def _hold(
    cache: layout.LayerCache, slot: Slot, shared: tuple[int, tuple[int, int, int] | None], tokens: Sequence[int]
) -> tuple[layout.LayerCache, int]:
    """(`cache` with the page to copy of a share (`Pages.share`'s (positions, copy)) copied, the positions shared):
    `slot` now holds the first of `tokens`, its prompt's rest left to prefill."""
    n, copy = shared
    if copy is not None:
        cache = layout.copy_page(cache, *(np.int32(i) for i in copy))
    slot.end, slot.prefill, slot.written, slot.share = n, slot.prefill[n:], list(tokens[:n]), None
    return cache, n


def share_at_submit(
    cache: layout.LayerCache,
    slot: Slot,
    row: int,
    slots: Sequence[Slot | None],
    pages: Pages,
    *,
    least: int,
    chunk: int,
) -> tuple[layout.LayerCache, int]:
    """(`cache`, the tokens shared now) after choosing where new request `slot` (in row `row`) takes its prompt's
    leading tokens from: a kept prefix (`Pages.keep`: shared at once, its tokens being written) or a held slot on the
    same part of the pool (`pick_donor`: `slot.share`, shared by `share_ready` once written), whichever holds more of
    them; the kept prefix where they hold as many."""
    part = pages.shard(row)
    held = [s for r, s in enumerate(slots) if s is not None and pages.shard(r) == part]
    donor = pick_donor(slot.prompt, [(s.prompt, s.end) for s in held], least=least, chunk=chunk)
    kept = pages.kept(part)
    pick = pick_kept(slot.prompt, kept, least=least)
    if pick is not None and (donor is None or pick[1] >= donor[1]):
        return _hold(cache, slot, pages.share_kept(row, *pick), kept[pick[0]])
    slot.share = None if donor is None else (held[donor[0]], donor[1])
    return cache, 0


def share_ready(cache: layout.LayerCache, slots: Sequence[Slot | None], pages: Pages) -> tuple[layout.LayerCache, int]:
    """(`cache` with every shared prefix whose tokens its donor has written now held by the waiting slot: the prefix's
    whole pages by reference, the rest of its last page copied (`Pages.share`), the tokens shared). A donor writes
    them before its prompt's end, so every wait ends; a request whose donor left first prefills its whole prompt."""
    shared = 0
    for row, slot in enumerate(slots):
        if slot is None or slot.share is None:
            continue
        donor, n = slot.share
        src = next((r for r, s in enumerate(slots) if s is donor), None)
        if src is None:
            slot.share = None
        elif donor.end >= n:
            cache, n = _hold(cache, slot, pages.share(row, src, n), donor.written)
            shared += n
    return cache, shared
