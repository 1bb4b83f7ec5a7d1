"""`train.compiler_options` of an SFT recipe reach the XLA compile of the step."""

import json

import numpy as np
import pytest

from jaxseeker.data import train_tokenizer
from jaxseeker.train.sft.loop import run_sft


def tiny_recipe(root, compiler_options: dict) -> dict:
    """A 2-step recipe of a tiny qwen3 on 8 one-turn trajectories written under `root`."""
    records = [
        {
            "messages": [
                {"role": "user", "content": f"Where is item {i}?"},
                {"role": "assistant", "content": f"<answer>shelf {i}</answer>"},
            ]
        }
        for i in range(8)
    ]
    train_tokenizer([m["content"] for r in records for m in r["messages"]], 300, root / "tok")
    (root / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return {
        "name": "tiny",
        "model": {
            "model_type": "qwen3",
            "vocab_size": 300,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_layers": 1,
            "num_heads": 2,
            "num_kv_heads": 1,
            "head_dim": 16,
            "attention_impl": "blocked",
        },
        "data": {"seq_len": 64, "batch_size": 2, "seed": 0, "num_threads": 0},
        "optimizer": {"lr": 1e-3, "warmup_steps": 0},
        "train": {
            "train_files": [str(root / "train.jsonl")],
            "tokenizer": str(root / "tok"),
            "steps": 2,
            "checkpoint_every": 10,
            "out_dir": str(root / "run"),
            "compiler_options": compiler_options,
        },
    }


def test_an_option_this_xla_lacks_fails_the_first_step_naming_it(tmp_path):
    with pytest.raises(RuntimeError, match="no_such_xla_option"):
        run_sft(tiny_recipe(tmp_path, {"no_such_xla_option": 1}), progress=False)


def test_known_options_compile_and_train(tmp_path):
    options = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
    summary = run_sft(tiny_recipe(tmp_path, options), progress=False)
    assert summary["trained_tokens"] > 0 and np.isfinite(summary["final_loss"])
