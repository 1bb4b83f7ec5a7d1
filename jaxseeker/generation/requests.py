"""The engine's host side of a request: its state in a slot, the event that reports a paused turn, and the stop check
(EOS ids and stop strings) run on the tokens each decode call returns."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from jaxseeker.generation.sampling import SamplingConfig

_REPLACEMENT = "\ufffd"  # what a token holding part of a multi-byte character decodes to on its own


@dataclasses.dataclass
class Event:
    """What `Engine.step()` reports for a request that paused or ended this round.

    tokens / logprobs: sampled since the last event of this request (stop tokens included); the log-prob
    is log_softmax(logits / temperature) at the token, before top-k / top-p (temperature 1 when greedy).
    reason: "stop" (stop string matched: paused), "eos" (an EOS id: paused), "length" (this turn's
    max_new_tokens reached: paused), "context" (the slot's cache is full: paused, cannot grow).
    stop: the stop string matched ("stop"), or the EOS token's text (its id as a string without `decode`).
    """

    request_id: str
    tokens: list[int]
    logprobs: list[float]
    reason: str
    stop: str | None = None


@dataclasses.dataclass
class Slot:
    """Host state of one occupied slot."""

    request_id: str
    request: int  # the request's random stream (its key), keys the PRNG
    prefill: list[int]  # context tokens still to write into the cache
    last: int  # newest context token, not yet in the cache (next decode input)
    max_new: int  # token budget of the current turn
    end: int = 0  # tokens written in the cache
    sampled: int = 0  # tokens sampled by this request so far (PRNG step)
    running: bool = True
    sampling: SamplingConfig | None = None  # the request's own (else the engine's)
    tokens: list[int] = dataclasses.field(default_factory=list)  # sampled this turn
    logprobs: list[float] = dataclasses.field(default_factory=list)
    prompt: tuple[int, ...] = ()  # the request's prompt (cache position i holds prompt[i] once written)
    share: tuple[Slot, int] | None = None  # (the slot whose pages hold this prompt's first n tokens, n)
    written: list[int] = dataclasses.field(default_factory=list)  # the tokens at positions 0 … end - 1
    arrival: int = 0  # submission order: the last to come is the first preempted

    def pause(self, reason: str, stop: str | None = None) -> Event:
        """End the turn: its event, with the tokens sampled since the last one."""
        event = Event(self.request_id, self.tokens, self.logprobs, reason, stop)
        self.running, self.tokens, self.logprobs = False, [], []
        return event


class Stops:
    """Where a turn ends in newly sampled tokens: just after the first EOS id or stop string.

    A stop string is looked for in the decoded tail of the turn only when one of the new tokens could complete it:
    its own text holds the last character of some stop string (or part of a multi-byte character). A token's text is
    decoded once and kept, so the check of a call costs a set lookup a token and, rarely, one decode of the tail.
    A stop string ending in white space is always looked for (a tokenizer may drop a lone token's leading space).
    """

    def __init__(
        self, eos_ids: Sequence[int], stop_strings: Sequence[str], decode: Callable[[list[int]], str] | None
    ) -> None:
        if stop_strings and decode is None:
            raise ValueError("Engine: stop_strings need a `decode` function (token ids -> text)")
        if any(not s for s in stop_strings):
            raise ValueError(f"Engine: stop_strings must be non-empty, got {list(stop_strings)}")
        self.eos_ids = frozenset(int(t) for t in eos_ids)
        self.strings = tuple(stop_strings)
        self._decode = decode
        self._window = max((len(s) for s in self.strings), default=0) + 2  # tokens re-decoded before the new ones
        self._last_chars = frozenset(s[-1] for s in self.strings)
        self._always = any(s[-1].isspace() for s in self.strings)
        self._may_end: dict[int, bool] = {}

    def find(self, before: list[int], new: list[int]) -> tuple[int, str | None, str | None]:
        """(tokens of `new` to keep, reason, stop) after the turn's earlier tokens `before`: reason "eos" or "stop",
        or None (keep all)."""
        strings = self._may_complete(new) and self._stop_in(before + new, len(new)) is not None
        for j, tok in enumerate(new):
            if tok in self.eos_ids:
                return j + 1, "eos", self._decode([tok]) if self._decode else str(tok)
            stop = self._stop_in(before + new[: j + 1], 1) if strings else None
            if stop is not None:
                return j + 1, "stop", stop
        return len(new), None, None

    def _may_complete(self, new: list[int]) -> bool:
        """False when no token of `new` can be the end of a stop string (see the class docstring)."""
        if not self.strings:
            return False
        if self._always:
            return True
        for tok in new:
            if tok not in self._may_end:
                text = self._decode([tok])
                self._may_end[tok] = _REPLACEMENT in text or any(c in text for c in self._last_chars)
            if self._may_end[tok]:
                return True
        return False

    def _stop_in(self, turn: list[int], n_new: int) -> str | None:
        """The stop string in the decoded tail of this turn (its last `n_new` tokens and a window before)."""
        text = self._decode(turn[-(self._window + n_new - 1) :])
        return next((s for s in self.strings if s in text), None)


def check_budget(caller: str, request_id: str, max_new_tokens: int) -> None:
    """Refuse a negative token budget, naming the request."""
    if max_new_tokens < 0:
        raise ValueError(f"Engine.{caller}: max_new_tokens of {request_id!r} must be >= 0, got {max_new_tokens}")


def call_rows(waiting: int, slots: int) -> int:
    """Rows of a prefill call when `waiting` slots have context to write: the power of two that holds them (at most
    every slot) where its padding rows are at most an eighth of the call, else the largest power of two below, the
    rest left to the next call. A padding row costs a real one's FLOPs; another call costs a read of the weights."""
    n = min(1 << (waiting - 1).bit_length(), slots)
    return n if n - waiting <= n // 8 else 1 << (waiting.bit_length() - 1)


def prefill_batch(
    slots: list[Slot | None], chunk: int, room: np.ndarray, every: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The next prefill call: (rows `[n]`, tokens `[n, chunk]`, real tokens a row `[n]`) with the next chunk (at most
    `room` `[slots]` tokens: what a slot's pages can take) of up to n slots that have context to write and room for
    it, longest context first, taken off the slots' queues and added to their ends; n is a power of two (`call_rows`;
    every slot, or `every`: then all of them in order), padded with other slots that write nothing. None when no
    slot has anything to write, or no room."""
    rows = [r for r, s in enumerate(slots) if s is not None and s.prefill and room[r] > 0]
    if not rows:
        return None
    n = len(slots) if every else call_rows(len(rows), len(slots))
    if n == len(slots):
        rows = list(range(n))
    else:  # longest context first: a tile of rows attends over similar lengths (`cached_forward.PREFILL_TILE`)
        rows = sorted(rows, key=lambda r: -slots[r].end)[:n]
        rows += [r for r in range(len(slots)) if r not in rows][: n - len(rows)]
    tokens = np.zeros((n, chunk), np.int32)  # [n, chunk]
    counts = np.zeros(n, np.int32)  # [n]
    for i, row in enumerate(rows):
        slot = slots[row]
        if slot is None or not slot.prefill or room[row] <= 0:
            continue
        size = min(chunk, int(room[row]))
        take, slot.prefill = slot.prefill[:size], slot.prefill[size:]
        slot.written += take
        tokens[i, : len(take)], counts[i] = take, len(take)
        slot.end += len(take)
    return np.asarray(rows, np.int32), tokens, counts


def row_sampling(
    live: list[tuple[int, Slot]], n: int, default: SamplingConfig
) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """Per-row seeds and (temperature, top_p, top_k) `[n]` of a decode call whose live rows (call row, slot) include a
    request with its own sampling (the others use `default`)."""
    seed = np.zeros(n, np.int32)  # [n]
    temperature = np.zeros(n, np.float32)  # [n]
    top_p = np.ones(n, np.float32)  # [n]
    top_k = np.zeros(n, np.int32)  # [n]
    for row, slot in live:
        own = slot.sampling or default
        seed[row], temperature[row], top_p[row], top_k[row] = own.seed, own.temperature, own.top_p, own.top_k
    return seed, (temperature, top_p, top_k)
