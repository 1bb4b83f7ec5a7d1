"""Recipes: YAML with `--set` overrides; numbers written as `1e-4` are numbers, in the file and on the command line."""

import pytest

from jaxseeker.pipeline import pipeline_config
from jaxseeker.train.recipe import RecipeError, load_yaml, read_recipe


def test_exponent_floats_are_floats_in_files_and_overrides(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("optimizer: {lr: 3e-4, min_lr: 1.0e-5, warmup_steps: 10}\nrl: {temperature: .5}\n")
    recipe = read_recipe(path, ["optimizer.lr=5e-4", "rl.lr=2E-4", "rl.method=rft"])
    assert recipe["optimizer"] == {"lr": 5e-4, "min_lr": 1e-5, "warmup_steps": 10}
    assert recipe["rl"] == {"temperature": 0.5, "lr": 2e-4, "method": "rft"} and recipe["name"] == "run"
    assert pipeline_config({"rl": recipe["rl"]}).rl.lr == 2e-4  # reaches the stage as a number
    assert [load_yaml(t) for t in ("1e-4", "-2e+3", "7", "e5", "1e", "1.5.2")] == [1e-4, -2000.0, 7, "e5", "1e", "1.5.2"]


def test_a_malformed_override_names_itself(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("optimizer: {lr: 1e-4}\n")
    with pytest.raises(RecipeError, match="--set 'optimizer.lr': expected key=value"):
        read_recipe(path, ["optimizer.lr"])
    with pytest.raises(RecipeError, match="--set 'optimizer.lr.x=1': 'lr' is not a section"):
        read_recipe(path, ["optimizer.lr.x=1"])
