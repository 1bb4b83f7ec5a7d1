"""The one thread that owns the device: it admits queued completions into engine slots, steps the engine,
turns sampled tokens into text and hands each completion's progress back through a callback.

HTTP handlers never touch the engine: they `submit` a job (a request's `n` choices), receive `Update`s on
the scheduler thread through the job's `emit` callback, and `cancel` a job whose client went away; the
thread releases its slots before the next engine step. The wait queue is bounded: `submit` raises
`QueueFull` rather than let it grow. EOS tokens and stop strings are checked here, per request (the engine
is built without any), so every request may bring its own stops and `ignore_eos`.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
from collections.abc import Callable, Sequence

from jaxseeker.generation import Engine, Event, SamplingConfig
from jaxseeker.serve.text import TextStream

log = logging.getLogger(__name__)


class QueueFull(RuntimeError):
    """The wait queue holds `max_queue` completions already (answered 429)."""


class SchedulerDown(RuntimeError):
    """The scheduler thread stopped (closed, or the engine failed): no request can be served (answered 503)."""


@dataclasses.dataclass
class Choice:
    """One completion of a request: its prompt, budget, sampling, stops, and its text so far."""

    index: int
    prompt: list[int]
    max_tokens: int
    sampling: SamplingConfig
    stream: TextStream
    ignore_eos: bool = False
    seen: int = 0  # tokens of the engine's turn already pushed into `stream`
    sampled: int = 0  # tokens sampled and kept (stop and EOS tokens included)


@dataclasses.dataclass
class Update:
    """Progress of one choice: new text (and its tokens / log-probs); the last one has a finish reason.

    finish_reason: "stop" (EOS or a stop string), "length" (max_tokens or the context is full), "error".
    """

    index: int
    text: str
    tokens: list[int]
    logprobs: list[float]
    finish_reason: str | None = None
    completion_tokens: int = 0
    error: str | None = None


@dataclasses.dataclass
class Job:
    """A request's choices and the callback that receives their updates (called on the scheduler thread)."""

    id: str
    choices: list[Choice]
    emit: Callable[[Update], None]
    cancelled: bool = False


class Scheduler:
    """Drives `engine` from one background thread (see the module docstring); `start` it, then `submit`."""

    def __init__(self, engine: Engine, *, eos_ids: Sequence[int] = (), max_queue: int = 256):
        if max_queue < 1:
            raise ValueError(f"Scheduler: max_queue must be >= 1, got {max_queue}")
        if engine.eos_ids or engine.stop_strings:
            raise ValueError("Scheduler: build the engine without eos_ids and stop_strings (checked per request here)")
        self.engine, self.eos_ids, self.max_queue = engine, frozenset(eos_ids), max_queue
        self._wake = threading.Condition()
        self._waiting: collections.deque[tuple[Job, Choice]] = collections.deque()
        self._live: dict[str, tuple[Job, Choice]] = {}
        self._closing = False
        self.failure: str | None = None
        self.counts = collections.Counter()  # completed / cancelled / failed choices, steps
        self._thread = threading.Thread(target=self._loop, name="jaxseeker-serve-engine", daemon=True)

    def start(self) -> Scheduler:
        """Start the engine thread."""
        self._thread.start()
        return self

    def close(self, timeout: float = 30.0) -> None:
        """Stop the thread after its current step; unfinished choices get an "error" update."""
        with self._wake:
            self._closing = True
            self._wake.notify()
            if not self._thread.is_alive():  # never started (or already gone): answer what still waits
                self._fail_all(self.failure or "the server is shutting down")
        if self._thread.is_alive():
            self._thread.join(timeout)

    def submit(self, job: Job) -> None:
        """Queue every choice of `job` (QueueFull when the queue cannot take them all, SchedulerDown once the
        scheduler is closed or failed). Jobs submitted before `start` wait for it."""
        with self._wake:
            if self._closing or self.failure is not None:
                raise SchedulerDown(self.failure or "the server is shutting down")
            self._drop_cancelled()
            if len(self._waiting) + len(job.choices) > self.max_queue:
                raise QueueFull(
                    f"the wait queue is full ({len(self._waiting)} of {self.max_queue} completions waiting)"
                )
            self._waiting.extend((job, choice) for choice in job.choices)
            self._wake.notify()

    def cancel(self, job: Job) -> None:
        """Drop `job`: its queued choices are skipped and its slots released before the next step."""
        with self._wake:
            job.cancelled = True
            self._wake.notify()

    def stats(self) -> dict[str, int]:
        """Slots, free slots, waiting and running completions (cancelled ones left out), and the counters since
        start: completed / cancelled / failed completions, engine steps."""
        with self._wake:
            running = len(self._live)
            self._drop_cancelled()
            waiting = len(self._waiting)
            return {
                "slots": self.engine.slots,
                "slots_free": self.engine.slots - running,
                "waiting": waiting,
                "running": running,
                **self.counts,
            }

    # ---- the thread -----------------------------------------------------------------------------------------

    def _loop(self) -> None:
        try:
            while self._next_round():
                events = self.engine.step()
                self.counts["steps"] += 1
                self._collect(events)
        except Exception as exc:  # the engine (or its device) failed: nothing can be served any more
            log.exception("serve: the engine failed; failing every open request")
            self.failure = f"engine failure: {type(exc).__name__}: {exc}"
        with self._wake:
            self._closing = True
            self._fail_all(self.failure or "the server is shutting down")

    def _next_round(self) -> bool:
        """Release cancelled slots and admit waiting choices (sleeping while idle); False once closing."""
        with self._wake:
            while True:
                if self._closing:
                    return False
                for request_id, (job, _) in list(self._live.items()):
                    if job.cancelled:
                        self._release(request_id, "cancelled")
                self._drop_cancelled()
                while self._waiting and self.engine.free_slots():
                    job, choice = self._waiting.popleft()
                    request_id = f"{job.id}/{choice.index}"
                    try:
                        self.engine.submit(
                            request_id, choice.prompt, max_new_tokens=choice.max_tokens, sampling=choice.sampling
                        )
                    except ValueError as exc:  # the handler checks lengths; this is a last guard
                        _emit(job, Update(choice.index, "", [], [], "error", 0, str(exc)))
                        self.counts["failed"] += 1
                        continue
                    self._live[request_id] = (job, choice)
                if self._live:
                    return True
                self._wake.wait()

    def _drop_cancelled(self) -> None:
        """Remove the waiting choices of cancelled jobs (caller holds the lock)."""
        kept = [(job, choice) for job, choice in self._waiting if not job.cancelled]
        self.counts["cancelled"] += len(self._waiting) - len(kept)
        self._waiting = collections.deque(kept)

    def _release(self, request_id: str, outcome: str) -> None:
        self.engine.release(request_id)
        del self._live[request_id]
        self.counts[outcome] += 1

    def _collect(self, events: list[Event]) -> None:
        """Push each live choice's new tokens through its text stream; emit the text; end finished choices."""
        ended = {e.request_id: e for e in events}  # only "length" / "context": the engine has no stops
        with self._wake:
            for request_id, (job, choice) in list(self._live.items()):
                if job.cancelled:
                    continue
                event = ended.get(request_id)
                tokens, logprobs = (event.tokens, event.logprobs) if event else self.engine.peek(request_id)
                reason = self._push(choice, tokens, logprobs) or ("length" if event else None)
                text, new_tokens, new_logprobs = choice.stream.take(final=reason is not None)
                reason = "stop" if reason and choice.stream.stop is not None else reason  # a stop in the last bytes
                if text or new_tokens or reason:
                    _emit(
                        job,
                        Update(choice.index, text, new_tokens, new_logprobs, reason, choice.sampled if reason else 0),
                    )
                if reason:
                    self._release(request_id, "completed")

    def _push(self, choice: Choice, tokens: list[int], logprobs: list[float]) -> str | None:
        """Feed the unseen tokens of this turn; "stop" at an EOS id or a stop string, else None."""
        new = zip(tokens[choice.seen :], logprobs[choice.seen :], strict=True)
        choice.seen = len(tokens)
        for token, logprob in new:
            choice.sampled += 1
            if token in self.eos_ids and not choice.ignore_eos:
                return "stop"
            if choice.stream.push(token, logprob):
                return "stop"
        return None

    def _fail_all(self, message: str) -> None:
        """Tell every live and waiting choice that it will not finish (caller holds the lock)."""
        for request_id, (job, choice) in list(self._live.items()):
            _emit(job, Update(choice.index, "", [], [], "error", choice.sampled, message))
            self._live.pop(request_id)
            self.counts["failed"] += 1
        while self._waiting:
            job, choice = self._waiting.popleft()
            _emit(job, Update(choice.index, "", [], [], "error", 0, message))
            self.counts["failed"] += 1


def _emit(job: Job, update: Update) -> None:
    """Hand `update` to the job's callback; a callback that fails (its client is gone) cancels the job."""
    try:
        job.emit(update)
    except Exception:
        log.exception("serve: the update callback of %s failed; cancelling it", job.id)
        job.cancelled = True
