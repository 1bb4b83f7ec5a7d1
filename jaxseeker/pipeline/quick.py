"""`jaxseeker pipeline --quick`: the same pipeline on a tiny world and model, for the tests (≤ 2 minutes)."""

from __future__ import annotations

from typing import Any

from jaxseeker.train.recipe import merged

# Laid key by key over the recipe's, with QUICK_SCRATCH for a policy from scratch or QUICK_PRETRAINED for a
# pretrained one.
QUICK = {
    "world": {"source": "synthetic", "size": 600, "countries": ()},
    "qa": {"recipes": (("e2hqa", 120), ("sailorfog", 20)), "n_test": 8, "n_rl": 8},  # pairs: replace, not merge
    "expert": {"tries": 1, "slip_rate": 0.2},
    "eval": {
        "k": 1,
        "slots": 8,
        "max_context": 6144,
        "max_tool_calls": 12,
        "max_tokens_per_turn": 192,
        "fresh_questions": 4,
    },
    "rl": {
        "train_questions": 4,
        "fresh_questions": 4,
        "rl": {
            "steps": 2,
            "group_size": 2,
            "batch_questions": 4,
            "dupo_filter_rollouts": 2,
            "epochs": 2,
            "kl_coef": 0.01,
            "chunk_size": 256,
            "pack": True,
        },
        "optimizer": {"eps": 1e-4},
    },
    "rft": {"data": {"seq_len": 6144, "batch_size": 1}, "train": {"steps": 2}},
}
QUICK_SCRATCH = {
    "policy": {
        "vocab_size": 1024,
        "hidden_size": 64,
        "num_layers": 2,
        "num_heads": 2,
        "num_kv_heads": 1,
        "head_dim": 32,
        "intermediate_size": 128,
        "rope_theta": 10_000.0,
        "copy_warmup_steps": 4,
        "copy_warmup_target_loss": 1.0,
        "copy_warmup_layers": 1,
        "copy_warmup_digit_rate": 0.5,
        "copy_warmup_gap": 16,
        "permute_names": True,
        "drop_thousands_separators": True,
    },
    "sft": {
        "data": {"seq_len": 2048, "batch_size": 2, "permute_digits": True, "copy_rate": 0.5, "copy_gap": 16},
        "optimizer": {"warmup_steps": 1},
        "train": {"steps": 12, "chunk_size": 256},
    },
    "rft": {"optimizer": {"lr": 1.0e-3}},  # the rft fine-tune's own rate (a tiny model from scratch)
    "extend": {
        "data": {"seq_len": 4096, "batch_size": 1},
        "optimizer": {"lr": 2.5e-4, "min_lr": 2.5e-4, "warmup_steps": 1},
        "train": {"steps": 2},
    },
}
# a pretrained policy: its own shape and tokenizer, a few short SFT steps
QUICK_PRETRAINED = {
    "sft": {
        "data": {"seq_len": 2048, "batch_size": 1},
        "optimizer": {"lr": 1.0e-4, "min_lr": 1.0e-5, "warmup_steps": 1},
        "train": {"steps": 4},
    },
    "rft": {"optimizer": {"lr": 1.0e-5, "min_lr": 1.0e-5}},
}


def quick_recipe(recipe: dict[str, Any]) -> dict[str, Any]:
    """`recipe` with the quick presets laid over it (`QUICK`, then the policy's own: scratch or pretrained)."""
    pretrained = bool((recipe.get("policy") or {}).get("init"))
    return merged(merged(recipe, QUICK, 2), QUICK_PRETRAINED if pretrained else QUICK_SCRATCH, 2)
