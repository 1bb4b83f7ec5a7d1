"""The host side of the engine's requests: the `Event` a paused turn reports, a slot's state, where a turn stops
(an EOS id or a stop string in its decoded tail) and a decode call's per-row sampling.

Kept apart from `engine.py`, which drives the device calls: everything here is plain Python and NumPy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from jaxseeker.generation.sampling import SamplingConfig


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
    prompt: tuple[int, ...] = ()  # the request's prompt (cache slot i holds prompt[i] once written)
    share: tuple[Slot, int] | None = None  # (the slot whose cache row holds this prompt's first n tokens, n)

    def pause(self, reason: str, stop: str | None = None) -> Event:
        """End this turn: its event, and the slot waits for `extend` or `release`."""
        event = Event(self.request_id, self.tokens, self.logprobs, reason, stop)
        self.running, self.tokens, self.logprobs = False, [], []
        return event


class StopCheck:
    """Where a turn stops: just after the first EOS id, or the token that completes a stop string (found by decoding
    the turn's tail: the new tokens and a window of the ones before, as long as the longest stop string)."""

    def __init__(self, eos_ids: Sequence[int], stop_strings: Sequence[str], decode: Callable[[list[int]], str] | None):
        if stop_strings and decode is None:
            raise ValueError("Engine: stop_strings need a `decode` function (token ids -> text)")
        if any(not s for s in stop_strings):
            raise ValueError(f"Engine: stop_strings must be non-empty, got {list(stop_strings)}")
        self.eos_ids = frozenset(int(t) for t in eos_ids)
        self.stop_strings = tuple(stop_strings)
        self.decode = decode
        self.window = max((len(s) for s in self.stop_strings), default=0) + 2  # tokens re-decoded per check

    def find(self, before: list[int], new: list[int]) -> tuple[int, str | None, str | None]:
        """(tokens of `new` to keep, reason, stop): cut just after the first EOS id or stop string."""
        strings = bool(self.stop_strings) and self._stop_in(before + new, len(new)) is not None
        for j, tok in enumerate(new):
            if tok in self.eos_ids:
                text = self.decode([tok]) if self.decode else str(tok)
                return j + 1, "eos", text
            stop = self._stop_in(before + new[: j + 1], 1) if strings else None
            if stop is not None:
                return j + 1, "stop", stop
        return len(new), None, None

    def _stop_in(self, turn: list[int], n_new: int) -> str | None:
        """The stop string in the decoded tail of this turn (its last `n_new` tokens and a window before)."""
        text = self.decode(turn[-(self.window + n_new - 1) :])
        return next((s for s in self.stop_strings if s in text), None)


def row_sampling(
    live: list[tuple[int, Slot]], n: int, default: SamplingConfig
) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """Per-row seeds and (temperature, top_p, top_k) `[n]` (by a call's row index) when some live request has its own
    sampling; the others sample with `default`."""
    seed = np.zeros(n, np.int32)  # [n]
    temperature = np.zeros(n, np.float32)  # [n]
    top_p = np.ones(n, np.float32)  # [n]
    top_k = np.zeros(n, np.int32)  # [n]
    for row, slot in live:
        own = slot.sampling or default
        seed[row], temperature[row], top_p[row], top_k[row] = own.seed, own.temperature, own.top_p, own.top_k
    return seed, (temperature, top_p, top_k)


def check_budget(caller: str, request_id: str, max_new_tokens: int) -> None:
    """Refuse a negative turn budget, naming the call and the request."""
    if max_new_tokens < 0:
        raise ValueError(f"Engine.{caller}: max_new_tokens of {request_id!r} must be >= 0, got {max_new_tokens}")
