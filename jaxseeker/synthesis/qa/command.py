"""`jaxseeker synth RECIPE --world … --n … --out … [--apart QA_JSONL…] [--writer openai …]`: synthesise QA, write
JSONL, print a summary, plot; `jaxseeker synth stats FILE [--world …]`: the figures of any questions file."""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Callable

from jaxseeker.argtypes import at_least
from jaxseeker.cli_args import add_llm, add_world
from jaxseeker.errors import InputError
from jaxseeker.synthesis.qa.apart import synthesize_apart
from jaxseeker.synthesis.qa.artefacts import DEFAULT_LIMITS, artefact_summary, check_limits, count_artefacts
from jaxseeker.synthesis.qa.driver import SynthResult
from jaxseeker.synthesis.qa.recipes import RECIPE_CONFIGS, RECIPES, get_recipe
from jaxseeker.synthesis.qa.record import read_jsonl, write_jsonl
from jaxseeker.synthesis.qa.solvers import PromptSolver, chat_completion, reference_solver
from jaxseeker.synthesis.qa.stats import compute_stats, summary
from jaxseeker.synthesis.qa.style import style_figures, style_summary
from jaxseeker.world import open_world
from jaxseeker.world.store import check_output


def _solver_options(args: argparse.Namespace, world) -> dict:
    if getattr(args, "solver", "rule") == "rule":
        return {}
    if not args.llm_model:
        raise InputError("--solver openai needs --llm-model (and --llm-url for a server other than OpenAI's)")
    llm = PromptSolver(chat_completion(args.llm_url, args.llm_model, api_key_env=args.llm_key_env), world)
    return {"difficulty": llm, "solvability": llm}


def _llm_explorer(args: argparse.Namespace, world) -> Callable[..., SynthResult]:
    """WebExplorer with the LLM behind --llm-url as explorer and evolver (jax and the rollout loop load here)."""
    from jaxseeker.synthesis.command import default_tokenizer
    from jaxseeker.synthesis.qa.webexplorer_llm import ExplorerConfig, synthesize
    from jaxseeker.tools import LLMClient, LLMConfig

    client = LLMClient(LLMConfig(base_url=args.llm_url, model=args.llm_model, api_key_env=args.llm_key_env))
    return functools.partial(
        synthesize, client=client, tokenizer=default_tokenizer(world), config=ExplorerConfig(rounds=args.evolve_rounds)
    )


def _llm_writer(args: argparse.Namespace, world):
    """The LLM writer behind --llm-url, with the prompt file of --writer-prompt (or the shipped one)."""
    from jaxseeker.synthesis.qa.writer import DEFAULT_PROMPT, LLMWriter, read_prompt
    from jaxseeker.tools import LLMClient, LLMConfig

    prompt = read_prompt(args.writer_prompt or DEFAULT_PROMPT)
    client = LLMClient(LLMConfig(base_url=args.llm_url, model=args.llm_model, api_key_env=args.llm_key_env))
    return LLMWriter(client, world, args.recipe, prompt=prompt)


def _recipe(args: argparse.Namespace, world) -> Callable[..., SynthResult]:
    """The recipe's `synthesize(world, n, *, seed, progress)` with the options its flags choose."""
    if getattr(args, "explorer", "rule") == "openai":
        return _llm_explorer(args, world)
    options = _solver_options(args, world)
    if args.writer == "openai":
        options["writer"] = _llm_writer(args, world)
    fields: dict = {"natural": False} if args.plain else {}
    if getattr(args, "rounds", None) is not None:
        fields.update(min_rounds=args.rounds[0], max_rounds=args.rounds[1])
    if getattr(args, "evolve_rounds", None) is not None:
        fields["rounds"] = args.evolve_rounds
    if getattr(args, "no_hunt", False):
        fields["huntable"] = False
    if fields:
        options["config"] = RECIPE_CONFIGS[args.recipe](**fields)
    return functools.partial(get_recipe(args.recipe), **options)


def _synthesize(args: argparse.Namespace, world) -> SynthResult:
    """`args.n` questions of the recipe; with `--apart`, drafts n, 2n, 4n, … until n share no evidence entity
    but a country with the questions of those files (fresh held-out questions for a model trained on them)."""
    synthesize = _recipe(args, world)
    if not args.apart:
        return synthesize(world, args.n, seed=args.seed, progress=True)
    others = [r.to_json() for path in args.apart for r in read_jsonl(path)]
    return synthesize_apart(
        lambda count: synthesize(world, count, seed=args.seed, progress=True),
        args.n,
        others,
        set(world.ids_of_type("country")),
    )


def _synth(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    rounds = getattr(args, "rounds", None)
    if rounds is not None and rounds[0] > rounds[1]:  # each is >= 0 (the parser); their order is checked here
        raise InputError(f"--rounds MIN MAX needs 0 <= MIN <= MAX, got {rounds[0]} {rounds[1]}")
    llm_explorer = getattr(args, "explorer", "rule") == "openai"
    if llm_explorer and not args.llm_model:
        raise InputError("--explorer openai needs --llm-model (and --llm-url for a server other than OpenAI's)")
    if args.writer == "openai":
        if llm_explorer:
            raise InputError("--writer openai rephrases structured queries; --explorer openai writes none")
        if not args.llm_model:
            raise InputError("--writer openai needs --llm-model (and --llm-url for a server other than OpenAI's)")
        from jaxseeker.synthesis.qa.writer import read_prompt

        if args.writer_prompt:
            read_prompt(args.writer_prompt)  # a bad prompt file fails now, not after the world is built
    out = check_output(args.out, "--out")
    if args.plots:
        check_output(args.plots, "--plots", directory=True)
    if args.dry_run:  # the flags and outputs are checked; the world is not opened and nothing is written
        print(f"would write {args.n} {args.recipe} questions on {args.world} to {out}")
        return 0
    world = open_world(args.world, cache_dir=args.cache_dir)
    if len(world) == 0:
        raise InputError(f"--world {args.world}: the world has no entities to ask about")
    result = _synthesize(args, world)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_jsonl(result.records, out)
    # the reference solver evaluates a question's structured query: the LLM explorer's questions have none
    solver = None if args.no_solver_stats or llm_explorer else reference_solver(world)
    stats = compute_stats(result.records, solver)
    print(summary(stats, result.attempts, dict(result.dropped)))
    print(style_summary(style_figures(result.records)))
    if args.plots:
        from jaxseeker.synthesis.qa.plots import plot_stats  # matplotlib: only when plotting

        for path in plot_stats(stats, args.plots, prefix=args.recipe):
            print(f"  plot: {path}")
    print(f"wrote {len(result.records)} questions to {out} in {time.perf_counter() - start:.1f}s")
    if len(result.records) < args.n:
        print(f"warning: only {len(result.records)} of {args.n} questions after {result.attempts} drafts")
    return 0


def _stats(args: argparse.Namespace) -> int:
    """`synth stats FILE`: counts per level, hops, shape, obfuscation, and the style figures; with --world, how many
    questions are unique under their structured query and the reference solver's pass rate."""
    records = list(read_jsonl(args.file))
    if not records:
        raise InputError(f"{args.file}: no questions")
    world = solver = None
    if args.world is not None:
        world = open_world(args.world, cache_dir=args.cache_dir)
        solver = None if args.no_solver else reference_solver(world)
    print(summary(compute_stats(records, solver)))
    print(style_summary(style_figures(records, world, solver)))
    return _artefacts(records, world, args.limits)


def read_limits(path: str | None) -> dict[str, float]:
    """The artefact limits of a YAML file (`key: share`, see `artefacts.LIMIT_KEYS`), `DEFAULT_LIMITS` for `default`,
    none without a path."""
    if path is None:
        return {}
    if path == "default":
        return dict(DEFAULT_LIMITS)
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            found = yaml.safe_load(f) or {}
    except OSError as err:
        raise InputError(f"--limits {path}: {err.strerror}") from None
    if not isinstance(found, dict) or not all(isinstance(v, (int, float)) for v in found.values()):
        raise InputError(f"--limits {path}: expected a mapping of artefact to a share in [0, 1]")
    return {str(k): float(v) for k, v in found.items()}


def _artefacts(records, world, limits_path: str | None) -> int:
    """Print the artefact counts; 1 when a share is past its limit (each one named), else 0."""
    limits = read_limits(limits_path)
    counts = count_artefacts(records, world)
    print(artefact_summary(counts))
    try:
        failed = check_limits(counts, limits)
    except ValueError as err:
        raise InputError(f"--limits {limits_path}: {err}") from None
    for line in failed:
        print(f"  past its limit: {line}")
    return 1 if failed else 0


def add_parser(subparsers) -> None:
    """Add `synth RECIPE …` (one subcommand per QA recipe) and the trajectory subcommands to `jaxseeker`."""
    from jaxseeker.synthesis.command import add_synth_subcommands

    synth = subparsers.add_parser("synth", help="synthesise QA (SailorFog, E2HQA, …) or trajectories from a world")
    sub = synth.add_subparsers(dest="synth_command", required=True)
    for recipe in sorted(RECIPES):
        p = sub.add_parser(recipe, help=f"{recipe} questions")
        add_world(p, default="synthetic:2000:0")
        p.add_argument("--n", type=at_least(1), default=100, help="questions to keep")
        p.add_argument("--out", required=True, help="output JSONL")
        p.add_argument("--seed", type=at_least(0), default=0)
        p.add_argument("--plots", default=None, help="directory for PNG plots")
        p.add_argument("--cache-dir", default=None, help="world cache directory")
        p.add_argument("--dry-run", action="store_true", help="run nothing: check the flags, say what it would write")
        if recipe == "openseeker":  # the one recipe that asks a solver (the others would ignore these flags)
            p.add_argument(
                "--solver",
                choices=("rule", "openai"),
                default="rule",
                help="the difficulty / solvability solver: rules, or an LLM behind --llm-url",
            )
        if recipe == "webexplorer":
            p.add_argument(
                "--explorer",
                choices=("rule", "openai"),
                default="rule",
                help="rules (a walk over the world's graph), or an LLM behind --llm-url that explores "
                "with the search / visit tools, writes the question and evolves it",
            )
            p.add_argument(
                "--evolve-rounds",
                type=at_least(1),
                default=5,
                help="long-to-short evolution rounds at most (either explorer)",
            )
        p.add_argument(
            "--writer",
            choices=("rule", "openai"),
            default="rule",
            help="who phrases the questions: the rule-based realiser, or an LLM behind --llm-url that "
            "rewrites each one from its structured query, checked before it is kept",
        )
        p.add_argument(
            "--writer-prompt",
            default=None,
            help="the writer's prompt file (default: the shipped writer_prompt.md; see docs)",
        )
        purpose = {"openseeker": "the solver and the writer", "webexplorer": "the explorer or the writer"}
        add_llm(p, purpose.get(recipe, "the writer"))
        p.add_argument(
            "--no-solver", dest="no_solver_stats", action="store_true", help="skip the reference solver pass rate"
        )
        p.add_argument(
            "--plain",
            action="store_true",
            help="the recipe's earlier questions (its config's natural: false): names and first letters, every "
            "clue the draft gave, commands among the frames",
        )
        p.add_argument(
            "--apart",
            nargs="+",
            metavar="QA_JSONL",
            help="keep only questions sharing no evidence entity but a country with these files' "
            "(e.g. a pipeline's qa/train.jsonl, rl.jsonl, test.jsonl: a fresh held-out test set)",
        )
        if recipe == "sailorfog":
            p.add_argument(
                "--no-hunt",
                action="store_true",
                help="a question may name nothing that no search of its clues can start (the config's huntable: false)",
            )
        if recipe == "e2hqa":
            p.add_argument(
                "--rounds",
                nargs=2,
                type=at_least(0),
                metavar=("MIN", "MAX"),
                help="rounds of replacement drawn in [MIN, MAX] (default 1 3; 0 keeps one-hop questions)",
            )
        p.set_defaults(func=_synth, recipe=recipe)
    s = sub.add_parser("stats", help="statistics and style figures of a questions file (any QA JSONL)")
    s.add_argument("file", help="QA JSONL: question, answer, tag, level, meta (as `synth RECIPE` writes)")
    s.add_argument(
        "--world",
        default=None,
        help="the world the questions were made from: adds uniqueness under meta.query and the "
        "reference solver's pass rate",
    )
    s.add_argument("--no-solver", action="store_true", help="with --world: skip the reference solver")
    s.add_argument(
        "--limits",
        default=None,
        help="YAML of the largest share of questions per artefact (first_letter: 0.1, …) and min_described, "
        "min_entity_answers, or `default` for the built-in ones; the command fails past one",
    )
    s.add_argument("--cache-dir", default=None, help="world cache directory")
    s.set_defaults(func=_stats)
    add_synth_subcommands(sub)
