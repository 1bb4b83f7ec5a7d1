"""Stop a command cleanly on Ctrl-C or SIGTERM (what a preempted cloud VM, or `timeout`, sends).

A training loop listens inside `stop_requests`: the first signal is recorded, the step in flight finishes, the loop
saves a checkpoint of it and raises `Interrupted`, so a resumed run loses no step. Around a whole command
(`stop_signals`, opened by `jaxseeker`'s entry point) a signal that comes while no loop listens stops at once
(`Stopped`, raised in the main thread: evaluations and synthesis resume from what they wrote), and one recorded by a
loop that then ended anyway (it came during the last step) stays recorded: the pipeline stops before its next stage
(`requested`). Python runs signal handlers in the main thread whichever thread the signal was delivered to; the
loops and stages all run there.

Only a single-process run catches the signals. The processes of a multi-host run would each stop at their own step
and leave the others waiting in a collective; there `jax.distributed` catches SIGTERM, and the checkpointer saves
at JAX's preemption sync point, a step every process reaches (`Checkpointer.preempted`), after which the loop
raises `Interrupted` as well.
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(KeyboardInterrupt):
    """A command stopped by `signal_name`; `str()` says where it stopped."""

    def __init__(self, signal_name: str, where: str = ""):
        super().__init__(f"stopped by {signal_name}{where}")
        self.signal_name = signal_name

    @property
    def exit_code(self) -> int:
        """The shell's status for a process ended by the signal: 128 + its number (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + signal.Signals[self.signal_name].value


class Interrupted(Stopped):
    """A run stopped by `signal_name` after saving its checkpoint of `step` under `out_dir`."""

    def __init__(self, signal_name: str, step: int, out_dir: str | Path):
        super().__init__(signal_name, f" after step {step}; its checkpoint is saved under {out_dir}")
        self.step, self.out_dir = step, Path(out_dir)


class StopRequest:
    """The first stop signal received inside `stop_requests`: its name, or None while none has come."""

    def __init__(self) -> None:
        self.signal_name: str | None = None


@dataclasses.dataclass
class _Catching:
    """The handlers the outermost open block installed: its request, how many loops listen now, the handlers to
    put back, and whether a signal nobody listens for stops at once (`stop_signals`) or as it would have."""

    request: StopRequest
    listening: int
    previous: dict
    at_once: bool


_catching: _Catching | None = None


def _on_signal(signum: int, frame: FrameType | None) -> None:
    """Record the first signal while a loop listens; otherwise (a second signal, or no loop) stop at once."""
    catching, name = _catching, signal.Signals(signum).name
    if catching is None:  # a block closed as the signal came: what the handler before it would have done
        signal.default_int_handler(signum, frame)
        return
    request = catching.request
    if request.signal_name is None and catching.listening:
        request.signal_name = name
        print(
            f"\n{name}: stopping after this step, once its checkpoint is saved (again: at once)",
            file=sys.stderr,
            flush=True,
        )
        return
    request.signal_name = request.signal_name or name
    if catching.at_once:
        raise Stopped(name)
    for sig, handler in catching.previous.items():  # asked twice: the user does not want to wait for the step
        signal.signal(sig, handler)
    signal.raise_signal(signum)


@contextlib.contextmanager
def _catch(*, listening: bool, at_once: bool) -> Iterator[StopRequest]:
    """Install `_on_signal` for the block, or, inside an open block, share its request (and listen with it)."""
    global _catching
    if threading.current_thread() is not threading.main_thread():  # Python cannot catch signals there
        yield StopRequest()
        return
    if _catching is not None:
        outer = _catching
        outer.listening += listening
        try:
            yield outer.request
        finally:
            outer.listening -= listening
        return
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    _catching = _Catching(StopRequest(), int(listening), previous, at_once)
    for sig in STOP_SIGNALS:
        signal.signal(sig, _on_signal)
    try:
        yield _catching.request
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _catching = None


@contextlib.contextmanager
def stop_requests(enabled: bool = True) -> Iterator[StopRequest]:
    """A training loop's block: the first SIGINT or SIGTERM inside it is recorded in the yielded `StopRequest` for
    the loop to act on after its step, and a second one stops at once; the old handlers return on exit (inside
    `stop_signals`, the command's request is shared and stays). Off the main thread (where Python cannot catch
    signals), or with `enabled` False, nothing is caught."""
    if not enabled:
        yield StopRequest()
        return
    with _catch(listening=True, at_once=False) as request:
        yield request


@contextlib.contextmanager
def stop_signals() -> Iterator[StopRequest]:
    """A command's block: a SIGINT or SIGTERM raises `Stopped` at once unless a loop inside listens
    (`stop_requests`); one a loop recorded stays in the yielded request (`requested`)."""
    with _catch(listening=False, at_once=True) as request:
        yield request


def requested() -> str | None:
    """The stop signal recorded by the open blocks and not yet acted on (e.g. one that came during a loop's last
    step), or None."""
    return _catching.request.signal_name if _catching is not None else None
