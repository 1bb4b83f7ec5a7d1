"""Kill tests: `jaxseeker …` in a process that stops for good once it has logged a given step, and waits that fail
with the run's log instead of running on quietly.

Killing a run "once step N is logged" by polling races the run's later steps: a fast run can be past its
checkpoint, or finished, before the signal lands. A run started by `launch(…, pause_at=N)` creates its flag file
right after writing step N's first metrics row and then waits until it is killed, or until a stop signal is
recorded (then it goes on, and the loop acts on the signal as after any step): the signal lands exactly there.
The wait wakes every few milliseconds to look, so it does not matter which of the process's threads the kernel
hands a process-directed signal to (a sleeping main thread is woken only by a signal delivered to it).
Runs no signal reaches (the uninterrupted reference, the resume) run in the test's own process (`run_here`).
Run as a script: `python kill_support.py STEP FLAG_FILE ARGS…`.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

DEADLINE_S = 600  # a hang guard for any one wait, not a timing bound: a loaded 2-core machine needs a fraction of it


def launch(argv: list[str], log: Path, *, pause_at: int) -> subprocess.Popen:
    """`jaxseeker ARGV` as a process writing stdout and stderr to `log` (a file: a pipe nobody reads could fill and
    stall the run) that stops for good after logging step `pause_at` (`paused(log)` exists then)."""
    cmd = [sys.executable, __file__, str(pause_at), str(paused(log)), *argv]
    with log.open("w") as f:
        return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, text=True)


def run_here(argv: list[str], capsys: pytest.CaptureFixture) -> str:
    """`jaxseeker ARGV` in this process, for the runs no signal reaches (an uninterrupted reference, a resume): the
    same code as a new interpreter's without starting one. Its printed output, once it returned 0."""
    from jaxseeker.cli import main

    capsys.readouterr()
    code = main(argv)
    printed = capsys.readouterr()
    text = printed.out + printed.err
    assert code == 0, f"exit {code}:\n{text[-4000:]}"
    return text


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
