"""`jaxseeker pipeline --config NAME --quick` for real, for every pipeline recipe shipped: the same stages as the
recipe's (a tiny from-scratch policy in place of a pretrained one), each cut to a few steps and questions. The demo
runs from nothing; `demo_rl` is the demo with more RL steps and a weight average, so it goes on from the demo's
run as a user's would, reusing every stage whose inputs are the demo's (`--quick` caps both to the same RL steps)
and running only its own (demo_copy and demo_focus, on another worker: test_pipeline_shipped_quick_tiny.py)."""

import shutil
from pathlib import Path

import pytest
from quick_support import run_quick

from jaxseeker.train.recipe import read_recipe, recipe_kind, shipped_configs

PIPELINES = [name for name in shipped_configs() if recipe_kind(read_recipe(name)) == "pipeline"]


def test_the_shipped_pipeline_recipes_are_the_demos():
    assert PIPELINES == ["demo", "demo_copy", "demo_focus", "demo_rl"]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """(directory, report) of the demo's quick run, from nothing."""
    out = tmp_path_factory.mktemp("demo") / "run"
    return out, run_quick("demo", out)


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
    assert not report["reused_stages"]
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
    own = ("average", "eval_average", "sample_average")  # the stages demo lacks
    assert report["reused_stages"] == [s for s in demo_report["stage_wall_s"]]
    assert [s for s in report["stage_wall_s"] if s not in report["reused_stages"]] == list(own)
    assert report["average"]["ratio"] == 0.5 and report["eval_average"]["questions"] == report["eval_rl"]["questions"]
    sampled_evals_hold(out, report, ("sample_average",))
