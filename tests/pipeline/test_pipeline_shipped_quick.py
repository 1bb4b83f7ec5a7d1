"""`jaxseeker pipeline --config NAME --quick` for real, for every pipeline recipe shipped: the same stages as the
recipe's (a tiny from-scratch policy in place of a pretrained one), each cut to a few steps and questions."""

import json

import pytest

from jaxseeker.cli import main
from jaxseeker.pipeline import pipeline_config
from jaxseeker.pipeline.quick import TINY_POLICY
from jaxseeker.train.recipe import read_recipe, recipe_kind, shipped_configs

PIPELINES = [name for name in shipped_configs() if recipe_kind(read_recipe(name)) == "pipeline"]


def test_the_shipped_pipeline_recipes_are_the_demos():
    assert PIPELINES == ["demo", "demo_copy", "demo_focus", "demo_rl"]


@pytest.mark.parametrize("name", PIPELINES)
def test_quick_runs_every_stage_of_the_recipe_on_a_tiny_policy(name, tmp_path, capsys):
    full, quick = pipeline_config(read_recipe(name)), pipeline_config(read_recipe(name), quick=True)
    expected = full.stages()
    if full.policy.init:  # a pretrained policy's zero-shot eval gives way to the tiny one's tokenizer
        expected = tuple(s for s in expected if s != "eval_base")
        expected = expected[: expected.index("sft")] + ("tokenizer",) + expected[expected.index("sft") :]
    assert quick.stages() == expected  # the recipe's stages
    out = tmp_path / "run"
    assert main(["pipeline", "--config", name, "--quick", "--out", str(out), "--no-progress"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert list(report["stage_wall_s"]) == list(quick.stages()) and not report["reused_stages"]
    shape = json.loads((out / quick.rl.stages()[-1] / "hf" / "config.json").read_text())
    assert (shape["hidden_size"], shape["num_hidden_layers"]) == (TINY_POLICY["hidden_size"], 2)
    asked = quick.qa.n_test + quick.eval.fresh_questions
    assert report["eval_sft"]["questions"] == report["eval_rl"]["questions"] == asked
    for stage in ("sft", *("extend",) * quick.extend.given()):
        recipe = read_recipe(out / stage / "recipe.yaml")
        assert json.loads((out / stage / "done.json").read_text())["metrics"]["final_loss"] > 0
        assert recipe["train"]["steps"] <= 4 and recipe["optimizer"].get("warmup_steps", 1) <= 1
