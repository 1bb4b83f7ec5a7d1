"""A toy RL environment with a policy of set weights, and `jaxseeker bench rl` (one RL step's time split).

The toy: every question asks for the lucky colour, whose answer is "red". The policy is a model whose
next token depends only on the current one (`agent.bigram_params`): after the generation prompt it
writes `<think>` + " the"×N + `</think>`, then (with `tool_p`) a `search` call and a new turn, or
`<answer>` + one of four colours (uniform) + `</answer><|im_end|>`. A policy that learns to say "red"
raises its exact-match reward from 1/4 towards 1: the loop's learning test, on the real engine,
rollout loop, judge and update. Its blocks are zero, so training moves only the embeddings, final norm
and output head; the benchmark still runs every layer's compute.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from jaxseeker import model
from jaxseeker.agent import bigram_params, prompts
from jaxseeker.data import render_chat, train_tokenizer
from jaxseeker.model import ModelConfig
from jaxseeker.model.flops import flops_per_token, matmul_ceiling

COLOURS = ("red", "blue", "green", "gold")
TOY_ANSWER = "red"
TOY_CALL = '{"name": "search", "arguments": {"query": ["lucky colour"]}}'
TOY_PAGES = (
    {"url": "https://toy.test/red", "title": "Red", "text": "Red is the lucky colour of the day in the old almanac."},
    {"url": "https://toy.test/blue", "title": "Blue", "text": "Blue is the colour of the sea and of the sky."},
)


def toy_question(i: int) -> str:
    """The text of toy question `i`."""
    return f"Which colour is lucky today? Ask number {i}."


def toy_tokenizer() -> Any:
    """A 600-token BPE over the agent's prompts with the colours and the toy search call as single tokens."""
    chat = render_chat(prompts.initial_messages(toy_question(0), [], date="2025-01-01"), add_generation_prompt=True)
    texts = [chat, prompts.SYSTEM_INTRO, prompts.TOOLS_SECTION, prompts.FINAL_ANSWER_REQUEST, toy_question(0)]
    texts += [p["text"] for p in TOY_PAGES]
    tokenizer = train_tokenizer(texts * 4, 600)
    tokenizer.add_tokens([*COLOURS, TOY_CALL])
    return tokenizer


def _one(tokenizer: Any, text: str) -> int:
    ids = tokenizer.backend_tokenizer.encode(text, add_special_tokens=False).ids
    if len(ids) != 1:
        raise ValueError(f"toy policy: {text!r} is {len(ids)} tokens, not one")
    return ids[0]


def toy_policy(
    tokenizer: Any, cfg: ModelConfig, *, think_tokens: float = 2.0, tool_p: float = 0.0, seed: int = 0
) -> dict:
    """Weights of the toy policy (module docstring) for `cfg` (untied embeddings, hidden_size > 13: one axis per
    chain token)."""
    if think_tokens < 1 or not 0 <= tool_p < 1:
        raise ValueError(f"toy policy: need think_tokens >= 1 and 0 <= tool_p < 1, got {think_tokens}, {tool_p}")
    prompt_end = tokenizer.backend_tokenizer.encode("<|im_start|>assistant\n", add_special_tokens=False).ids[-1]
    t = {
        name: _one(tokenizer, name)
        for name in (
            "<think>",
            "</think>",
            "<answer>",
            "</answer>",
            "<tool_call>",
            "</tool_call>",
            "<|im_end|>",
            " the",
            TOY_CALL,
            *COLOURS,
        )
    }
    stay = 1.0 - 1.0 / think_tokens
    after_think = {t["<answer>"]: 1.0 - tool_p, **({t["<tool_call>"]: tool_p} if tool_p else {})}
    transitions = {
        prompt_end: {t["<think>"]: 1.0},
        t["<think>"]: {t[" the"]: 1.0},
        t[" the"]: {t[" the"]: stay, t["</think>"]: 1.0 - stay} if stay else {t["</think>"]: 1.0},
        t["</think>"]: after_think,
        t["<answer>"]: {t[c]: 1.0 / len(COLOURS) for c in COLOURS},
        **{t[c]: {t["</answer>"]: 1.0} for c in COLOURS},
        t["</answer>"]: {t["<|im_end|>"]: 1.0},
        t["<tool_call>"]: {t[TOY_CALL]: 1.0},
        t[TOY_CALL]: {t["</tool_call>"]: 1.0},
        t["</tool_call>"]: {t["<|im_end|>"]: 1.0},
    }
    return bigram_params(cfg, transitions, seed=seed)


def toy_config(vocab_size: int, **overrides) -> ModelConfig:
    """A Qwen3-shaped config for the toy (2 layers, hidden 64 unless overridden), untied embeddings."""
    base = {
        "vocab_size": vocab_size,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_layers": 2,
        "num_heads": 2,
        "num_kv_heads": 1,
        "head_dim": 32,
        "tie_word_embeddings": False,
    }
    return ModelConfig(**{**base, **overrides})


def write_toy(
    out_dir: str | Path,
    *,
    n_questions: int = 16,
    think_tokens: float = 2.0,
    tool_p: float = 0.0,
    seed: int = 0,
    **model_overrides,
) -> dict[str, str]:
    """Write the toy policy (HF checkpoint + tokenizer), its questions and search pages; returns their paths."""
    out = Path(out_dir)
    tokenizer = toy_tokenizer()
    cfg = toy_config(len(tokenizer), **model_overrides)
    params = toy_policy(tokenizer, cfg, think_tokens=think_tokens, tool_p=tool_p, seed=seed)
    model.save_hf(params, cfg, out / "policy")
    tokenizer.save_pretrained(out / "policy")
    questions = out / "questions.jsonl"
    questions.write_text(
        "".join(json.dumps({"question": toy_question(i), "answer": TOY_ANSWER}) + "\n" for i in range(n_questions))
    )
    pages = out / "pages.jsonl"
    pages.write_text("".join(json.dumps(p) + "\n" for p in TOY_PAGES))
    return {"policy": str(out / "policy"), "questions": str(questions), "pages": str(pages)}


def toy_recipe(paths: dict[str, str], out_dir: str | Path, *, tools: bool = False, **rl) -> dict:
    """A recipe for the toy: GRPO, B=4 questions × G=8, 2 mini-batches, 160-token context, lr 0.02 constant."""
    return {
        "name": "rl_toy",
        "model": {"hf_path": paths["policy"]},
        "optimizer": {"lr": 0.02, "min_lr": 0.02, "weight_decay": 0.0, "clip_norm": 1.0},
        "rl": {
            "questions": [paths["questions"]],
            "steps": 20,
            "batch_questions": 4,
            "group_size": 8,
            "mini_batches": 2,
            "chunk_size": 128,
            "checkpoint_every": 5,
            "out_dir": str(out_dir),
            **rl,
        },
        "rollout": {
            "max_context_tokens": 160,
            "max_tokens_per_turn": 32,
            "answer_reserve_tokens": 8,
            "max_tool_calls": 4,
            "date": "2025-01-01",
        },
        "engine": {},
        "sampling": {"temperature": 1.0},
        "tools": {"enabled": ["search"] if tools else []},
        "world": f"pages:{paths['pages']}" if tools else None,
        "reward": {"fn": "webdancer", "judge": "em"},
    }


def run_bench(
    *,
    hidden: int = 256,
    layers: int = 4,
    batch_questions: int = 4,
    group_size: int = 4,
    mini_batches: int = 2,
    max_context: int = 1024,
    think_tokens: float = 24.0,
    tool_p: float = 0.5,
    steps: int = 2,
    pack: bool = False,
    compiler_options: dict | None = None,
    plan: Callable[[dict], dict] | None = None,
) -> dict:
    """Time one RL step of the toy with a `search` tool (after a warm-up step that compiles); prints a table.
    pack: the update packs several episodes per row (`rl.pack`) instead of one per row. compiler_options: XLA
    options for the update and old-log-prob compiles (`rl.compiler_options`). plan: the recipe as it will run
    (`bench rl` passes `planning.fit.planned_recipe`, as `jaxseeker rl` plans its update: the remat and tokens a pass
    that fit, a size that cannot fit refused before anything is built); None runs the recipe unplanned."""
    from jaxseeker.train.rl.collect import dupo_pool
    from jaxseeker.train.rl.loop import QuestionSampler, prepare, run_step

    with tempfile.TemporaryDirectory() as tmp:
        heads = max(hidden // 64, 1)
        kv_heads = max(d for d in range(1, max(heads // 2, 1) + 1) if heads % d == 0)  # SmolLM2's 576: 9 and 3
        paths = write_toy(
            tmp,
            think_tokens=think_tokens,
            tool_p=tool_p,
            hidden_size=hidden,
            num_layers=layers,
            intermediate_size=hidden * 3,
            num_heads=heads,
            num_kv_heads=kv_heads,
            head_dim=64,
        )
        recipe = toy_recipe(
            paths,
            Path(tmp) / "run",
            tools=True,
            steps=steps + 1,
            batch_questions=batch_questions,
            group_size=group_size,
            mini_batches=mini_batches,
            chunk_size=512,
            checkpoint_every=10**6,
            pack=pack,
            compiler_options=dict(compiler_options or {}),
        )
        recipe["rollout"].update(
            max_context_tokens=max_context,
            max_tokens_per_turn=max_context // 2,
            answer_reserve_tokens=64,
            max_tool_calls=8,
        )
        recipe["optimizer"]["lr"] = recipe["optimizer"]["min_lr"] = 1e-4
        recipe = plan(recipe) if plan else recipe
        run = prepare(recipe)
        run.sampler = QuestionSampler(dupo_pool(run), run.rl.seed)
        t = time.perf_counter()
        state, _, _ = run_step(run, run.state, 0)
        warmup_s = time.perf_counter() - t
        rows = []
        for step in range(1, steps + 1):
            state, metrics, _ = run_step(run, state, step)
            rows.append(metrics)
        run.checkpointer.close()
    m = {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}
    ceiling = matmul_ceiling(1024)
    update_tokens = m["update_real_tokens"] * run.rl.epochs  # the informative episodes' tokens, every epoch
    update_flops = update_tokens * flops_per_token(run.cfg, int(m["context_tokens"] / 2), training=True)
    device_s = m["engine_s"] + m["old_logp_s"] + m["update_s"]
    result = {
        **m,
        "warmup_s": warmup_s,
        "parameters": model.count_params(run.cfg),
        "pack": pack,
        "compiler_options": dict(compiler_options or {}),
        "remat": recipe["model"].get("remat", run.cfg.remat),
        "tokens_a_pass": recipe["rl"].get("update_tokens", 0),
        "update_tokens_per_s": update_tokens / m["update_s"],
        "device_utilisation": device_s / m["step_s"],
        "update_mfu": update_flops / m["update_s"] / ceiling,
        "matmul_ceiling_gflops": ceiling / 1e9,
    }
    _print_table(result, run.cfg, batch_questions, group_size)
    return result


def _print_table(r: dict, cfg: ModelConfig, b: int, g: int) -> None:
    import jax

    options = ", ".join(f"{k}={v}" for k, v in r["compiler_options"].items()) or "none"
    print(
        f"\nbench rl: {r['parameters'] / 1e6:.1f}M-param Qwen3 shape ({cfg.num_layers} layers, hidden "
        f"{cfg.hidden_size}), {b} questions × {g} rollouts, {jax.devices()[0].platform}; compile step "
        f"{r['warmup_s']:.1f} s; update at remat {r['remat']}, {r['tokens_a_pass'] or 'a mini-batch of'} tokens a "
        f"pass; XLA options: {options}"
    )
    phases = [
        ("rollout", r["rollout_s"]),
        ("  engine (device)", r["engine_s"]),
        ("  waiting for tools", r["tool_wait_s"]),
        ("judge / reward", r["reward_s"]),
        ("old-logprob pass", r["old_logp_s"]),
        ("update", r["update_s"]),
    ]
    other = r["step_s"] - r["rollout_s"] - r["reward_s"] - r["old_logp_s"] - r["update_s"]
    print(f"{'phase':<22}{'seconds':>9}{'share':>8}")
    for name, seconds in [*phases, ("other (host)", other), ("step", r["step_s"])]:
        print(f"{name:<22}{seconds:>9.3f}{seconds / r['step_s']:>8.1%}")
    print(
        f"episodes: {r['response_tokens']:.0f} sampled / {r['context_tokens']:.0f} context tokens, "
        f"{r['tool_calls']:.2f} tool calls, {r['turns']:.2f} turns on average; {r['update_rows']:.0f} update rows "
        f"{r['row_fill']:.0%} filled ({'packed' if r['pack'] else 'one padded row per episode'}), "
        f"{r['update_tokens_per_s']:.0f} real tokens/s"
    )
    mfu = (
        f"update MFU {r['update_mfu']:.1%} of a {r['matmul_ceiling_gflops']:.0f} GFLOP/s matmul ceiling"
        if r["update_rows"]
        else "no update: every group's rollouts agreed (A = 0)"
    )
    print(f"device utilisation {r['device_utilisation']:.1%} (engine + old-logprob + update time / step); {mfu}")
    if "rollout_roofline_s" in r:
        print(
            f"rollout: {r['rollout_s'] / r['rollout_roofline_s']:.2f}x its roofline ({r['rollout_roofline_s']:.3g} s: "
            f"{r['prefill_tokens']:.0f} prefilled and {r['decode_tokens']:.0f} decoded tokens, "
            f"{r['decode_steps']:.0f} decode steps of {r['decode_rows']:.1f} rows on average)"
        )
