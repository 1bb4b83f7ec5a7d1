"""A stop inside an RL step's update, within a preemption's notice: save between two mini-batches, resume there.

An update of a large policy runs many optimizer micro-steps (epochs × mini-batches) for minutes, while a spot VM
gets about 30 s of notice. When a stop is requested during the update (`interrupt.stop_requests`), `rl_update`
finishes the micro-step in flight and raises `UpdateStopped`; the loop then saves (`save_mid_step`):
  - the train state with the micro-steps applied so far, an orbax checkpoint of its own under
    `<checkpoint_dir>/mid_step/<step + 1>` (with the question sampler and the adaptive KL coefficient, as a step's);
  - the update's `Progress` beside it (`mid_step_progress/`): how many micro-steps are applied, every mini-batch's
    rows (with the old and reference log-probs and advantages of the params the update started from) and the
    metrics so far.
A `--resume` finds it when it follows the newest step checkpoint (`restore_mid_step`), restores that state and
applies the remaining micro-steps (`finish_step`): no rollout again, no mini-batch lost or applied twice. The step's
episodes are not written again. Single-process runs only, as the stop requests themselves (`train.interrupt`).
"""

from __future__ import annotations

import time
from typing import Any

from jaxseeker.parallel import is_main_process
from jaxseeker.train.checkpoint import Checkpointer, Restored
from jaxseeker.train.rl.update import Progress, UpdateStopped, resume_update

MID_STEP = "mid_step"  # under the checkpoint directory: the state of a step stopped inside its update
PROGRESS = "mid_step_progress"  # beside it: that update's `Progress`


def save_mid_step(
    checkpointer: Checkpointer, stopped: UpdateStopped, step: int, data_state: dict, config: dict
) -> None:
    """Save the state and progress of step `step` (0-based) stopped inside its update; returns once written."""
    if (checkpointer.directory / MID_STEP).exists():  # a stop while finishing a stopped step: saved anew
        (checkpointer.directory / MID_STEP).rmtree()
    mid = Checkpointer(checkpointer.directory / MID_STEP, keep=1, async_save=False)
    mid.save(step + 1, stopped.state, data_state=data_state, config=config, force=True)
    mid.close()
    if is_main_process():
        directory = checkpointer.directory / PROGRESS
        directory.mkdir(parents=True, exist_ok=True)
        stopped.progress.save(directory)


def restore_mid_step(checkpointer: Checkpointer, target: Any) -> tuple[Restored, Progress] | None:
    """The state (onto `target`'s shardings) and progress of a step stopped inside its update, when it is the step
    after the newest step checkpoint (none: the first step); else None."""
    if not (checkpointer.directory / MID_STEP).exists():
        return None
    mid = Checkpointer(checkpointer.directory / MID_STEP, keep=1, async_save=False)
    label = mid.latest_step()
    if label is None or label != (checkpointer.latest_step() or 0) + 1:
        mid.close()
        return None
    restored = mid.restore(target)
    mid.close()
    return restored, Progress.load(checkpointer.directory / PROGRESS)


def finish_step(run: Any, state: Any, progress: Progress, stop: Any = None) -> tuple[Any, dict[str, float]]:
    """The rest of a stopped step's update (`rl_update.resume_update`); the new state and the step's metrics (its
    `step_s` the time before the stop and the time of this rest)."""
    t0 = time.perf_counter()
    run.engine.unload()
    state, update_metrics = resume_update(run, state, progress, stop)
    step_s = progress.step_metrics.get("step_s", 0.0) + time.perf_counter() - t0
    return state, {**progress.step_metrics, **update_metrics, "skipped_update": 0.0, "step_s": step_s}
