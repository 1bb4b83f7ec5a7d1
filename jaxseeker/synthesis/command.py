"""`jaxseeker synth trajectories …` (teacher trajectories through the real loop, filtered) and
`jaxseeker synth report FILE`.

Both are subcommands of the `synth` group: `add_synth_subcommands(synth_subparsers)` adds them. Modules that
load jax, transformers or matplotlib are imported by the functions that run them, so `--help` is quick.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from jaxseeker.agent.episode import Question, numbered_questions
from jaxseeker.agent.prompts import system_prompt
from jaxseeker.agent.rollout_types import RolloutConfig
from jaxseeker.argtypes import at_least
from jaxseeker.cli_args import MODEL_FORMS, add_llm, add_max_context, add_world
from jaxseeker.errors import InputError
from jaxseeker.synthesis import filters, shortcot
from jaxseeker.synthesis.expert import ExpertConfig
from jaxseeker.synthesis.journal import Journal
from jaxseeker.synthesis.plan import make_plan
from jaxseeker.synthesis.trajectories import read_records, synthesize, write_records
from jaxseeker.tools import UNSAFE_PYTHON_HELP, LLMClient, LLMConfig, ToolsConfig, build_registry, unsafe_python
from jaxseeker.world import World, open_world
from jaxseeker.world.store import check_output

TEACHERS = ("expert", "openai", "policy")
MODES = ("react", "reflection", "denoised")
FUNNELS = ("webdancer", "websailor", "none")
RATE = at_least(0.0, float, high=1.0)  # flags that are probabilities


def default_tokenizer(world: World, vocab_size: int = 2000) -> Any:
    """A byte-level BPE trained on the world's pages and the system prompt (when no --tokenizer is given)."""
    from jaxseeker.data.tokenizer import train_tokenizer

    texts = [p.text for p in world.pages[:3000]]
    schemas = build_registry(unsafe_python(ToolsConfig()), corpus=world.corpus).schemas()  # no code runs: no sandbox
    texts += [system_prompt(schemas)] * 5
    return train_tokenizer(texts, vocab_size)


def _llm(args: argparse.Namespace) -> LLMClient:
    """The client of --llm-url / --llm-model (`_check_args` has made sure a role that needs it has a model)."""
    return LLMClient(LLMConfig(base_url=args.llm_url, model=args.llm_model, api_key_env=args.llm_key_env))


def _teacher(args: argparse.Namespace, world: World) -> Any:
    from jaxseeker.synthesis import reflection
    from jaxseeker.synthesis.teachers import ExpertTeacher, OpenAITeacher, PolicyTeacher

    if args.teacher == "expert":
        config = ExpertConfig(detour_rate=args.detour_rate, slip_rate=args.slip_rate, reasoning=not args.narrated)
        multi = reflection.ReflectionConfig(mix_ratio=args.mix_ratio).multi_share
        return ExpertTeacher(
            world,
            config,
            submit=args.mode == "reflection",
            wrong_first_rate=multi if args.mode == "reflection" else 0.0,
        )
    if args.teacher == "openai":
        return OpenAITeacher(_llm(args), temperature=args.temperature)
    from jaxseeker import model
    from jaxseeker.generation import SamplingConfig

    cfg, params = model.load_hf(args.model)
    temperature = 0.6 if args.temperature is None else args.temperature  # 0: the policy's greedy trajectories
    return PolicyTeacher(params, cfg, SamplingConfig(temperature=temperature, top_p=0.95))


def _stages(args: argparse.Namespace, judge: filters.Judge) -> list[filters.Stage]:
    from jaxseeker.synthesis import reflection

    llm_check = filters.llm_quality_check(_llm(args).complete) if args.quality == "llm" else None
    if args.mode == "reflection":
        return reflection.reflection_funnel(
            judge=judge, n_max=args.n_max, max_actions=args.max_actions, llm_check=llm_check
        )
    if args.funnel == "websailor":
        return filters.websailor_funnel(judge=judge, max_tokens=args.max_tokens, min_tool_calls=args.min_tool_calls)
    if args.funnel == "none":
        return [filters.Stage("validity", filters.validity)]
    return filters.webdancer_funnel(judge=judge, max_actions=args.max_actions, llm_check=llm_check)


def _check_args(args: argparse.Namespace) -> None:
    """InputError naming the first combination of flags that cannot run, before the world, a tokenizer or a teacher
    is loaded (each number's own range is checked by the parser)."""
    if args.short_cot and args.slip_rate:
        raise InputError("--slip-rate cannot be combined with --short-cot (the rewrite would train the slips)")
    if args.teacher == "policy" and not args.model:
        raise InputError("--teacher policy needs --model (an HF checkpoint directory)")
    uses_llm = {
        "--teacher openai": args.teacher == "openai",
        "--judge llm": args.judge == "llm",
        "--quality llm": args.quality == "llm",
        "--summarizer llm": args.summarizer == "llm" and args.mode == "denoised",
    }
    needs = next((flag for flag, used in uses_llm.items() if used), None)
    if needs and not args.llm_model:
        raise InputError(f"{needs} needs --llm-model (and --llm-url for a server other than OpenAI's)")
    if args.quality == "llm" and args.mode != "reflection" and args.funnel != "webdancer":
        raise InputError(
            f"--quality llm reviews in the quality stage, which --funnel {args.funnel} has not "
            "(use --funnel webdancer or --mode reflection)"
        )


def _tools(args: argparse.Namespace) -> ToolsConfig:
    """The tools of --tools; InputError naming the flag for an unknown one."""
    try:
        return unsafe_python(ToolsConfig(enabled=tuple(t for t in args.tools.split(",") if t)), args.unsafe_python)
    except ValueError as err:
        raise InputError(f"--tools {args.tools}: {err}") from None


def _tokenizer(path: str, flag: str) -> Any:
    """The tokenizer saved in directory `path`; InputError naming `flag` when none loads from it."""
    from jaxseeker.data.tokenizer import load_tokenizer

    try:
        return load_tokenizer(path)
    except (InputError, FileNotFoundError) as err:
        raise InputError(f"{flag}: {err}") from None


def _inputs_key(args: argparse.Namespace) -> str:
    """A hash of what decides the episodes of `synth trajectories`: its arguments and the questions file's bytes
    (a stopped run's journal is replayed only for the same)."""
    flags = {k: v for k, v in sorted(vars(args).items()) if k not in ("func", "no_progress")}
    digest = hashlib.sha256(json.dumps(flags, sort_keys=True, default=str).encode())
    digest.update(Path(args.questions).read_bytes())
    return digest.hexdigest()[:16]


def _questions(args: argparse.Namespace) -> list[Question]:
    """The questions of --questions left by --levels and --limit; InputError naming FILE:LINE for a bad record
    (for the expert teacher: also one without the evidence of a `synth RECIPE` record)."""
    try:
        wanted = {int(x) for x in args.levels.split(",") if x}
    except ValueError:
        raise InputError(f"--levels {args.levels!r}: expected levels separated by commas, e.g. 1,2") from None
    numbered = numbered_questions(args.questions)
    if wanted:
        numbered = [(n, q) for n, q in numbered if q.meta.get("level") in wanted]
    numbered = numbered[: args.limit] if args.limit else numbered
    if not numbered:
        raise InputError(f"{args.questions}: no questions left after --levels / --limit")
    if args.teacher == "expert":  # it plans from the QA record's evidence
        for line_no, q in numbered:
            try:
                make_plan(q.meta)
            except ValueError as err:
                raise InputError(f"{args.questions}:{line_no}: {err}") from None
            except (KeyError, TypeError) as err:  # meta.query is not a query written by `synth RECIPE`
                raise InputError(f"{args.questions}:{line_no}: malformed meta.query ({err!r})") from None
    return [q for _, q in numbered]


def _trajectories(args: argparse.Namespace) -> int:
    from jaxseeker.synthesis import reflection, report
    from jaxseeker.synthesis.denoise import DenoisedTeacher, extractive_summary, llm_summarizer
    from jaxseeker.synthesis.teachers import ExpertTeacher

    start = time.perf_counter()
    _check_args(args)
    tools = _tools(args)
    out = check_output(args.out, "--out")
    if args.dry_run:  # the flags and the output are checked; nothing is read, rolled out or written
        print(f"would write the {args.teacher} teacher's trajectories of {args.questions} on {args.world} to {out}")
        return 0
    if args.teacher == "policy":  # a registered name or a GGUF file: its imported HF directory
        from jaxseeker import model

        args.model = str(model.resolve_model(args.model))
    questions = _questions(args)
    world = open_world(args.world)
    if args.tokenizer:
        tokenizer = _tokenizer(args.tokenizer, "--tokenizer")
    elif args.teacher == "policy" and args.model:
        tokenizer = _tokenizer(args.model, "--model")
    else:
        tokenizer = default_tokenizer(world)
        print("note: no --tokenizer: token counts use a 2000-token BPE trained on the world's pages")
    registry = build_registry(tools, corpus=world.corpus)
    judge = filters.llm_answer_judge(_llm(args).complete) if args.judge == "llm" else filters.exact_judge
    teacher = _teacher(args, world)
    config = RolloutConfig(max_tool_calls=args.max_tool_calls, max_context_tokens=args.max_context, date=args.date)
    source: Any = registry
    if args.mode == "reflection":
        if not isinstance(teacher, ExpertTeacher):
            verifier: reflection.Verifier = reflection.RolloutVerifier(teacher, tokenizer, registry, config)
        else:
            verifier = reflection.ExpertVerifier(
                teacher, registry, judge=judge, error_rate=args.verifier_error_rate, seed=args.seed
            )
        source = reflection.reflection_registry(registry, verifier, judge=judge, k=args.k_verify)
        config = reflection.reflection_rollout_config(config, args.n_max)
    elif args.mode == "denoised":
        summarize = llm_summarizer(_llm(args)) if args.summarizer == "llm" else extractive_summary
        teacher = DenoisedTeacher(teacher, summarize)
    transform = teacher.weigh if isinstance(teacher, ExpertTeacher) else None  # slipped turns out of the loss
    if args.short_cot:
        transform = shortcot.short_cot(shortcot.llm_rewriter(_llm(args)) if args.llm_model else None, tokenizer)
    stages = _stages(args, judge)
    journal_path = out.with_name(out.name + ".partial")
    journal = Journal(journal_path, _inputs_key(args))
    if journal.outcomes:
        print(f"resuming: {len(journal.outcomes)} episodes of a stopped run are in {journal_path}")
    try:
        records, stats = synthesize(
            teacher,
            tokenizer,
            source,
            questions,
            stages,
            tries=args.tries,
            config=config,
            seed=args.seed,
            mode=args.mode,
            transform=transform,
            progress=not args.no_progress,
            journal=journal,
        )
    except KeyboardInterrupt:
        print(
            f"jaxseeker synth: stopped; the {len(journal.outcomes)} episodes that finished are in {journal_path}: "
            "run the same command to go on from them",
            file=sys.stderr,
        )
        return 130
    finally:
        journal.close()
    if args.mode == "reflection" and not args.no_balance:
        before = len(records)
        records = reflection.balance_mix(records, args.mix_ratio, args.seed)
        print(f"mix {args.mix_ratio} : 1 kept {len(records)} of {before} reflective trajectories")
    out.parent.mkdir(parents=True, exist_ok=True)
    write_records(out, records)
    report.stats_path(out).write_text(json.dumps(stats.to_json(), indent=1), encoding="utf-8")
    journal_path.unlink()
    print(stats.summary([s.name for s in stages]))
    if args.mode == "reflection":
        single, multi = reflection.count_rounds(records)
        print(f"single-shot : multi-round = {single} : {multi} (target {args.mix_ratio} : 1)")
    print(f"wrote {len(records)} trajectories to {out} in {time.perf_counter() - start:.1f}s")
    return 0


def _report(args: argparse.Namespace) -> int:
    from jaxseeker.synthesis import report

    plot = None
    if not args.no_plot:  # a bad --plot fails now, not after the report
        plot = report.plot_path(check_output(args.plot or Path(args.file).with_suffix(".png"), "--plot"))
    records = read_records(args.file)
    st = report.trajectory_stats(records, report.load_funnel(args.file))
    print(report.format_report(st))
    if plot is not None:
        print(f"plot: {report.plot_report(st, plot)}")
    return 0


def add_synth_subcommands(synth_subparsers: Any) -> None:
    """Add `trajectories` and `report` to the subparsers of the `synth` command group."""
    p = synth_subparsers.add_parser("trajectories", help="teacher trajectories through the real tools, filtered")
    p.add_argument("--questions", required=True, help="QA JSONL (from `jaxseeker synth RECIPE`)")
    add_world(p, required=True)
    p.add_argument(
        "--out",
        required=True,
        help="trajectory JSONL to write (SFT chatml records + provenance); "
        "until it is written, each finished episode is kept in OUT.partial, and the same command run "
        "again after a stop goes on from them",
    )
    p.add_argument("--teacher", choices=TEACHERS, default="expert")
    p.add_argument(
        "--mode",
        choices=MODES,
        default="react",
        help="react; reflection (WebSeer, answer_submit + verifier); denoised (OpenSeeker)",
    )
    p.add_argument("--tries", type=at_least(1), default=5, help="rollouts per question at most (rejection sampling)")
    p.add_argument("--funnel", choices=FUNNELS, default="webdancer")
    p.add_argument("--max-actions", type=at_least(1), default=30, help="quality: tool calls per trajectory at most")
    p.add_argument("--max-tokens", type=at_least(1), default=32768, help="websailor RFT: tokens per trajectory at most")
    p.add_argument("--min-tool-calls", type=at_least(0), default=5, help="websailor RFT: more tool calls than this")
    p.add_argument("--judge", choices=("em", "llm"), default="em")
    p.add_argument(
        "--quality",
        choices=("rules", "llm"),
        default="rules",
        help="the quality stage: its rules only (no repeated call or observation, at most --max-actions), "
        "or an LLM's review too (non-redundancy, goal alignment, logical accuracy; WebDancer)",
    )
    p.add_argument(
        "--short-cot",
        action="store_true",
        help="rewrite thoughts (with --llm-model: by the LLM; else keep the teacher's short ones)",
    )
    p.add_argument("--levels", default="", help="only these question levels, e.g. 1,2")
    p.add_argument("--limit", type=at_least(0), default=0, help="only the first N questions (0: all)")
    p.add_argument("--tokenizer", default=None, help="tokenizer directory (default: the policy's, or a world BPE)")
    p.add_argument("--model", default=None, help=f"the policy teacher: {MODEL_FORMS}")
    add_llm(p, "the openai teacher, the llm judge, reviewer and summarizer, and the --short-cot rewriter")
    p.add_argument(
        "--temperature",
        type=at_least(0.0, float),
        default=None,
        help="teacher sampling (default: the openai server's; the policy's 0.6; 0 is greedy)",
    )
    p.add_argument("--summarizer", choices=("extractive", "llm"), default="extractive", help="denoised mode")
    p.add_argument(
        "--narrated",
        action="store_true",
        help="expert: the narrating expert (short captions of each call; a candidate may be taken unseen)",
    )
    p.add_argument("--detour-rate", type=RATE, default=0.25, help="expert: detours per chance")
    p.add_argument(
        "--slip-rate",
        type=RATE,
        default=0.0,
        help="expert: searches that miscopy the name (weight 0), then the right search, per chance",
    )
    p.add_argument("--n-max", type=at_least(1), default=3, help="reflection: submissions per episode")
    p.add_argument("--k-verify", type=at_least(1), default=3, help="reflection: verifier samples per proposal (Ψ)")
    p.add_argument("--mix-ratio", type=at_least(0.0, float), default=1.5, help="reflection: single-shot : multi-round")
    p.add_argument("--no-balance", action="store_true", help="reflection: keep every record whatever the mix")
    p.add_argument("--verifier-error-rate", type=RATE, default=0.0, help="reflection: offline verifier noise")
    p.add_argument("--tools", default="search,visit")
    p.add_argument("--unsafe-python", action="store_true", help=UNSAFE_PYTHON_HELP)
    p.add_argument("--max-tool-calls", type=at_least(1), default=100)
    add_max_context(p, default=32768)
    p.add_argument("--date", default=None, help="date in the system prompt (default: today)")
    p.add_argument("--seed", type=at_least(0), default=0)
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--dry-run", action="store_true", help="run nothing: check the flags, say what it would write")
    p.set_defaults(func=_trajectories)

    r = synth_subparsers.add_parser("report", help="statistics and a PNG of a trajectory file")
    r.add_argument("file", help="trajectory JSONL (its FILE.stats.json adds the funnel pass rates)")
    r.add_argument("--plot", default=None, help="PNG path (default: FILE with .png)")
    r.add_argument("--no-plot", action="store_true")
    r.set_defaults(func=_report)
