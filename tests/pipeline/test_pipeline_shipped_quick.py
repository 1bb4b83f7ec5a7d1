"""`jaxseeker pipeline --config NAME --quick` for real, for every pipeline recipe shipped: the same stages as the
recipe's (a tiny from-scratch policy in place of a pretrained one), each cut to a few steps and questions. The demo
runs from nothing; `demo_rl` is the demo with more RL steps and a weight average, so it goes on from the demo's
run as a user's would, reusing every stage whose inputs are the demo's (`--quick` caps both to the same RL steps)
and running only its own (demo_focus, on another worker: test_pipeline_shipped_quick_tiny.py). The demo's
run is stopped by SIGTERM during its SFT's last step, as a user's run may be, and goes on with the same command."""

import contextlib
import io
import json
import os
import shutil
import signal
from pathlib import Path

import pytest
from kill_support import DEADLINE_S, launch, paused, wait_until
from quick_support import run_quick

from jaxseeker.cli import main
from jaxseeker.pipeline import pipeline_config
from jaxseeker.train.recipe import read_recipe, recipe_kind, shipped_configs

pytestmark = pytest.mark.heavy  # a minute or more of CPU: runs first (tests/conftest.py)

PIPELINES = [name for name in shipped_configs() if recipe_kind(read_recipe(name)) == "pipeline"]


def test_the_shipped_pipeline_recipes_are_the_demos():
    assert PIPELINES == ["demo", "demo_copy", "demo_focus", "demo_rl"]


ARGV = ["pipeline", "--config", "demo", "--quick", "--no-progress"]


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The demo's quick run from nothing, in a process sent SIGTERM once its SFT's last step is logged: its exit
    status, log, stage directories and the lines of the same command's `--dry-run` then."""
    out, log = tmp_path_factory.mktemp("demo") / "run", tmp_path_factory.getbasetemp() / "demo_run.log"
    argv = [*ARGV, "--out", str(out)]
    last = pipeline_config(read_recipe("demo"), quick=True).sft.train["steps"]
    run = launch(argv, log, pause_at=last)  # waits once the SFT's last step is logged (no stage before logs a step)
    wait_until(paused(log).exists, run, log, f"SFT step {last}")
    os.kill(run.pid, signal.SIGTERM)  # to the process: whichever of its threads the kernel picks
    status = run.wait(timeout=DEADLINE_S)
    stages = sorted(p.name for p in out.iterdir() if (p / "done.json").exists())
    sft_loss = json.loads((out / "sft" / "done.json").read_text())["metrics"]["final_loss"]
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        dry_run = main([*argv, "--dry-run"])  # the same command goes on from the next stage
    return {
        "out": out,
        "argv": argv,
        "status": status,
        "log": log.read_text(),
        "done": stages,
        "dirs": sorted(p.name for p in out.iterdir()),
        "sft_loss": sft_loss,
        "dry_run": (dry_run, printed.getvalue().splitlines()[-2:]),
    }


@pytest.fixture(scope="module")
def demo_run(stopped: dict) -> tuple[Path, dict]:
    """(directory, report) of the demo's quick run from nothing, gone on after the SIGTERM with the same command."""
    return stopped["out"], run_quick("demo", stopped["out"])


def test_sigterm_during_the_last_sft_step_ends_the_run_before_the_next_stage(stopped):
    stages = pipeline_config(read_recipe("demo"), quick=True).stages()
    after = stages.index("sft") + 1
    assert stopped["status"] == 143, stopped["log"][-4000:]  # the shell's status for SIGTERM
    assert (
        f"jaxseeker pipeline: stopped by SIGTERM before stage {stages[after]}; the stages before it are saved; "
        f"to go on: jaxseeker {' '.join(stopped['argv'])}" in stopped["log"]
    )
    assert stopped["done"] == sorted(stages[:after]) and stages[after] not in stopped["dirs"]  # the SFT, nothing after
    assert stopped["sft_loss"] > 0
    lines = [f"would run: {', '.join(stages[after:])}", f"reused: {', '.join(stages[:after])}"]
    assert stopped["dry_run"] == (0, lines)


def sampled_evals_hold(run: Path, report: dict, names: tuple[str, ...]) -> None:
    """Each sampled eval of `names` rolled every test question out twice (`--quick`'s cap) at the recipe's
    temperature, and its pass@1 is at most its pass@2."""
    for name in names:
        sampled = report[name]
        assert (sampled["k"], sampled["temperature"], sampled["questions"]) == (2, 0.7, report["qa"]["test"])
        assert 0 <= sampled["pass_at_1"] <= sampled["pass_at_k"] <= 1
        assert len((run / name / "results.jsonl").read_text().splitlines()) == 2 * report["qa"]["test"]


def test_the_demo_runs_every_stage_from_nothing_with_sampled_evals_beside_greedy(demo_run):
    run, report = demo_run
    stages = list(report["stage_wall_s"])
    assert report["reused_stages"] == stages[: stages.index("sft") + 1]  # those the stopped run finished
    sampled_evals_hold(run, report, ("sample_sft", "sample_rl"))
    change = report["sampled_rl_change"]  # paired by question and sample
    assert change["questions"] == report["qa"]["test"] and change["rollouts"] == [2, 2]
    assert change["delta_pass_at_1"] == pytest.approx(
        report["sample_rl"]["pass_at_1"] - report["sample_sft"]["pass_at_1"]
    )
    text = (run / "report.md").read_text()
    assert "| policy | greedy pass@1 | sampled pass@1 | pass@2 | sharpening room (pass@2 − greedy) |" in text
    assert "RL's sampled pass@1 (against the SFT policy's, the same test questions and samples) changed" in text


def test_demo_rl_goes_on_from_the_demos_run_and_runs_only_its_own_stages(demo_run, tmp_path):
    demo_dir, demo_report = demo_run
    out = tmp_path / "run"
    shutil.copytree(demo_dir, out)
    report = run_quick("demo_rl", out)
    # its RL (4 steps to demo's 1, cut to 2 and 1 by --quick) and what follows from it run; so do the stages demo lacks
    own = ("rl", "eval_rl", "sample_rl", "average", "eval_average", "sample_average")
    assert report["reused_stages"] == [s for s in demo_report["stage_wall_s"] if s not in own]
    assert [s for s in report["stage_wall_s"] if s not in report["reused_stages"]] == list(own)
    assert report["average"]["ratio"] == 0.5 and report["eval_average"]["questions"] == report["eval_rl"]["questions"]
    sampled_evals_hold(out, report, ("sample_average",))
