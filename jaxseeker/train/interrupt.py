"""Stop a training loop cleanly on Ctrl-C or SIGTERM (what a preempted cloud VM receives): the step in flight
finishes, the loop saves a checkpoint of it and raises `Interrupted`, so a resumed run loses no step.

Only a single-process run catches the signals. The processes of a multi-host run would each stop at their own step
and leave the others waiting in a collective; there `jax.distributed` catches SIGTERM, and the checkpointer saves
at JAX's preemption sync point, a step every process reaches (`Checkpointer.preempted`), after which the loop
raises `Interrupted` as well.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """A run stopped by `signal_name` after saving its checkpoint of `step` under `out_dir`."""

    def __init__(self, signal_name: str, step: int, out_dir: str | Path):
        super().__init__(f"stopped by {signal_name} after step {step}; its checkpoint is saved under {out_dir}")
        self.signal_name, self.step, self.out_dir = signal_name, step, Path(out_dir)

    @property
    def exit_code(self) -> int:
        """The shell's status for a process ended by the signal: 128 + its number (130 for SIGINT)."""
        return 128 + signal.Signals[self.signal_name].value


class StopRequest:
    """The first stop signal received inside `stop_requests`: its name, or None while none has come."""

    def __init__(self) -> None:
        self.signal_name: str | None = None


@contextlib.contextmanager
def stop_requests(enabled: bool = True) -> Iterator[StopRequest]:
    """Inside the block the first SIGINT or SIGTERM is recorded in the yielded `StopRequest` for the loop to act
    on, and a second one stops at once as it would have; the old handlers return on exit. Off the main thread
    (where Python cannot catch signals), or with `enabled` False, nothing is caught."""
    request = StopRequest()
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if request.signal_name is not None:  # asked twice: the user does not want to wait for the step
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            signal.raise_signal(signum)
            return
        request.signal_name = signal.Signals(signum).name
        print(
            f"\n{request.signal_name}: stopping after this step, once its checkpoint is saved (again: at once)",
            file=sys.stderr,
            flush=True,
        )

    for sig in STOP_SIGNALS:
        signal.signal(sig, on_signal)
    try:
        yield request
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
