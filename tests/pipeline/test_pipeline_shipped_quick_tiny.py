"""`jaxseeker pipeline --quick` for the shipped recipes of a from-scratch policy (demo_copy, demo_focus), each from
nothing: the checks of every shipped recipe's quick run are quick_support.py's `run_quick`."""

import pytest
from quick_support import run_quick


@pytest.mark.parametrize("name", ["demo_copy", "demo_focus"])
def test_quick_runs_every_stage_of_the_recipe_on_a_tiny_policy(name, tmp_path):
    report = run_quick(name, tmp_path / "run")
    assert not report["reused_stages"] and report["warmup"]["steps"] == 4  # the copy warm-up, cut to 4 steps
