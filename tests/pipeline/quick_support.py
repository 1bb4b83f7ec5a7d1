"""The recipe of the quick pipeline tests, the copy of the run before RL that a test goes on from (the run itself
is the `before_rl` fixture of conftest.py, built once per session), and a shipped recipe's quick run, checked."""

import json
import shutil
from pathlib import Path

from jaxseeker.cli import main
from jaxseeker.pipeline import pipeline_config
from jaxseeker.pipeline.quick import TINY_POLICY
from jaxseeker.train.recipe import read_recipe

RFT_LR = {"optimizer": {"lr": 1e-5, "min_lr": 1e-5}}  # rft must set its own learning rate
# Every stage a from-scratch policy can have (copy warm-up, context extension, fresh questions, RL pool), with the
# levers the assertions check; `--quick` cuts each stage short.
RECIPE = {
    "name": "t",
    "policy": {"copy_warmup_steps": 100, "permute_names": True, "drop_thousands_separators": True},
    "eval": {"fresh_questions": 60},
    "sft": {"data": {"permute_digits": True, "copy_rate": 0.5, "copy_gap": 16}},
    "extend": {"train": {"steps": 300}},
    "rl": {
        "train_questions": 40,
        "fresh_questions": 40,
        "rl": {"epochs": 2, "kl_coef": 0.01, "pack": True},
        "optimizer": {"eps": 1e-4},
    },
}


def go_on_from(before_rl: tuple[Path, dict], tmp_path: Path) -> Path:
    """A copy of the run stopped before RL, for a test to resume."""
    root, _ = before_rl
    shutil.copytree(root, tmp_path, dirs_exist_ok=True)
    return tmp_path


def run_quick(name: str, out: Path) -> dict:
    """The report of `jaxseeker pipeline --config NAME --quick --out OUT`, checked against the recipe's stages."""
    full, quick = pipeline_config(read_recipe(name)), pipeline_config(read_recipe(name), quick=True)
    expected = full.stages()
    if full.policy.init:  # a pretrained policy's zero-shot eval gives way to the tiny one's tokenizer
        expected = tuple(s for s in expected if s != "eval_base")
        expected = expected[: expected.index("sft")] + ("tokenizer",) + expected[expected.index("sft") :]
    assert quick.stages() == expected  # the recipe's stages
    assert main(["pipeline", "--config", name, "--quick", "--out", str(out), "--no-progress"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert list(report["stage_wall_s"]) == list(quick.stages())
    shape = json.loads((out / quick.rl.stages()[-1] / "hf" / "config.json").read_text())
    assert (shape["hidden_size"], shape["num_hidden_layers"]) == (TINY_POLICY["hidden_size"], 2)
    asked = quick.qa.n_test + quick.eval.fresh_questions
    assert report["eval_sft"]["questions"] == report["eval_rl"]["questions"] == asked
    for stage in ("sft", *("extend",) * quick.extend.given()):
        recipe = read_recipe(out / stage / "recipe.yaml")
        assert json.loads((out / stage / "done.json").read_text())["metrics"]["final_loss"] > 0
        assert recipe["train"]["steps"] <= 4 and recipe["optimizer"].get("warmup_steps", 1) <= 1
    return report
