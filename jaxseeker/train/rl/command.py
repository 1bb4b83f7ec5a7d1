"""`jaxseeker rl` (group-relative RL from a recipe) and `jaxseeker bench rl` (one RL step's time split)."""

from __future__ import annotations

import argparse

from jaxseeker.argtypes import at_least
from jaxseeker.cli_args import add_config, read_config

# `bench rl`: the toy policy gives each of its 13 chain tokens an axis of the model (`agent.bigram_params`).
MIN_HIDDEN = 14


def _rl(args: argparse.Namespace) -> int:
    from jaxseeker.parallel import maybe_initialize_distributed
    from jaxseeker.planning.fit import planned_recipe
    from jaxseeker.train.rl.loop import run_rl

    maybe_initialize_distributed()  # before the planner reads the devices: a multi-host job joins its runtime first
    recipe = planned_recipe(read_config(args, "rl"))  # the remat and micro-batch tokens that fit, refused if none
    summary = run_rl(recipe, resume=args.resume, progress=not args.no_progress)
    width = max(map(len, summary))
    print("\nRL summary")
    for key, value in summary.items():
        print(f"  {key:<{width}}  {value:.4f}" if isinstance(value, float) else f"  {key:<{width}}  {value}")
    return 0


def add_parser(subparsers) -> None:
    """Add `rl --config FILE [--set k=v …] [--resume]`."""
    p = subparsers.add_parser("rl", help="group-relative RL (GRPO / DAPO / DUPO / SRRL) from a recipe")
    add_config(p, what="RL recipe", example="rl.steps=50", recipes=("rl_tiny", "webexplorer_qwen3-8b_grpo"))
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint of the run")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_rl)


def _bench(args: argparse.Namespace) -> int:
    episodes = args.questions * args.group_size
    if episodes % args.mini_batches:
        raise SystemExit(
            f"jaxseeker bench rl: --questions × --group-size = {episodes} episodes do not split into "
            f"--mini-batches {args.mini_batches}"
        )
    from jaxseeker.planning.fit import planned_recipe
    from jaxseeker.train.rl.bench import run_bench

    settings = dict(
        plan=planned_recipe,  # the update planned as `jaxseeker rl` plans it
        hidden=args.hidden,
        layers=args.layers,
        batch_questions=args.questions,
        group_size=args.group_size,
        mini_batches=args.mini_batches,
        max_context=args.max_context,
        think_tokens=args.think_tokens,
        tool_p=args.tool_p,
        steps=args.steps,
    )
    single = run_bench(**settings)
    if args.pack:
        packed = run_bench(**settings, pack=True)
        print(
            f"\npacked update rows: update {packed['update_s']:.2f} s vs {single['update_s']:.2f} s one row per "
            f"episode ({single['update_s'] / packed['update_s']:.2f}×), {packed['update_rows']:.0f} vs "
            f"{single['update_rows']:.0f} rows, fill {packed['row_fill']:.0%} vs {single['row_fill']:.0%}"
        )
    if args.ynn:
        from jaxseeker.train.sft.bench import YNN_DOT

        ynn = run_bench(**settings, compiler_options=YNN_DOT)
        print(
            f"\nYNNPACK dots: update {ynn['update_s']:.2f} s vs {single['update_s']:.2f} s "
            f"({single['update_s'] / ynn['update_s']:.2f}×), old-logprob pass {ynn['old_logp_s']:.2f} s vs "
            f"{single['old_logp_s']:.2f} s"
        )
    return 0


def add_bench_parser(bench_subparsers) -> None:
    """Add `bench rl`: time split of one RL step (rollout, judge, old log-probs, update) and device utilisation."""
    p = bench_subparsers.add_parser("rl", help="one RL step's time split and device utilisation (toy policy)")
    p.add_argument(
        "--hidden-size",
        dest="hidden",
        type=at_least(MIN_HIDDEN),
        default=256,
        help="model width: heads of 64, KV heads the largest divisor of the heads up to half (576: 9 and 3, SmolLM2's)",
    )
    p.add_argument("--num-layers", dest="layers", type=at_least(1), default=4)
    p.add_argument("--questions", type=at_least(1), default=4, help="questions per step")
    p.add_argument("--group-size", type=at_least(1), default=4)
    p.add_argument(
        "--mini-batches",
        type=at_least(1),
        default=2,
        help="optimizer steps per RL step; must divide questions × group size",
    )
    p.add_argument(
        "--max-context", type=at_least(2), default=1024, help="context tokens per episode (update row length)"
    )
    p.add_argument("--think-tokens", type=at_least(1.0, float), default=24.0, help="mean thought tokens per turn")
    p.add_argument(
        "--tool-p",
        type=at_least(0.0, float, high=1.0, below=True),
        default=0.5,
        help="chance a turn calls search instead of answering",
    )
    p.add_argument("--steps", type=at_least(1), default=2, help="measured steps after the warm-up step")
    p.add_argument("--pack", action="store_true", help="then again with packed update rows (rl.pack), and compare")
    p.add_argument(
        "--ynn",
        action="store_true",
        help="then again with the update compiled with XLA:CPU's YNNPACK dots (rl.compiler_options), and compare",
    )
    p.set_defaults(func=_bench)
