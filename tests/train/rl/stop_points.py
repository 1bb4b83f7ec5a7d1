"""`jaxseeker rl` that pauses at a given point inside its work until a stop signal is recorded, then goes on and sees
the stop at its next check, as a preemption's notice arriving there would be seen:

  prefilter N  once DUPO's pre-filter has rolled out N batches of questions (before it saves the N-th);
  update S M   once M optimizer micro-steps of step S's update (1-based, as the metrics count steps) are applied.

The pause sits before the run's own check for a stop, so where the run stops does not depend on timing: the test
sends SIGTERM once the flag file exists, and the run acts on it right there. The wait wakes every few milliseconds,
so it does not matter which of the process's threads the kernel hands the signal to (`kill_support`). Run as a
script: `python stop_points.py prefilter N FLAG_FILE ARGS…` or `python stop_points.py update S M FLAG_FILE ARGS…`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path


def _wait_for_stop(flag: Path) -> None:
    """Create `flag`, then wait until a stop signal is recorded."""
    from jaxseeker.train.interrupt import requested

    flag.touch()
    while requested() is None:
        time.sleep(0.01)


def pause_in_prefilter(batches: int, flag: Path) -> None:
    """Make the pre-filter pause once it has rolled out `batches` batches of questions (its first rollouts)."""
    from jaxseeker.train.rl import collect

    roll_out, calls = collect.roll_out, []

    def roll_out_with_pause(*args, **kwargs):
        result = roll_out(*args, **kwargs)
        calls.append(None)
        if len(calls) == batches:
            _wait_for_stop(flag)
        return result

    collect.roll_out = roll_out_with_pause


def pause_in_update(step: int, micro_steps: int, flag: Path) -> None:
    """Make the update of step `step` pause once `micro_steps` of its optimizer micro-steps are applied."""
    from jaxseeker.train.rl import loop

    update = loop.update

    def update_with_pause(run, state, episodes, rewards, max_context, at, stop: Callable[[], bool] | None = None):
        applied = 0

        def check() -> bool:  # the update calls it after each micro-step but the last
            nonlocal applied
            applied += 1
            if at + 1 == step and applied == micro_steps:
                _wait_for_stop(flag)
            return stop is not None and stop()

        return update(run, state, episodes, rewards, max_context, at, check)

    loop.update = update_with_pause


if __name__ == "__main__":
    from jaxseeker.cli import main

    if sys.argv[1] == "prefilter":
        pause_in_prefilter(int(sys.argv[2]), Path(sys.argv[3]))
        sys.exit(main(sys.argv[4:]))
    pause_in_update(int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]))
    sys.exit(main(sys.argv[5:]))
