"""`jaxseeker pipeline --quick` for the shipped recipes of a from-scratch policy, from nothing: the checks of every
shipped recipe's quick run are quick_support.py's `run_quick`. demo_focus stands for demo_copy too: under `--quick`
demo_copy's stages are a subset of demo_focus's (no fresh questions, no context extension), and its one lever of its
own, DUPO's selection, is the RL loop's (tests/train/rl)."""

import pytest
from quick_support import run_quick

from jaxseeker.pipeline import pipeline_config
from jaxseeker.train.recipe import read_recipe

pytestmark = pytest.mark.heavy  # a minute or more of CPU: runs first (tests/conftest.py)


def test_demo_copys_quick_stages_are_demo_focuss():
    copy, focus = (pipeline_config(read_recipe(name), quick=True).stages() for name in ("demo_copy", "demo_focus"))
    assert set(copy) < set(focus) and "warmup" in copy


def test_quick_runs_every_stage_of_the_recipe_on_a_tiny_policy(tmp_path):
    report = run_quick("demo_focus", tmp_path / "run")
    assert not report["reused_stages"] and report["warmup"]["steps"] == 4  # the copy warm-up, cut to 4 steps
