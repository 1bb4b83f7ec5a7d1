"""The host's plan of an engine round over its paged cache: how many tokens each request may write, which requests
take free pages first (the earliest), which rows a decode call runs, and which request gives its pages back where none
can go on (the last to come in that part of the pool: vLLM's preemption by recomputation)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from jaxseeker.generation.pages import Pages
from jaxseeker.generation.requests import Event, Slot


def room(slot: Slot, max_len: int) -> int:
    """Tokens the request may still sample before its context fills `max_len`."""
    return max_len - (slot.end + 1)


def limit_reason(slot: Slot, max_len: int) -> str:
    """Why a turn that may take no more steps ends: its context is full, or its own budget spent."""
    return "context" if room(slot, max_len) == 0 else "length"


def steps_left(slot: Slot, steps: int, max_len: int) -> int:
    """The decode steps a running request may take in a call of `steps`, pages aside."""
    return min(steps, slot.max_new - len(slot.tokens), room(slot, max_len))


def by_arrival(slots: Sequence[Slot | None]) -> list[int]:
    """The held slots, the earliest request first: the order in which requests take free pages."""
    return sorted((r for r, s in enumerate(slots) if s is not None), key=lambda r: slots[r].arrival)


def decoding(slot: Slot | None) -> bool:
    """True for a running request whose context is all written (it decodes in the next call)."""
    return slot is not None and slot.running and not slot.prefill and slot.share is None


def reserve_decoding(slots: Sequence[Slot | None], pages: Pages, steps: int, max_len: int) -> None:
    """Pages for the next call's steps of every decoding request, the earliest first (before prefills take any)."""
    for row in by_arrival(slots):
        if decoding(slots[row]):
            pages.reserve(row, slots[row].end + steps_left(slots[row], steps, max_len))


def prefill_room(slots: Sequence[Slot | None], pages: Pages, chunk: int) -> np.ndarray:
    """`[slots]`: the context tokens each slot may write in its next prefill chunk, its pages reserved, the earliest
    request first (0: nothing to write, a prefix to wait for, or no page free)."""
    out = np.zeros(len(slots), np.int32)
    for row in by_arrival(slots):
        slot = slots[row]
        if slot.prefill and slot.share is None:
            out[row] = pages.reserve(row, slot.end + min(chunk, len(slot.prefill))) - slot.end
    return out


def decode_budget(
    slots: Sequence[Slot | None], pages: Pages, steps: int, max_len: int
) -> tuple[np.ndarray, list[Event]]:
    """(`[slots]`: the steps each request takes in the next decode call, within the pages it holds; the events of the
    running requests that may take none: their turn ends)."""
    budget, events = np.zeros(len(slots), np.int32), []
    for row, slot in enumerate(slots):
        if slot is None or not slot.running:
            continue
        budget[row] = steps_left(slot, steps, max_len)
        if budget[row] == 0:
            events.append(slot.pause(limit_reason(slot, max_len)))
        elif decoding(slot):  # a call writes positions end … end + budget - 1
            budget[row] = max(0, min(budget[row], pages.reserve(row, slot.end + budget[row]) - slot.end))
        else:
            budget[row] = 0  # its context is still being written (waiting for pages or its prefix)
    return budget, events


def decode_rows(budget: np.ndarray, slots: Sequence[Slot | None], buckets: Sequence[int]) -> np.ndarray:
    """The slots a decode call runs, in its order: those with a budget, longest context first (so a tile of rows
    attends over similar lengths), then idle ones up to the smallest of the rows `buckets` that holds them."""
    running = sorted(np.flatnonzero(budget), key=lambda r: -slots[r].end)
    n = next(b for b in buckets if b >= len(running))
    idle = [r for r in range(len(slots)) if budget[r] == 0][: n - len(running)]
    return np.asarray(running + idle, np.int32)


def stuck_parts(slots: Sequence[Slot | None], pages: Pages, moved: np.ndarray) -> list[int]:
    """The parts of the pool where a request runs and none went on this round (`moved` `[slots]`: the slot wrote
    context, decoded or ended its turn): no request there can go on for want of pages. A part is judged on its own,
    so a part held up does not wait for the others to go idle."""
    running = {pages.shard(r) for r, s in enumerate(slots) if s is not None and s.running}
    return sorted(running - {pages.shard(int(r)) for r in np.flatnonzero(moved)})


def preempt(slots: Sequence[Slot | None], pages: Pages, part: int = 0) -> None:
    """No request of pool part `part` can go on for want of pages: free those of the request that came last among
    the part's ones holding any, which writes its context again once pages are free (a paused request may be the
    one). RuntimeError when it is the only one holding pages: its context alone outgrows its part of the pool."""
    holders = [r for r, s in enumerate(slots) if s is not None and pages.shard(r) == part and pages.positions(r)]
    row = max(holders, key=lambda r: slots[r].arrival)
    slot = slots[row]
    if len(holders) == 1:
        raise RuntimeError(
            f"Engine.step: request {slot.request_id!r} needs more than the {pages.part_pages} pages of {pages.page} "
            "positions its part of the cache holds; give the engine more `pages`"
        )
    slot.prefill, slot.written, slot.end = slot.written + slot.prefill, [], 0
    pages.release(row)
