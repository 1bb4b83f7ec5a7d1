"""`jaxseeker pipeline --quick`: the recipe's stages on a tiny world and a tiny from-scratch policy, each stage cut
to a few steps and questions, so any shipped pipeline recipe runs end to end in under two minutes on a laptop CPU.

It proves the machinery (every stage the recipe runs, their files, resume), not the learning: a pretrained `init`
is replaced by a 2-layer, 64-wide Qwen3 trained from scratch with its own 2,048-token tokenizer, so the run neither
reads nor loads the pretrained model. That policy answers no question right, and rejection-sampling fine-tuning
(`rl.method: rft`) has then nothing to fine-tune on: the `rl` stage runs the policy gradient (`pg`) instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jaxseeker.train.recipe import merged

QUICK_WORLD = {"source": "synthetic", "size": 600, "countries": ()}
QUICK_QA = {"recipes": (("e2hqa", 120), ("sailorfog", 20)), "n_test": 8, "n_rl": 8}  # pairs: replace, not merge
QUICK_EXPERT = {"tries": 1, "slip_rate": 0.2}
# the policy, whatever the recipe's: its shape, and its copy warm-up when the recipe has one
TINY_POLICY = {
    "init": "",
    "lora": {},
    "vocab_size": 2048,
    "hidden_size": 64,
    "num_layers": 2,
    "num_heads": 2,
    "num_kv_heads": 1,
    "head_dim": 32,
    "intermediate_size": 128,
    "rope_theta": 10_000.0,
}
QUICK_WARMUP = {
    "copy_warmup_steps": 4,
    "copy_warmup_target_loss": 1.0,
    "copy_warmup_layers": 1,
    "copy_warmup_rows": 0,
    "copy_warmup_digit_rate": 0.5,
    "copy_warmup_gap": 16,
}
# At most these values (a recipe's smaller value stays): keys of `eval`, `rl` and `rl.rl`.
EVAL_CAPS = {"k": 1, "sampled_k": 2, "slots": 16, "max_context": 2048, "max_tool_calls": 6, "max_tokens_per_turn": 128}
EVAL_FRESH = 4  # held-out fresh questions when the recipe asks for any
RL_CAPS = {"train_questions": 4, "fresh_questions": 4}
RFT_ONLY = ("rft_per_question", "rft_replay", "rft_rounds", "rft_seeds")  # rl keys of rl.method rft
RL_LOOP_CAPS = {"steps": 2, "group_size": 2, "batch_questions": 4, "dupo_filter_rollouts": 2, "epochs": 2}
# caps only where the recipe sets the key (2 mini-batches divide the quick step's 4 × 2 episodes)
RL_LOOP_SET_CAPS = {"mini_batches": 2}
# the `jaxseeker sft` stages: rows (seq_len, batch_size) and steps; a warm-up of at most one step
SFT_ROWS = {"sft": (2048, 2), "extend": (4096, 1)}
SFT_STEPS = {"sft": 4, "extend": 2}


def _capped(section: Mapping[str, Any] | None, caps: Mapping[str, int]) -> dict[str, Any]:
    """`section` with each key of `caps` it sets lowered to at most the cap."""
    section = dict(section or {})
    return section | {k: min(section[k], cap) for k, cap in caps.items() if k in section}


def _quick_sft(section: Mapping[str, Any] | None, stage: str) -> dict[str, Any]:
    """A `jaxseeker sft` stage's sections cut to a few short steps (a warm-up the recipe sets: one step)."""
    section = dict(section or {})
    seq_len, batch_size = SFT_ROWS[stage]
    optimizer = dict(section.get("optimizer") or {})
    if stage == "sft" or "warmup_steps" in optimizer:  # extend and rft inherit the sft's
        optimizer["warmup_steps"] = min(optimizer.get("warmup_steps", 1), 1)
    quick = {
        "data": {"seq_len": seq_len, "batch_size": batch_size},
        "optimizer": optimizer,
        "train": {"steps": SFT_STEPS[stage]} | ({"chunk_size": 256} if stage == "sft" else {}),
    }
    return merged(section, quick, 1)


def quick_recipe(recipe: dict[str, Any]) -> dict[str, Any]:
    """`recipe` with the same stages on the quick world, questions and tiny policy, each stage cut short."""
    out = dict(recipe)
    out["world"] = QUICK_WORLD
    out["qa"] = merged(recipe.get("qa") or {}, QUICK_QA)
    out["expert"] = merged(recipe.get("expert") or {}, QUICK_EXPERT)
    policy = dict(recipe.get("policy") or {}) | TINY_POLICY
    policy["sft_seeds"] = min(policy.get("sft_seeds", 1), 2)
    out["policy"] = policy | (QUICK_WARMUP if policy.get("copy_warmup_steps") else {"copy_warmup_layers": 0})
    eval_ = _capped(recipe.get("eval"), EVAL_CAPS)
    out["eval"] = eval_ | {k: cap for k, cap in EVAL_CAPS.items() if k not in eval_ and k not in ("k", "sampled_k")}
    if eval_.get("fresh_questions"):
        out["eval"]["fresh_questions"] = EVAL_FRESH
    rl = {k: v for k, v in _capped(recipe.get("rl"), RL_CAPS).items() if k not in RFT_ONLY} | {"method": "pg"}
    rl["rl"] = _capped(rl.get("rl"), RL_LOOP_CAPS | RL_LOOP_SET_CAPS) | {"chunk_size": 256}
    rl["rl"] |= {k: cap for k, cap in RL_LOOP_CAPS.items() if k not in rl["rl"]}
    out["rl"] = rl
    out["sft"] = _quick_sft(recipe.get("sft"), "sft")
    if recipe.get("extend"):
        out["extend"] = _quick_sft(recipe["extend"], "extend")
    out.pop("rft", None)
    return out
