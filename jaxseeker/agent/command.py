"""`jaxseeker rollout …` (episodes of a model over questions, with local tools) and `jaxseeker bench rollout`."""

from __future__ import annotations

import argparse
import collections
import dataclasses
import statistics
from typing import Any

from jaxseeker import model
from jaxseeker.agent.engine import make_engine
from jaxseeker.agent.episode import as_question, numbered_questions, write_episodes
from jaxseeker.agent.loop import rollout
from jaxseeker.agent.rollout_bench import bench_rollout, bench_rollout_len, compare_rollouts, format_comparison
from jaxseeker.agent.rollout_types import RolloutConfig, RolloutResult
from jaxseeker.agent.submit import (
    SUBMIT_F1,
    SUBMIT_HELP,
    SUBMIT_TOOL,
    TOOLS,
    TOOLS_HELP,
    episode_tools,
    require_answers,
)
from jaxseeker.argtypes import at_least
from jaxseeker.cli_args import (
    MODEL_FORMS,
    add_config,
    add_k,
    add_max_context,
    add_mesh,
    add_world,
    model_context,
    read_config,
)
from jaxseeker.parallel.mesh_config import mesh_text
from jaxseeker.rewards import exact_match
from jaxseeker.rewards.judges import gold_answers
from jaxseeker.rewards.srrl import SUBMIT_THRESHOLD
from jaxseeker.tools import UNSAFE_PYTHON_HELP, ToolsConfig, unsafe_python
from jaxseeker.world import Corpus, open_world, read_pages_jsonl

ROLLOUT_CONTEXT = 32768  # `rollout`'s context tokens of an episode when the model allows them


def summarize(result: RolloutResult) -> str:
    """A few lines: terminations, tool calls and turns per episode, answer accuracy, tokens/s and engine idle."""
    episodes, stats = result.episodes, result.stats
    if not episodes:
        return "no episodes"
    counts = collections.Counter(e.termination for e in episodes)
    calls = [len(e.tool_calls) for e in episodes]
    errors = sum(1 for e in episodes for c in e.tool_calls if c.error is not None)
    lines = [
        f"{len(episodes)} episodes in {stats.wall_s:.1f}s",
        "terminations: " + ", ".join(f"{k} {v} ({v / len(episodes):.0%})" for k, v in counts.most_common()),
        (
            f"tool calls per episode: mean {statistics.fmean(calls):.2f}, max {max(calls)} ({errors} failed); "
            f"turns per episode: mean {statistics.fmean(e.turns for e in episodes):.2f}"
        ),
    ]
    submitted = [len(e.submissions) for e in episodes]
    if any(submitted):
        lines.append(f"answer submissions per episode: mean {statistics.fmean(submitted):.2f}, max {max(submitted)}")
    judged = [e for e in episodes if e.answer is not None]
    if judged:
        right = sum(1 for e in judged if e.prediction is not None and exact_match(e.prediction, gold_answers(e.answer)))
        lines.append(f"exact match: {right}/{len(judged)} ({right / len(judged):.1%})")
    lines.append(
        f"sampled tokens {stats.sampled_tokens} ({stats.tokens_per_s:.1f} tokens/s); engine busy "
        f"{stats.step_s / max(stats.wall_s, 1e-9):.0%}, idle waiting for tools {stats.idle_fraction:.1%}"
    )
    return "\n".join(lines)


def _corpus(args: argparse.Namespace) -> Corpus | None:
    if args.corpus is not None:
        return Corpus(read_pages_jsonl(args.corpus))
    if args.world is not None:
        return open_world(args.world).corpus
    return None


def _rollout(args: argparse.Namespace) -> int:
    from jaxseeker.data.tokenizer import load_tokenizer
    from jaxseeker.generation import SamplingConfig

    numbered = numbered_questions(args.questions)
    if SUBMIT_TOOL in args.tools:
        require_answers(args.questions, numbered)  # before the model loads
    model_dir = model.resolve_model(args.model)  # a registered name or a GGUF file: its imported HF directory
    tokenizer = load_tokenizer(model_dir)
    cfg, params = model.load_hf(model_dir)
    args.max_context = model_context(args.max_context, cfg.max_position_embeddings, default=ROLLOUT_CONTEXT)
    registry = episode_tools(
        unsafe_python(ToolsConfig(enabled=args.tools), args.unsafe_python),
        corpus=_corpus(args),
        submit_threshold=args.submit_threshold,
    )
    questions = [question for _, question in numbered]
    config = RolloutConfig(
        max_tool_calls=args.max_tool_calls,
        max_context_tokens=args.max_context,
        max_tokens_per_turn=args.max_turn_tokens,
        timeout_s=args.timeout,
        answer_reserve_tokens=min(512, args.max_context // 8),
    )
    sampling = SamplingConfig(temperature=args.temperature, top_p=args.top_p, top_k=args.top_k, seed=args.seed)
    engine = make_engine(
        params,
        cfg,
        tokenizer,
        slots=args.slots,
        max_len=args.max_context,
        sampling=sampling,
        steps_per_call=args.steps_per_call,
        mesh=args.mesh,
    )
    result = rollout(
        engine, tokenizer, registry, questions, config, n_per_question=args.k, progress=not args.no_progress
    )
    write_episodes(args.out, result.episodes)
    print(summarize(result))
    print(f"wrote {len(result.episodes)} episodes to {args.out} (generated on {mesh_text(args.mesh)})")
    return 0


def _bench(args: argparse.Namespace) -> int:
    if args.model is not None:
        if args.group_size != 1:
            raise SystemExit(
                "jaxseeker bench rollout: --group-size is the scripted model's; --model rolls each question out once"
            )
        return _bench_model(args)
    args.episodes = args.episodes or 64
    args.tool_calls = args.tool_calls or 4
    args.max_context = args.max_context or 2048
    needed = bench_rollout_len(args.tool_calls, args.think_tokens)
    if needed > args.max_context:
        raise SystemExit(
            f"jaxseeker bench rollout: --max-context {args.max_context} is too small for --tool-calls "
            f"{args.tool_calls} of --think-tokens {args.think_tokens:g} (needs about {needed})"
        )
    stats, prompts = bench_rollout(
        slots=args.slots,
        episodes=args.episodes,
        group_size=args.group_size,
        tool_calls=args.tool_calls,
        tool_latency_s=args.tool_latency,
        think_tokens=args.think_tokens,
        steps_per_call=args.steps_per_call,
        max_len=args.max_context,
        progress=not args.no_progress,
    )
    print(
        f"rollout utilisation: {stats.episodes} episodes, {stats.tool_calls} tool calls of "
        f"{args.tool_latency * 1000:.0f} ms, {args.slots} slots, in {stats.wall_s:.2f}s"
    )
    waves = -(-stats.episodes // args.slots)  # each slot's episodes one after another, their tool calls too
    tools_s = waves * args.tool_calls * args.tool_latency
    print(
        f"engine busy {stats.step_s / stats.wall_s:.1%} ({stats.steps} steps), idle waiting for tools "
        f"{stats.idle_fraction:.1%} (goal <= 10% where the engine, not the tools, bounds the run), host "
        f"{1 - (stats.step_s + stats.idle_s) / stats.wall_s:.1%}; {stats.sampled_tokens} tokens, "
        f"{stats.tokens_per_s:.0f} tokens/s; the tool calls alone need {tools_s:.2f}s"
    )
    print(
        f"prompts: {prompts.tokens} tokens in the cache, {prompts.prefilled} prefilled ({prompts.distinct} in the "
        f"distinct prompts of {stats.episodes // args.group_size} groups of {args.group_size}), {prompts.shared} "
        "shared from a request that held them"
    )
    return 0


def _bench_model(args: argparse.Namespace) -> int:
    """`bench rollout --model`: the recipe's eval rollouts (world, tools, limits, prompt; questions synthesised by
    its QA stage unless --questions) on jaxseeker's Engine and on HF `generate`; prints the table (or JSON)."""
    import json

    from jaxseeker.pipeline import pipeline_config
    from jaxseeker.pipeline.context import rollout_config
    from jaxseeker.pipeline.questions import fresh_questions
    from jaxseeker.tools import build_registry

    episodes = args.episodes or 16
    model_dir = model.resolve_model(args.model)  # a registered name or a GGUF file: its imported HF directory
    recipe = pipeline_config(read_config(args, "pipeline"))
    questions = None if args.questions is None else [q for _, q in numbered_questions(args.questions)][:episodes]
    world = open_world(args.world or recipe.world.spec())
    if questions is None:
        questions = [as_question(q) for q in fresh_questions(world, recipe.qa, episodes, [], progress=False)]
    limits = {"max_context_tokens": args.max_context, "max_tool_calls": args.tool_calls}
    config = dataclasses.replace(rollout_config(recipe), **{k: v for k, v in limits.items() if v is not None})
    result = compare_rollouts(
        model_dir,
        build_registry(recipe.tools, corpus=world.corpus),
        questions,
        config,
        slots=args.slots,
        steps_per_call=args.steps_per_call,
        repeats=args.repeats,
        progress=not args.no_progress,
    )
    print(json.dumps(result) if args.json else format_comparison(result))
    return 0


# `rollout` bounds of the numbers the engine and the loop take: the engine's context holds at least 2 tokens and
# its seed is an int32 that `Engine.submit` wants in [0, 2**31); top-k 0 is off (no -1), top-p in (0, 1].
SEED = at_least(0, high=2**31 - 1)
TEMPERATURE = at_least(0.0, float)
TOP_P = at_least(0.0, float, above=True, high=1.0)


def add_parser(subparsers: Any) -> None:
    """Add `rollout`: episodes of an HF model over a questions JSONL with local search / visit tools."""
    p = subparsers.add_parser("rollout", help="roll out ReAct episodes of a model over questions")
    p.add_argument("--model", required=True, help=MODEL_FORMS)
    p.add_argument("--questions", required=True, help='JSONL of {"question": …, "answer": …}')
    add_k(p, default=1)
    p.add_argument("--out", required=True, help="episodes JSONL to write")
    world = p.add_mutually_exclusive_group()
    world.add_argument("--corpus", help="pages JSONL of {url, title, text, links} for the local tools")
    add_world(world)
    p.add_argument("--tools", type=TOOLS, default=("search", "visit"), help=f"{TOOLS_HELP} (default search,visit)")
    p.add_argument("--unsafe-python", action="store_true", help=UNSAFE_PYTHON_HELP)
    p.add_argument("--submit-threshold", type=SUBMIT_F1, default=SUBMIT_THRESHOLD, help=SUBMIT_HELP)
    p.add_argument("--slots", type=at_least(1), default=16, help="episodes decoded at once")
    add_max_context(
        p,
        help=f"context tokens of an episode: prompt, turns and tool results (default {ROLLOUT_CONTEXT}, or the "
        "model's max_position_embeddings when smaller)",
    )
    p.add_argument("--max-turn-tokens", type=at_least(1), default=8192)
    p.add_argument("--max-tool-calls", type=at_least(1), default=100)
    p.add_argument(
        "--timeout", type=at_least(0.0, float, above=True), default=3600.0, help="wall-clock seconds per episode"
    )
    p.add_argument("--temperature", type=TEMPERATURE, default=0.6)
    p.add_argument("--top-p", type=TOP_P, default=0.95)
    p.add_argument("--top-k", type=at_least(0), default=0, help="0: off")
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--steps-per-call", type=at_least(1), default=8, help="decode steps per device call")
    add_mesh(p)
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=_rollout)


def add_bench_parser(bench_subparsers: Any) -> None:
    """Add `bench rollout`: the engine's idle fraction with tools that take 200 ms (goal <= 10%), or with `--model`
    a real model's greedy episodes on jaxseeker's Engine against HF `generate`."""
    p = bench_subparsers.add_parser(
        "rollout", help="rollout-loop utilisation with slow tools; with --model, a real model against HF generate"
    )
    p.add_argument(
        "--model",
        "--hf-path",
        dest="model",
        metavar="MODEL",
        help=f"{MODEL_FORMS}: its greedy ReAct episodes with the recipe's tools and limits on jaxseeker's Engine "
        "and on transformers' generate (default: the utilisation benchmark's scripted tiny model)",
    )
    p.add_argument("--slots", type=at_least(1), default=16)
    p.add_argument("--episodes", type=at_least(1), help="default 64; with --model 16 (one per question)")
    p.add_argument(
        "--group-size",
        type=at_least(1),
        default=1,
        help="rollouts a question, sharing its prompt, as an RL step's groups (default 1; not with --model)",
    )
    p.add_argument(
        "--tool-calls",
        type=at_least(1),
        help="tool calls per episode (default 4); with --model the most an episode may make (default: the recipe's)",
    )
    p.add_argument("--tool-latency", type=at_least(0.0, float), default=0.2, help="seconds per tool call")
    p.add_argument("--think-tokens", type=at_least(1.0, float), default=32.0, help="mean thought tokens per turn")
    p.add_argument("--steps-per-call", type=at_least(1), default=8)
    add_max_context(p, help="context tokens of an episode (default 2048; with --model the recipe's eval.max_context)")
    real = p.add_argument_group("with --model")
    add_config(
        real,
        required=False,
        default="demo",
        what="pipeline recipe whose world, tools, eval limits, prompt and QA stage the episodes take (default demo)",
        example="eval.max_tokens_per_turn=256",
        recipes=("demo", "demo_focus"),
    )
    add_world(real, extra=" (default: the recipe's)")
    real.add_argument(
        "--questions",
        metavar="FILE",
        help='JSONL of {"question": …, "answer": …} (default: synthesised from the world)',
    )
    real.add_argument("--repeats", type=at_least(1), default=1, help="timed runs of each side; the median counts")
    real.add_argument("--json", action="store_true", help="print one JSON line instead of the table")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=_bench)
