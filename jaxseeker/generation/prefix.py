"""Prompt prefixes shared between an engine's requests: which held request's cache row a new prompt copies its
leading tokens from (`Engine(share_prefix=…)`), instead of prefilling them again."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


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
