"""Prompt prefixes shared between an engine's requests: which held request's cache row a new prompt copies its
leading tokens from (`Engine(share_prefix=…)`), instead of prefilling them again, and the copy once they are written."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from jaxseeker.generation import layout

if TYPE_CHECKING:
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


def copy_ready(cache: layout.LayerCache, slots: Sequence[Slot | None]) -> tuple[layout.LayerCache, int]:
    """(`cache` with every shared prefix whose tokens its donor has written copied into the waiting slot's row, the
    tokens copied). A donor writes them before its prompt's end, so every wait ends; a request whose donor left first
    prefills its whole prompt."""
    copied = 0
    for row, slot in enumerate(slots):
        if slot is None or slot.share is None:
            continue
        donor, n = slot.share
        src = next((r for r, s in enumerate(slots) if s is donor), None)
        if src is None:
            slot.share = None
        elif donor.end >= n:
            cache = layout.copy_row(cache, np.int32(src), np.int32(row))
            slot.end, slot.prefill, slot.share = n, slot.prefill[n:], None
            copied += n
    return cache, copied
