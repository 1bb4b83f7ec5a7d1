"""`jaxseeker rl` killed with SIGKILL, then `--resume`: the steps after the checkpoint repeat the uninterrupted run's.

Rewards, losses and the other deterministic metrics must match step for step, and every step must roll out the
same questions (the question sampler's position, saved in the checkpoint, crosses an epoch boundary here).
"""

import os
import re
import signal
from pathlib import Path

import pytest
from kill_support import launch, paused, run_here, wait_until

from jaxseeker.agent import read_episodes
from jaxseeker.train.metrics import read_metrics
from jaxseeker.train.rl.bench import write_toy

pytestmark = pytest.mark.heavy  # a minute or more of CPU: runs first (tests/conftest.py)

CONFIG = Path(__file__).parents[3] / "configs" / "rl_tiny.yaml"
STEPS = 5  # 10 questions asked: two whole sampler epochs of the 5
KILL_AFTER = 2  # SIGKILL after the next step, once the checkpoint of this step is on disk
DETERMINISTIC = (
    "reward",
    "accuracy",
    "format_rate",
    "response_tokens",
    "groups",
    "loss",
    "grad_norm",
    "entropy",
    "approx_kl",
    "ratio_mean",
    "ratio_max",
    "clip_frac_low",
    "clip_frac_high",
)


def _argv(paths: dict, out_dir: Path, *extra: str) -> list[str]:
    """`jaxseeker rl` on the toy: 5 questions, 2 per step (a new sampler epoch every 2.5 steps), 4 rollouts each."""
    sets = [
        f"model.hf_path={paths['policy']}",
        f"rl.questions=[{paths['questions']}]",
        f"rl.out_dir={out_dir}",
        f"rl.steps={STEPS}",
        "rl.checkpoint_every=2",
        "rl.batch_questions=2",
        "rl.group_size=4",
        "rl.episodes_every=1",
    ]
    return ["rl", "--config", str(CONFIG), "--no-progress", *extra, *[a for s in sets for a in ("--set", s)]]


def _rows(out_dir: Path) -> dict[int, list[dict]]:
    """The metric rows of each step."""
    rows: dict[int, list[dict]] = {}
    for row in read_metrics(out_dir / "metrics.jsonl"):
        rows.setdefault(row["step"], []).append(row)
    return rows


def _questions(out_dir: Path, step: int) -> list[str]:
    """The questions step `step` rolled out, one per group."""
    return [e.question for e in read_episodes(out_dir / "episodes" / f"step_{step:06d}.jsonl") if e.sample == 0]


def test_sigkill_then_resume_repeats_the_uninterrupted_steps(tmp_path, capsys):
    paths = write_toy(tmp_path / "toy", n_questions=5)
    log = tmp_path / "killed.log"
    # The killed run stops for good once it has logged step KILL_AFTER + 1, after the checkpoint of KILL_AFTER:
    # that step has to be done again. The uninterrupted run trains here meanwhile.
    killed = launch(_argv(paths, tmp_path / "killed"), log, pause_at=KILL_AFTER + 1)
    run_here(_argv(paths, tmp_path / "whole"), capsys)
    wait_until(paused(log).exists, killed, log, f"step {KILL_AFTER + 1}")
    wait_until(
        (tmp_path / "killed" / "checkpoints" / str(KILL_AFTER)).exists,
        killed,
        log,
        f"checkpoint of step {KILL_AFTER}",
    )  # saved asynchronously: it may still be on its way
    os.kill(killed.pid, signal.SIGKILL)
    assert killed.wait() == -signal.SIGKILL
    assert max(_rows(tmp_path / "killed")) == KILL_AFTER + 1

    assert re.search(rf"resumed_from +{KILL_AFTER}\n", run_here(_argv(paths, tmp_path / "killed", "--resume"), capsys))

    expected, got = _rows(tmp_path / "whole"), _rows(tmp_path / "killed")
    assert sorted(expected) == sorted(got) == list(range(1, STEPS + 1))
    for step in range(KILL_AFTER + 1, STEPS + 1):
        [want], [row] = expected[step], got[step]  # one row: the killed run's rows past the checkpoint are dropped
        for key in DETERMINISTIC:
            assert row[key] == pytest.approx(want[key], rel=1e-5, abs=1e-6), (step, key)
        assert _questions(tmp_path / "killed", step) == _questions(tmp_path / "whole", step), step
    # Each sampler epoch asks all 5 questions once; step 3, the first the resumed run rolls out, straddles two
    # epochs' shuffles.
    asked = [q for step in range(1, STEPS + 1) for q in _questions(tmp_path / "whole", step)]
    assert len(asked) == 2 * STEPS and sorted(asked[:5]) == sorted(asked[5:10]) == sorted(set(asked))
