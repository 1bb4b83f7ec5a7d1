"""`jaxseeker rl` that pauses inside an RL step's update, once a given number of its optimizer micro-steps are applied,
until a stop signal is recorded; then the update goes on and sees the stop at its next check, as a preemption's
notice arriving during that micro-step would be seen.

The pause sits in the update's own check between two micro-steps (the `stop` it is given, wrapped), so where the
update stops does not depend on timing: the test sends SIGTERM once the flag file exists, and the run acts on it
after exactly that micro-step. The wait wakes every few milliseconds, so it does not matter which of the process's
threads the kernel hands the signal to (`kill_support`). Run as a script: `python update_pause.py STEP MICRO_STEPS
FLAG_FILE ARGS…` (STEP 1-based, as the metrics count steps).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path


def pause_in_update(step: int, micro_steps: int, flag: Path) -> None:
    """Make the RL loop's update of step `step` create `flag` and wait for a stop signal once `micro_steps` of its
    optimizer micro-steps are applied."""
    from jaxseeker.train.interrupt import requested
    from jaxseeker.train.rl import loop

    update = loop.update

    def update_with_pause(run, state, episodes, rewards, max_context, at, stop: Callable[[], bool] | None = None):
        applied = 0

        def check() -> bool:  # the update calls it after each micro-step but the last
            nonlocal applied
            applied += 1
            if at + 1 == step and applied == micro_steps:
                flag.touch()
                while requested() is None:
                    time.sleep(0.01)
            return stop is not None and stop()

        return update(run, state, episodes, rewards, max_context, at, check)

    loop.update = update_with_pause


if __name__ == "__main__":
    from jaxseeker.cli import main

    pause_in_update(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))
    sys.exit(main(sys.argv[4:]))
