"""`jaxseeker eval …`: k rollouts per question of a saved model through the local tools, judged, resumable;
the summary table, the PNGs and, against an earlier eval of the same questions, what changed question by question.
`jaxseeker compare` sets evals of two models against each other, pooling several sampling seeds of each.

With `--config` (a pipeline config) the world, tools, rollout limits, prompt and sampling are the pipeline's, and
`--model sft` / `--model rl` / the default questions point into `runs/<name>/`; flags override any of them.
`--tools …,answer_submit` evaluates in WebSeer's multi-submit setting (`agent.submit`; judged as in `eval.runner`).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
from pathlib import Path
from typing import Any

from jaxseeker.agent.submit import (
    SUBMIT_F1,
    SUBMIT_HELP,
    TOOLS,
    TOOLS_HELP,
    episode_tools,
)
from jaxseeker.argtypes import at_least
from jaxseeker.cli_args import (
    MODEL_FORMS,
    add_config,
    add_k,
    add_llm,
    add_max_context,
    add_mesh,
    add_world,
    model_context,
    read_config,
)
from jaxseeker.parallel.mesh_config import mesh_text
from jaxseeker.rewards.srrl import SUBMIT_THRESHOLD
from jaxseeker.tools import UNSAFE_PYTHON_HELP, unsafe_python

STAGE_MODELS = ("sft", "extend", "rl")
# the engine's context holds at least 2 tokens and its int32 seed is in [0, 2**31); top-p is in (0, 1]
SEED = at_least(0, high=2**31 - 1)
TOP_P = at_least(0.0, float, above=True, high=1.0)


def _resolve(args: argparse.Namespace) -> dict[str, Any]:
    """Model, questions, world, tools, rollout limits and sampling: flags first, then the pipeline config, then
    the defaults."""
    from jaxseeker.agent import RolloutConfig
    from jaxseeker.pipeline import pipeline_config
    from jaxseeker.pipeline.context import rollout_config
    from jaxseeker.tools import ToolsConfig

    if args.config is None:
        missing = [
            flag
            for flag, value in (("--model", args.model), ("--questions", args.questions), ("--out", args.out))
            if value is None
        ]
        if args.model in STAGE_MODELS:
            missing.insert(0, f"--config (for --model {args.model})")
        if args.world is None and args.corpus is None:
            missing.append("--world or --corpus")
        if missing:
            raise SystemExit(f"jaxseeker eval: without --config, give {', '.join(missing)}")
        limits = RolloutConfig(
            max_tool_calls=args.max_tool_calls or 16,
            max_context_tokens=args.max_context or 8192,
            max_tokens_per_turn=args.max_turn_tokens or 1024,
            prompt=args.prompt or "full",
        )
        temperature = 0.6 if args.temperature is None else args.temperature
        top_p = 0.95 if args.top_p is None else args.top_p
        tools = ("search", "visit") if args.tools is None else args.tools
        return {
            "model": Path(args.model),
            "questions": Path(args.questions),
            "out": Path(args.out),
            "world": args.world,
            "tools": ToolsConfig(enabled=tools),
            "limits": limits,
            "k": _rollouts(args.k, 4, temperature),
            "slots": args.slots or 16,
            "temperature": temperature,
            "top_p": top_p,
        }
    cfg = pipeline_config(read_config(args, "pipeline"))
    root = Path("runs") / cfg.name
    model = args.model or "sft"
    stage = cfg.rl.stages()[-1] if model == "rl" else model  # the last rft round's policy
    model_dir = root / stage / "hf" if model in STAGE_MODELS else Path(model)
    e = cfg.eval
    overrides = {
        "max_tool_calls": args.max_tool_calls,
        "max_context_tokens": args.max_context,
        "max_tokens_per_turn": args.max_turn_tokens,
        "prompt": args.prompt,
    }
    limits = dataclasses.replace(rollout_config(cfg), **{k: v for k, v in overrides.items() if v is not None})
    temperature = e.temperature if args.temperature is None else args.temperature
    tools = cfg.tools if args.tools is None else dataclasses.replace(cfg.tools, enabled=args.tools)
    out = args.out or root / f"eval_{model if model in STAGE_MODELS else model_dir.name}_t{temperature:g}"
    return {
        "model": model_dir,
        "questions": Path(args.questions or root / "qa" / "test.jsonl"),
        "out": Path(out),
        "world": args.world or cfg.world.spec(),
        "tools": tools,
        "limits": limits,
        "k": _rollouts(args.k, e.k, temperature),
        "slots": args.slots or e.slots,
        "temperature": temperature,
        "top_p": e.top_p if args.top_p is None else args.top_p,
    }


def _rollouts(flag: int | None, default: int, temperature: float) -> int:
    """Rollouts per question: --k, else the default when sampling and 1 when greedy (the offline tools are
    deterministic, so greedy rollouts of one question are all the same); --k > 1 with temperature 0 is an error."""
    if flag is None:
        return default if temperature > 0 else 1
    if flag > 1 and temperature == 0:
        raise SystemExit(
            f"jaxseeker eval: --k {flag} with temperature 0 repeats one greedy rollout {flag} times; "
            "give --k 1 or --temperature > 0"
        )
    return flag


def _judge(args: argparse.Namespace):
    """The judge the flags name: exact match, token F1 ≥ 0.8, or an OpenAI-compatible grader model."""
    from jaxseeker.eval.runner import exact_match_judge, f1_judge, llm_judge_fn
    from jaxseeker.tools.llm_client import LLMClient, LLMConfig

    if args.judge == "em":
        return exact_match_judge
    if args.judge == "f1":
        return f1_judge(args.f1_threshold)
    if args.llm_model is None:
        raise SystemExit(
            "jaxseeker eval: --judge llm needs --llm-model (and --llm-url for a server other than OpenAI's)"
        )
    client = LLMClient(LLMConfig(base_url=args.llm_url, model=args.llm_model, api_key_env=args.llm_key_env))
    return llm_judge_fn(client.complete, style=args.judge_style)


def _eval(args: argparse.Namespace) -> int:
    from jaxseeker import model
    from jaxseeker.agent.engine import make_engine
    from jaxseeker.data.tokenizer import load_tokenizer
    from jaxseeker.eval.loaders import load_questions
    from jaxseeker.eval.report import change_line, compare_results, summary_table
    from jaxseeker.eval.runner import run_eval
    from jaxseeker.generation import SamplingConfig
    from jaxseeker.parallel import param_shardings
    from jaxseeker.world import Corpus, open_world, read_pages_jsonl

    s = _resolve(args)
    if args.dry_run:  # what a run would use: nothing is loaded, rolled out or written
        print(
            f"would evaluate {s['model']} on {s['questions']} in {args.corpus or s['world']}: k={s['k']}, temperature "
            f"{s['temperature']:g}, top-p {s['top_p']:g}, {s['limits'].max_context_tokens} context tokens, "
            f"{s['slots']} slots, judge {args.judge}; results in {s['out']}"
        )
        return 0
    if args.model not in (None, *STAGE_MODELS):  # a registered name or a GGUF file: its imported HF directory
        s["model"] = model.resolve_model(s["model"])
    if not (s["model"] / "config.json").exists():
        raise SystemExit(f"jaxseeker eval: {s['model']} holds no HF model (config.json)")
    baseline = _results_file(args.baseline, "eval") if args.baseline else None  # checked before any rollout
    questions = load_questions(s["questions"])  # a bad file ends the command in one line (`cli.main`)
    if args.limit:
        questions = questions[: args.limit]
    corpus = Corpus(read_pages_jsonl(args.corpus)) if args.corpus else open_world(s["world"]).corpus
    tokenizer = load_tokenizer(s["model"])
    on_mesh = None if args.mesh is None else functools.partial(param_shardings, mesh=args.mesh)
    cfg, params = model.load_hf(s["model"], shardings=on_mesh)  # with --mesh, each device reads its slice
    tokens, limit = s["limits"].max_context_tokens, cfg.max_position_embeddings
    what = "--max-context" if args.max_context is not None else "eval.max_context" if args.config else None
    tokens = model_context(None if what is None else tokens, limit, default=tokens, what=what or "")
    s["limits"] = dataclasses.replace(s["limits"], max_context_tokens=tokens)  # the default: at most the model's
    sampling = SamplingConfig(temperature=s["temperature"], top_p=s["top_p"], seed=args.seed)
    engine = make_engine(
        params,
        cfg,
        tokenizer,
        slots=s["slots"],
        max_len=s["limits"].max_context_tokens,
        sampling=sampling,
        mesh=args.mesh,
    )
    registry = episode_tools(
        unsafe_python(s["tools"], args.unsafe_python), corpus=corpus, submit_threshold=args.submit_threshold
    )
    summary = run_eval(
        engine,
        tokenizer,
        registry,
        questions,
        s["out"],
        k=s["k"],
        config=s["limits"],
        judge=_judge(args),
        progress=not args.no_progress,
    )
    print(summary_table(summary))
    print(
        f"{s['model']} on {len(questions)} questions of {s['questions']}, k={s['k']}, temperature "
        f"{s['temperature']:g}, on {mesh_text(args.mesh)}: results and plots in {s['out']}"
    )
    if args.baseline:
        change = compare_results(
            baseline, s["out"] / "results.jsonl", s["k"], question_ids=[q["id"] for q in questions]
        )
        (s["out"] / "change.json").write_text(json.dumps(change, indent=2) + "\n")
        print(f"against {args.baseline}: {change_line(change)}")
    return 0


def _results_file(path: str, command: str = "compare") -> Path:
    """An eval directory's `results.jsonl`, or the results file itself; a missing one exits naming it."""
    found = Path(path) / "results.jsonl" if Path(path).is_dir() else Path(path)
    if not found.is_file():
        raise SystemExit(f"jaxseeker {command}: {path} is neither a results JSONL nor an eval directory holding one")
    return found


def _compare(args: argparse.Namespace) -> int:
    from jaxseeker.eval.report import change_line, compare_results

    before, after = [_results_file(p) for p in args.before], [_results_file(p) for p in args.after]
    try:
        change = compare_results(before, after, args.k)
    except ValueError as err:
        raise SystemExit(f"jaxseeker compare: {err}") from err
    if args.out:
        Path(args.out).write_text(json.dumps(change, indent=2) + "\n")
    n_before, n_after = change["rollouts"]
    print(
        f"{change['questions']} questions, {n_before} rollouts a question before ({_evals(len(before))}), "
        f"{n_after} after ({_evals(len(after))}): {change_line(change)}"
    )
    for level, block in change["by_level"].items():
        print(f"  level {level} ({block['questions']} questions): {change_line(block)}")
    return 0


def _evals(n: int) -> str:
    return "1 eval" if n == 1 else f"{n} evals pooled"


def add_parser(subparsers: Any) -> None:
    """Add `eval` (pass@1, pass@k and the rest of `eval.metrics` for a saved model on a benchmark file) and
    `compare` (the paired pass@1 change between evals of two models, sampling seeds pooled)."""
    p = subparsers.add_parser("eval", help="k judged rollouts per question of a saved model; metrics, table, PNGs")
    add_config(
        p,
        required=False,
        what="a pipeline recipe (its world, tools, limits and sampling, runs/<name>/ paths)",
        example="eval.k=8",
        recipes=("demo", "demo_focus"),
    )
    p.add_argument(
        "--model", help=f"{MODEL_FORMS}; or with --config: sft | extend | rl (default sft; rl: the last rft round's)"
    )
    p.add_argument(
        "--questions",
        help="JSONL / JSON / CSV (BrowseComp, xbench, GAIA; eval.load_questions); "
        "with --config default runs/<name>/qa/test.jsonl",
    )
    p.add_argument("--out", help="results directory (resumes what is there); with --config a default under runs/")
    p.add_argument(
        "--baseline", help="an earlier eval directory (or its results.jsonl) of the same questions: report what changed"
    )
    world = p.add_mutually_exclusive_group()
    add_world(world, extra="; with --config default: the pipeline's")
    world.add_argument("--corpus", help="pages JSONL of {url, title, text, links} for the local tools")
    add_k(p, help="rollouts per question (default 4, --config: eval.k; 1 when greedy)")
    p.add_argument(
        "--temperature", type=at_least(0.0, float), help="0 is greedy (default 0.6; --config: eval.temperature)"
    )
    p.add_argument("--top-p", type=TOP_P)
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--slots", type=at_least(1), help="episodes decoded at once")
    add_mesh(p)
    add_max_context(p, help="context tokens of an episode (default 8192; --config: the pipeline's)")
    p.add_argument("--max-turn-tokens", type=at_least(1))
    p.add_argument("--max-tool-calls", type=at_least(1))
    p.add_argument("--prompt", choices=("full", "compact"))
    p.add_argument("--tools", type=TOOLS, help=f"{TOOLS_HELP} (default search,visit; --config: the pipeline's)")
    p.add_argument("--unsafe-python", action="store_true", help=UNSAFE_PYTHON_HELP)
    p.add_argument("--submit-threshold", type=SUBMIT_F1, default=SUBMIT_THRESHOLD, help=SUBMIT_HELP)
    p.add_argument("--limit", type=at_least(0), default=0, help="only the first N questions (0: all)")
    p.add_argument("--judge", choices=("em", "f1", "llm"), default="em")
    p.add_argument(
        "--f1-threshold",
        type=at_least(0.0, float, above=True, high=1.0),
        default=0.8,
        help="--judge f1: token F1 that counts as correct",
    )
    add_llm(p, "the judge (--judge llm)")
    p.add_argument("--judge-style", choices=("browsecomp", "gaia"), default="browsecomp")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument(
        "--dry-run", action="store_true", help="run nothing: print the model, questions and settings it would use"
    )
    p.set_defaults(func=_eval)

    c = subparsers.add_parser("compare", help="pass@1 change between evals of the same questions, seeds pooled")
    c.add_argument(
        "--before",
        nargs="+",
        required=True,
        metavar="EVAL",
        help="eval directories (or results JSONL) of the first model; several seeds are pooled",
    )
    c.add_argument("--after", nargs="+", required=True, metavar="EVAL", help="the same for the second model")
    c.add_argument("--k", type=at_least(1), help="rounds taken from each eval (default: the fewest any question has)")
    c.add_argument("--out", help="write the comparison as JSON here")
    c.set_defaults(func=_compare)
