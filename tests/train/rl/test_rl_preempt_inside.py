"""`jaxseeker rl` sent SIGTERM inside DUPO's pre-filter, then inside an RL step's update, resumed after each: no
rollout of the pre-filter is done twice, no mini-batch applied before the stop is lost or applied again, and the
metrics of every step and the final params are the uninterrupted run's.

The run pauses at each point (`stop_points.py`) until the signal is recorded, so the stop lands there whatever the
timing. In the pre-filter it stops after the first of its 2 batches of questions, saved (`collect.PREFILTER`); the
resumed run rolls out the second only, trains, and stops again after 2 of the 4 mini-batches of step 2, saving that
state and the update's progress (`train.rl.midstep`); the last run applies mini-batches 3 and 4 without rolling out
again, then step 3. Each stopped run exits with SIGTERM's status.
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
from kill_support import run_here, wait_until

from jaxseeker import model
from jaxseeker.train.checkpoint import restore_params
from jaxseeker.train.metrics import read_metrics
from jaxseeker.train.rl.bench import write_toy
from jaxseeker.train.rl.collect import PREFILTER
from jaxseeker.train.rl.midstep import MID_STEP, PROGRESS

pytestmark = pytest.mark.heavy  # a minute or more of CPU: runs first (tests/conftest.py)

CONFIG = Path(__file__).parents[3] / "configs" / "rl_tiny.yaml"
STOP_POINTS = Path(__file__).with_name("stop_points.py")
QUESTIONS, BATCH, FILTER_ROLLOUTS = 4, 2, 2  # the pre-filter: 2 batches of 2 questions × 2 rollouts
STEPS, STOP_STEP, MINI_BATCHES, APPLIED = 3, 2, 4, 2  # SIGTERM after mini-batch APPLIED of step STOP_STEP's update
DETERMINISTIC = ("reward", "accuracy", "response_tokens", "groups", "loss", "grad_norm", "entropy", "approx_kl")
DETERMINISTIC += ("ratio_mean", "ratio_max", "clip_frac_low", "clip_frac_high", "update_rows")


def _argv(paths: dict, out_dir: Path, *extra: str) -> list[str]:
    """`jaxseeker rl` on the toy with DUPO: 2 questions × 4 rollouts a step, 4 mini-batches of 2 episodes, a checkpoint
    and an episodes file a step."""
    sets = [
        f"model.hf_path={paths['policy']}",
        f"rl.questions=[{paths['questions']}]",
        f"rl.out_dir={out_dir}",
        f"rl.steps={STEPS}",
        "rl.checkpoint_every=1",
        f"rl.batch_questions={BATCH}",
        "rl.group_size=4",
        "rl.selection=dupo",
        f"rl.dupo_filter_rollouts={FILTER_ROLLOUTS}",
        f"rl.mini_batches={MINI_BATCHES}",
        "rl.episodes_every=1",
    ]
    return ["rl", "--config", str(CONFIG), "--no-progress", *extra, *[a for s in sets for a in ("--set", s)]]


def _launch(cmd: list[str], log: Path) -> subprocess.Popen:
    """`cmd` as a process writing stdout and stderr to `log`."""
    with log.open("w") as f:
        return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, text=True)


def _rows(out_dir: Path) -> dict[int, dict]:
    """The metric row of each step (the last one written for it)."""
    return {row["step"]: row for row in read_metrics(out_dir / "metrics.jsonl")}


def _stopped_at(point: list[str], argv: list[str], log: Path, flag: Path, what: str) -> None:
    """Run `argv` paused at `point` (`stop_points.py`), send SIGTERM there, and check it exits with its status."""
    proc = _launch([sys.executable, str(STOP_POINTS), *point, str(flag), *argv], log)
    wait_until(flag.exists, proc, log, what)
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait() == 128 + signal.SIGTERM, log.read_text()[-4000:]


def test_stops_inside_the_prefilter_and_the_update_resume_without_redoing_or_losing_work(tmp_path, capsys):
    paths = write_toy(tmp_path / "toy", n_questions=QUESTIONS)
    logs = {name: tmp_path / f"{name}.log" for name in ("prefilter", "update")}
    run_here(_argv(paths, tmp_path / "whole"), capsys)  # the uninterrupted run
    out, checkpoints = tmp_path / "stopped", tmp_path / "stopped" / "checkpoints"

    _stopped_at(["prefilter", "1"], _argv(paths, out), logs["prefilter"], tmp_path / "p1", "the pre-filter's batch 1")
    assert len(json.loads((checkpoints / PREFILTER).read_text())["correct"]) == BATCH
    assert not (out / "metrics.jsonl").exists() or not _rows(out)

    where = f"mini-batch {APPLIED} of step {STOP_STEP}"
    _stopped_at(
        ["update", str(STOP_STEP), str(APPLIED)], _argv(paths, out, "--resume"), logs["update"], tmp_path / "p2", where
    )
    assert json.loads((out / "dupo_filter.json").read_text())["resumed_after"] == BATCH  # batch 1 not rolled out again
    assert sorted(p.name for p in (checkpoints / MID_STEP).iterdir() if p.name.isdigit()) == [str(STOP_STEP)]
    assert json.loads((checkpoints / PROGRESS / "progress.json").read_text())["done"] == APPLIED
    assert sorted(_rows(out)) == list(range(1, STOP_STEP))  # the stopped step logged nothing

    run_here(_argv(paths, out, "--resume"), capsys)

    assert (
        json.loads((out / "dupo_filter.json").read_text())["kept_indices"]
        == json.loads((tmp_path / "whole" / "dupo_filter.json").read_text())["kept_indices"]
    )
    expected, got = _rows(tmp_path / "whole"), _rows(out)
    assert sorted(expected) == sorted(got) == list(range(1, STEPS + 1))
    for step in range(1, STEPS + 1):
        for key in DETERMINISTIC:
            assert got[step][key] == pytest.approx(expected[step][key], rel=1e-6, abs=1e-7), (step, key)
    for step in range(1, STEPS + 1):  # the stopped step's episodes were written before its update
        name = f"episodes/step_{step:06d}.jsonl"
        episodes = [json.loads(line) for line in (out / name).read_text().splitlines()]
        whole_episodes = [json.loads(line) for line in (tmp_path / "whole" / name).read_text().splitlines()]
        assert len(episodes) == BATCH * 4
        assert [(e["token_ids"], e["meta"]["rl"]) for e in episodes] == [
            (e["token_ids"], e["meta"]["rl"]) for e in whole_episodes
        ], step
    # the same programs on the same inputs in the same order: the final params agree to the bit
    _, target = model.load_hf(paths["policy"])
    final = {name: restore_params(tmp_path / name / "checkpoints", target, STEPS) for name in ("whole", "stopped")}
    moved = max(float(np.max(np.abs(a - b))) for a, b in zip(jax.tree.leaves(final["whole"]), jax.tree.leaves(target)))
    assert moved > 1e-3  # 3 steps of 4 mini-batches at lr 0.02 moved the policy
    for a, b in zip(jax.tree.leaves(final["stopped"]), jax.tree.leaves(final["whole"]), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
