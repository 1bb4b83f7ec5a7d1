"""The recipe of the quick pipeline tests and the copy of the run before RL that a test goes on from (the run
itself is the `before_rl` fixture of conftest.py, built once per session)."""

import shutil
from pathlib import Path

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
