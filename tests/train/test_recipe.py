"""Recipes: YAML with `--set` overrides; numbers written as `1e-4` are numbers, in the file and on the command line."""

import dataclasses

import pytest

from jaxseeker.pipeline import pipeline_config
from jaxseeker.train.recipe import RecipeError, build, load_yaml, read_recipe


def test_exponent_floats_are_floats_in_files_and_overrides(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("optimizer: {lr: 3e-4, min_lr: 1.0e-5, warmup_steps: 10}\nrl: {sampling: {temperature: .5}}\n")
    recipe = read_recipe(path, ["optimizer.lr=5e-4", "rl.optimizer.lr=2E-4", "rl.method=rft"])
    assert recipe["optimizer"] == {"lr": 5e-4, "min_lr": 1e-5, "warmup_steps": 10}
    assert recipe["rl"] == {"sampling": {"temperature": 0.5}, "optimizer": {"lr": 2e-4}, "method": "rft"}
    assert recipe["name"] == "run"
    rft = {"optimizer": {"lr": 1e-5}}  # rft sets its own learning rate
    assert pipeline_config({"rl": recipe["rl"], "rft": rft}).rl.optimizer["lr"] == 2e-4  # reaches the stage as a number
    assert [load_yaml(t) for t in ("1e-4", "-2e+3", "7", "e5", "1e", "1.5.2")] == [
        1e-4,
        -2000.0,
        7,
        "e5",
        "1e",
        "1.5.2",
    ]


def test_a_malformed_override_names_itself(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("optimizer: {lr: 1e-4}\n")
    with pytest.raises(RecipeError, match="--set 'optimizer.lr': expected key=value"):
        read_recipe(path, ["optimizer.lr"])
    with pytest.raises(RecipeError, match="--set 'optimizer.lr.x=1': 'lr' is not a section"):
        read_recipe(path, ["optimizer.lr.x=1"])


def test_a_value_of_the_wrong_type_names_its_key():
    with pytest.raises(RecipeError, match=r"^policy\.num_layers: expected int, got 'three' \(str\)$"):
        pipeline_config({"policy": {"num_layers": "three"}})
    with pytest.raises(RecipeError, match=r"^policy\.permute_names: expected bool, got 'yes' \(str\)$"):
        pipeline_config({"policy": {"permute_names": "yes"}})
    with pytest.raises(RecipeError, match=r"^sft\.train\.steps: expected int, got 'three' \(str\)$"):
        pipeline_config({"sft": {"train": {"steps": "three"}}})
    with pytest.raises(RecipeError, match=r"^rl\.optimizer\.lr: expected float, got True \(bool\)$"):
        pipeline_config({"rl": {"optimizer": {"lr": True}}})
    with pytest.raises(RecipeError, match=r"^policy\.num_layers must be >= 1, got -3$"):  # the key is named once
        pipeline_config({"policy": {"num_layers": -3}})
    assert pipeline_config({"sft": {"optimizer": {"lr": 3}}}).sft.optimizer["lr"] == 3  # an int is a number too


@dataclasses.dataclass(frozen=True)
class _Section:
    budget: int | None = None
    stops: tuple[str, ...] = ()


def test_optional_scalars_take_none_and_containers_check_themselves():
    assert build(_Section, {"budget": None, "stops": ["</answer>"]}, "s") == _Section(None, ["</answer>"])
    with pytest.raises(RecipeError, match=r"^s\.budget: expected int or null, got '8' \(str\)$"):
        build(_Section, {"budget": "8"}, "s")
