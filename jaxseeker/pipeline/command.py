"""`jaxseeker pipeline [--config demo] [--quick] [--until STAGE] [--dry-run]`."""

from __future__ import annotations

import argparse

from jaxseeker.cli_args import add_config, read_config


def _pipeline(args: argparse.Namespace) -> int:
    from jaxseeker.pipeline import pipeline_config, run_pipeline
    from jaxseeker.pipeline.report import markdown

    cfg = pipeline_config(read_config(args, "pipeline"), quick=args.quick)
    if args.until is not None and args.until not in cfg.stages():
        raise SystemExit(
            f"jaxseeker pipeline: --until {args.until!r} is not a stage of {args.config}; one of "
            f"{', '.join(cfg.stages())}"
        )
    if args.dry_run:
        plan = run_pipeline(cfg, args.out, until=args.until, dry_run=True)
        print(f"would run: {', '.join(plan['stages_to_run']) or 'nothing'}")
        print(f"reused: {', '.join(plan['reused_stages']) or 'nothing'}")
        return 0
    report = run_pipeline(cfg, args.out, progress=not args.no_progress, until=args.until)
    print("\n" + markdown(report))
    return 0


def add_parser(subparsers) -> None:
    """Add `pipeline`."""
    p = subparsers.add_parser("pipeline", help="synthesise, cold-start, reinforce, measure, export (offline)")
    add_config(
        p,
        required=False,
        default="demo",
        what="pipeline recipe",
        example="sft.train.steps=100",
        recipes=("demo", "demo_focus", "demo_copy"),
    )
    p.add_argument("--quick", action="store_true", help="a tiny world and model (≤ 2 minutes)")
    p.add_argument("--out", default=None, help="default: runs/<name>")
    p.add_argument(
        "--until",
        default=None,
        metavar="STAGE",
        help="stop after this stage (qa, expert, …, eval_sft, rl, eval_rl); a later run resumes from it",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="run nothing: list the stages a run would reuse and those it would run"
    )
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=_pipeline)
