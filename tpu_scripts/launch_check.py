"""The local check `tpu.py launch` runs before it touches a slice: the jaxseeker command line read by jaxseeker's own
parser, and for a training command (`sft`, `rl`, `pipeline`) its recipe read and validated and planned on the
slice's chips (`jaxseeker plan`: memory per chip by stage, and whether it fits).

This module imports jaxseeker (and, for the plan, jax): `tpu.py launch` runs under the project's environment,
e.g. `.venv/bin/python tpu_scripts/tpu.py launch …`. A mistake costs a second here instead of a slice's start-up.
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

PLANNED = ("sft", "rl", "pipeline")  # commands whose recipe `jaxseeker plan` reads


class CheckError(ValueError):
    """The launch would fail on the slice; the message (one line) says why."""


def parse_command(command: list[str]):
    """`command` (`sft --config …`) parsed by `jaxseeker`'s parser; its one-line usage error as a CheckError."""
    from jaxseeker.cli import build_parser

    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            return build_parser().parse_args(command)
    except SystemExit as e:
        lines = stderr.getvalue().strip().splitlines()
        raise CheckError(lines[-1] if lines else f"jaxseeker {' '.join(command)}: exits with {e.code}") from None


def check_command(command: list[str], *, repo: Path, chip: str, chips: int | None) -> dict | None:
    """Parse `command` and, for a training command, read its recipe (paths relative to `repo`, the checkout the
    workers run) and plan it on `chips` chips of kind `chip` (None: the recipe's mesh). Returns the plan (as
    `jaxseeker plan --json` prints it) or None for a command that has no recipe to plan."""
    if str(repo) not in sys.path:
        sys.path.insert(0, str(repo))
    try:
        from jaxseeker.planning.command import make_plan
        from jaxseeker.train.recipe import RecipeError, read_recipe
    except ImportError as e:
        raise CheckError(
            f"the local check needs jaxseeker's environment ({e}): run tpu.py with the project's Python, "
            "e.g. .venv/bin/python tpu_scripts/tpu.py launch …"
        ) from None
    with contextlib.chdir(repo):
        args = parse_command(command)
        if args.command not in PLANNED:
            return None
        try:
            plan = make_plan(read_recipe(args.config, args.set), chip=chip, chips=chips)
        except (RecipeError, OSError) as e:
            message = str(e)
            if not message.startswith((str(args.config), "--set")):
                message = f"{args.config}: {message}"
            raise CheckError(f"jaxseeker {args.command}: {message}") from None
    if plan["kind"] != args.command:
        raise CheckError(f"jaxseeker {args.command}: {args.config} is a recipe for `jaxseeker {plan['kind']}`")
    return plan


def plan_verdict(plan: dict) -> str | None:
    """None when every stage of `plan` fits, else one line naming the stages that do not and what overflows."""
    over = [f"{s['stage']} ({', '.join(s['over'])})" for s in plan["stages"] if not s["fits"]]
    if not over:
        return None
    suggestion = plan.get("suggestion")
    hint = ""
    if suggestion:
        mesh = ",".join(f"{k}={v}" for k, v in suggestion["mesh"].items() if v > 1)
        hint = f"; the planner suggests mesh {mesh} on {suggestion['chips']} chips"
    return (
        f"{plan['name']} does not fit {plan['chips']} × {plan['chip']['name']}: {'; '.join(over)}{hint} "
        "(--force launches anyway)"
    )


def format_plan(plan: dict) -> str:
    """The plan's table as `jaxseeker plan` prints it."""
    from jaxseeker.planning.command import format_plan as table

    return table(plan)
