"""Kill tests: `jaxseeker …` in a process that stops for good once it has logged a given step, and waits that fail
with the run's log instead of running on quietly.

Killing a run "once step N is logged" by polling races the run's later steps: a fast run can be past its
checkpoint, or finished, before the signal lands. A run started by `launch(…, pause_at=N)` creates its flag file
right after writing step N's first metrics row and then waits until it is killed, or until a stop signal is
recorded (then it goes on, and the loop acts on the signal as after any step): the signal lands exactly there.
The wait wakes every few milliseconds to look, so it does not matter which of the process's threads the kernel
hands a process-directed signal to (a sleeping main thread is woken only by a signal delivered to it).
Run as a script: `python kill_support.py STEP FLAG_FILE ARGS…`.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

DEADLINE_S = 600  # a hang guard for any one wait, not a timing bound: a loaded 2-core machine needs a fraction of it


def launch(argv: list[str], log: Path, *, pause_at: int | None = None) -> subprocess.Popen:
    """`jaxseeker ARGV` as a process writing stdout and stderr to `log` (a file: a pipe nobody reads could fill and
    stall the run); with `pause_at`, it stops for good after logging that step (`paused(log)` exists then)."""
    cmd = [sys.executable, "-m", "jaxseeker.cli", *argv]
    if pause_at is not None:
        cmd = [sys.executable, __file__, str(pause_at), str(paused(log)), *argv]
    with log.open("w") as f:
        return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, text=True)


def paused(log: Path) -> Path:
    """The flag file a run launched with `pause_at` creates once it has paused."""
    return log.with_suffix(".paused")


def wait_until(ready: Callable[[], bool], proc: subprocess.Popen, log: Path, what: str) -> None:
    """Return once `ready()`; fail naming `what` with the run's log if the run ends first or `DEADLINE_S` pass."""
    deadline = time.monotonic() + DEADLINE_S
    while not ready():
        if proc.poll() is not None:
            raise AssertionError(f"the run ended (exit {proc.returncode}) before {what}:\n{log.read_text()[-4000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} after {DEADLINE_S} s:\n{log.read_text()[-4000:]}")
        time.sleep(0.1)


def finished(proc: subprocess.Popen, log: Path) -> str:
    """The log of a run that exited with status 0 (an AssertionError with the log otherwise)."""
    try:
        code = proc.wait(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait()
    text = log.read_text()
    assert code == 0, f"exit {code}:\n{text[-4000:]}"
    return text


def _pause_after(step: int, flag: Path) -> None:
    """Make `MetricsWriter.write` create `flag` and wait, once it has written a row of `step`, until the process is
    killed or a stop signal is recorded."""
    from jaxseeker.train.interrupt import requested
    from jaxseeker.train.metrics import MetricsWriter

    write = MetricsWriter.write

    def write_then_pause(self, at, metrics, prefix=""):
        write(self, at, metrics, prefix)
        if at == step:
            flag.touch()
            while requested() is None:
                time.sleep(0.01)

    MetricsWriter.write = write_then_pause


if __name__ == "__main__":
    from jaxseeker.cli import main

    _pause_after(int(sys.argv[1]), Path(sys.argv[2]))
    sys.exit(main(sys.argv[3:]))
