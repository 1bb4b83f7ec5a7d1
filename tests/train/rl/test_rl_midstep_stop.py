"""`jaxseeker rl` sent SIGTERM in the middle of an RL step's update, then `--resume`: the mini-batches applied before
the stop are neither lost nor applied again, so the metrics of every step and the final params are the uninterrupted
run's.

The stopped run pauses after 2 of the 4 mini-batches of step 2 (`update_pause.py`) until the signal is recorded, so
the stop lands there whatever the timing; it saves that state and the update's progress (`train.rl.midstep`) and
exits with SIGTERM's status. The resumed run applies mini-batches 3 and 4 without rolling out again, then step 3.
"""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from kill_support import finished, wait_until

from jaxseeker import model
from jaxseeker.train.checkpoint import restore_params
from jaxseeker.train.metrics import read_metrics
from jaxseeker.train.rl.bench import write_toy
from jaxseeker.train.rl.midstep import MID_STEP, PROGRESS

CONFIG = Path(__file__).parents[3] / "configs" / "rl_tiny.yaml"
PAUSE = Path(__file__).with_name("update_pause.py")
STEPS, STOP_STEP, MINI_BATCHES, APPLIED = 3, 2, 4, 2  # SIGTERM after mini-batch APPLIED of step STOP_STEP's update
DETERMINISTIC = ("reward", "accuracy", "response_tokens", "groups", "loss", "grad_norm", "entropy", "approx_kl")
DETERMINISTIC += ("ratio_mean", "ratio_max", "clip_frac_low", "clip_frac_high", "update_rows")


def _argv(paths: dict, out_dir: Path, *extra: str) -> list[str]:
    """`jaxseeker rl` on the toy: 2 questions × 4 rollouts a step, 4 mini-batches of 2 episodes, a checkpoint a step."""
    sets = [
        f"model.hf_path={paths['policy']}",
        f"rl.questions=[{paths['questions']}]",
        f"rl.out_dir={out_dir}",
        f"rl.steps={STEPS}",
        "rl.checkpoint_every=1",
        "rl.batch_questions=2",
        "rl.group_size=4",
        f"rl.mini_batches={MINI_BATCHES}",
    ]
    return ["rl", "--config", str(CONFIG), "--no-progress", *extra, *[a for s in sets for a in ("--set", s)]]


def _launch(cmd: list[str], log: Path) -> subprocess.Popen:
    """`cmd` as a process writing stdout and stderr to `log`."""
    with log.open("w") as f:
        return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, text=True)


def _rows(out_dir: Path) -> dict[int, dict]:
    """The metric row of each step (the last one written for it)."""
    return {row["step"]: row for row in read_metrics(out_dir / "metrics.jsonl")}


def test_a_stop_inside_the_update_resumes_without_losing_or_repeating_a_mini_batch(tmp_path):
    paths = write_toy(tmp_path / "toy", n_questions=4)
    logs = {name: tmp_path / f"{name}.log" for name in ("whole", "stopped", "resumed")}
    whole = _launch([sys.executable, "-m", "jaxseeker.cli", *_argv(paths, tmp_path / "whole")], logs["whole"])
    flag = tmp_path / "paused"
    pause = [sys.executable, str(PAUSE), str(STOP_STEP), str(APPLIED), str(flag)]
    stopped = _launch([*pause, *_argv(paths, tmp_path / "stopped")], logs["stopped"])
    wait_until(flag.exists, stopped, logs["stopped"], f"mini-batch {APPLIED} of step {STOP_STEP}")
    os.kill(stopped.pid, signal.SIGTERM)
    assert stopped.wait() == 128 + signal.SIGTERM, logs["stopped"].read_text()[-4000:]
    checkpoints = tmp_path / "stopped" / "checkpoints"
    assert sorted(p.name for p in (checkpoints / MID_STEP).iterdir() if p.name.isdigit()) == [str(STOP_STEP)]
    assert json.loads((checkpoints / PROGRESS / "progress.json").read_text())["done"] == APPLIED
    assert sorted(_rows(tmp_path / "stopped")) == list(range(1, STOP_STEP))  # the stopped step logged nothing

    resumed = _launch(
        [sys.executable, "-m", "jaxseeker.cli", *_argv(paths, tmp_path / "stopped", "--resume")], logs["resumed"]
    )
    finished(resumed, logs["resumed"])
    finished(whole, logs["whole"])

    expected, got = _rows(tmp_path / "whole"), _rows(tmp_path / "stopped")
    assert sorted(expected) == sorted(got) == list(range(1, STEPS + 1))
    for step in range(1, STEPS + 1):
        for key in DETERMINISTIC:
            assert got[step][key] == pytest.approx(expected[step][key], rel=1e-6, abs=1e-7), (step, key)
    # the same program on the same inputs in the same order: the params of every step agree to the bit
    _, target = model.load_hf(paths["policy"])
    final = {name: restore_params(tmp_path / name / "checkpoints", target, STEPS) for name in ("whole", "stopped")}
    moved = max(float(np.max(np.abs(a - b))) for a, b in zip(jax.tree.leaves(final["whole"]), jax.tree.leaves(target)))
    assert moved > 1e-3  # 3 steps of 4 mini-batches at lr 0.02 moved the policy
    for a, b in zip(jax.tree.leaves(final["stopped"]), jax.tree.leaves(final["whole"]), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
