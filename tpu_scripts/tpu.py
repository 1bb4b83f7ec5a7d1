#!/usr/bin/env python3
"""Create, set up, launch on, watch and delete a Cloud TPU VM or pod slice (v4, v5e, v5p, v6e) with gcloud.

    tpu.py create NAME --zone us-east5-a --accelerator v5p-64 [--spot]       # queued resource → ACTIVE
    tpu.py create NAME --zone us-east5-a --project P --accelerator v5p-8 --data-disk 500GB   # one host + a disk
    tpu.py setup  NAME --zone us-east5-a [--hf-model Qwen/Qwen3-8B=checkpoints/Qwen3-8B] [--gcs-copy SRC=DEST]
        [--mount-bucket gs://my-bucket/ckpt]                                 # gcsfuse at ~/jaxseeker/checkpoints
    tpu.py launch NAME --zone us-east5-a --accelerator v5p-64 --spot --bucket gs://my-bucket --run wex-sft \
        -- sft --config configs/x.yaml
    tpu.py logs   NAME --zone us-east5-a --run wex-sft
    tpu.py stop   NAME --zone us-east5-a --run wex-sft
    tpu.py delete NAME --zone us-east5-a

Every command runs on all workers of the slice at once (`--worker=all`), which is what a multi-host
JAX program needs: each worker runs the same `jaxseeker …` command, `jax.distributed` joins them, and
checkpoints go to `gs://BUCKET/RUN/checkpoints` (orbax writes there collectively). `--dry-run` prints
every command instead of running it.

`launch` first checks the jaxseeker command here (jaxseeker's parser, the recipe, `jaxseeker plan` on the slice's
chips: `launch_check.py`), then starts it and stays to watch it: when the slice is lost (spot preemption, a
suspended or deleted queued resource) it recreates and sets up the slice with the create and setup flags it was
given and relaunches the run with `--resume`, at most `--max-retries` times (`supervise.py` decides); a run whose
step metrics stop advancing for `--hang-minutes` is reported with the end of its log. The gcloud commands of the
slice are built in `slices.py`, the workers' scripts in `workers.py`. The other commands use the standard library
only; `launch` runs under the project's environment (it imports jaxseeker).
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import time
from pathlib import Path

import supervise
from launch_check import CheckError, check_command, format_plan, plan_verdict
from slices import (
    GENERATIONS,
    SliceStuck,
    UsageError,
    create_steps,
    data_disk_flag,
    delete_steps,
    shape_flags,
    slice_chips,
    state_command,
    wait_active,
)
from workers import (
    JAX_TPU,
    launch_steps,
    logs_steps,
    run_paths,
    setup_steps,
    ssh_steps,
    stop_steps,
    wait_command,
)

REPO = Path(__file__).resolve().parent.parent
HUNG = 3  # launch's exit status when it reports a run whose metrics stopped advancing (the job goes on)


def check_locally(args: argparse.Namespace) -> None:
    """The jaxseeker command checked and its recipe planned on the slice's chips, here (`launch_check.py`); print
    the plan. CheckError when it would fail on the slice or, without --force, does not fit."""
    if not args.command:
        raise UsageError("launch: give the jaxseeker command after --, e.g. -- sft --config configs/x.yaml")
    if args.accelerator or args.topology:
        shape_flags(args)  # a bad shape is an error before the plan reads it
    chip, chips = slice_chips(args)
    plan = check_command(args.command, repo=args.repo, chip=chip, chips=chips)
    if plan is None:
        print(f"# check: jaxseeker {args.command[0]} (no recipe to plan)", flush=True)
        return
    where = f"{chips} {chip} chips" if chips else f"the recipe's mesh of {chip} chips (no --accelerator)"
    print(f"# check: the plan on {where}", flush=True)
    print("\n".join(f"#   {line}".rstrip() for line in format_plan(plan).splitlines()), flush=True)
    verdict = plan_verdict(plan)
    if verdict and not args.force:
        raise CheckError(verdict)
    if verdict:
        print(f"# --force: {verdict}", flush=True)


def supervise_launch(args: argparse.Namespace) -> int:
    """Launch the job and watch it to its end (`supervise.next_action` decides): done, failed, or the slice lost
    and recreated, the run relaunched with --resume, at most --max-retries times. The exit status of the job, 1
    when it was given up on, HUNG when its metrics stopped advancing."""
    can_recreate = bool(args.accelerator or args.topology)
    retries = checks = 0
    execute(launch_steps(args), False, args.wait_timeout, args.poll)
    while True:
        print(f"# waiting for the job (logs: {run_paths(args)['logs']}/)", flush=True)
        started = time.monotonic()
        wait = subprocess.run(wait_command(args), capture_output=True, text=True, check=False)
        hang = supervise.hang_report(wait.stdout)
        if hang is not None:
            minutes, log = hang
            print(
                f"tpu.py launch: run {args.run}: no new step metrics for {minutes:g} minutes; the job is still running "
                f"(tpu.py logs / stop {args.name} --run {args.run}); the end of its log:\n{log}",
                file=sys.stderr,
            )
            return HUNG
        code = supervise.job_status(wait.returncode, wait.stdout)
        described = subprocess.run(state_command(args), capture_output=True, text=True, check=False)
        state = supervise.slice_state(described.returncode, described.stdout, described.stderr)
        if time.monotonic() - started > 10 * args.poll:  # the session held a while: a fresh drop, not a stuck one
            checks = 0
        action = supervise.next_action(
            code, state, retries=retries, max_retries=args.max_retries, checks=checks, can_recreate=can_recreate
        )
        print(f"# job exit {code if code is not None else 'unknown'}, slice {state}: {action}", flush=True)
        if action == supervise.DONE:
            return 0
        if action == supervise.FAIL:
            return code or 1
        if action == supervise.GIVE_UP:
            why = "" if can_recreate else " (give launch --accelerator or --topology to let it recreate the slice)"
            print(f"error: gave up on run {args.run} after {retries} recreations{why}", file=sys.stderr)
            return 1
        if action == supervise.WAIT:
            checks += 1
            time.sleep(args.poll)
            continue
        retries, checks = retries + 1, 0
        print(f"# recreating {args.name} ({retries} of {args.max_retries})", flush=True)
        for stage, cmd in delete_steps(args):
            print(f"# {stage}\n{shlex.join(cmd)}", flush=True)
            subprocess.run(cmd, check=False)  # gone already, or suspended: either way it must go
        steps = create_steps(args, disk_exists=True) + setup_steps(args) + launch_steps(args, resume=True)
        execute(steps, False, args.wait_timeout, args.poll)


def launch(args: argparse.Namespace) -> int:
    """`tpu.py launch`: the local check, then (detached, or under --dry-run, just) the start, else the start watched
    by `supervise_launch`."""
    launch_steps(args)  # its own flags first: a bad --bucket or --run fails before the check
    data_disk_flag(args)  # and a disk the slice could not be recreated with
    check_locally(args)
    if args.detach or args.dry_run:
        steps = launch_steps(args)
        if not args.detach:
            steps += [("wait for the job", wait_command(args)), ("slice state", state_command(args))]
        execute(steps, args.dry_run, args.wait_timeout, args.poll)
        return 0
    return supervise_launch(args)


def execute(steps: list[tuple[str, list[str]]], dry_run: bool, wait_timeout_s: float, poll_s: float) -> None:
    """Print each stage and its command; run it unless `dry_run`."""
    for stage, cmd in steps:
        print(f"# {stage}", flush=True)
        print(shlex.join(cmd), flush=True)
        if dry_run:
            continue
        if stage == "wait until ACTIVE":
            wait_active(cmd, wait_timeout_s, poll_s)
        else:
            subprocess.run(cmd, check=True)


def build_parser() -> argparse.ArgumentParser:
    """The CLI: one subcommand per stage of a slice's life."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("name", help="TPU (and queued resource) name")
    common.add_argument("--zone", required=True, help="e.g. us-east5-a (v5p), us-central2-b (v4)")
    common.add_argument("--project", help="default: gcloud's configured project")
    common.add_argument("--dry-run", action="store_true", help="print every command instead of running it")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="stage", required=True)

    shape = argparse.ArgumentParser(add_help=False)  # what a slice is: create's, and launch's to recreate it
    shape.add_argument("--accelerator", help="accelerator type: v4-32, v5litepod-16, v5p-64, v6e-16 …")
    shape.add_argument("--generation", choices=sorted(GENERATIONS), help="with --topology instead of --accelerator")
    shape.add_argument("--topology", help="chips per axis: AxBxC for v4 / v5p, AxB for v5e / v6e")
    shape.add_argument("--runtime-version", help="TPU VM image (default: the JAX image of the generation)")
    tier = shape.add_mutually_exclusive_group()
    tier.add_argument("--spot", action="store_true", help="spot capacity (preemptible, cheaper)")
    tier.add_argument("--reserved", action="store_true", help="use the project's reservation")
    shape.add_argument("--direct", action="store_true", help="`tpu-vm create` instead of a queued resource")
    shape.add_argument("--wait-timeout", type=float, default=6 * 3600, help="seconds to wait for ACTIVE")
    shape.add_argument("--poll", type=float, default=60.0, help="seconds between looks at a slice's state")
    shape.add_argument(
        "--data-disk",
        metavar="SIZE",
        help="a persistent disk of SIZE (e.g. 500GB) attached read-write and mounted at ~/jaxseeker/checkpoints "
        "(single-host slices; needs --project; kept by delete, reattached when launch recreates the slice)",
    )

    install = argparse.ArgumentParser(add_help=False)  # setup's, and launch's to set a recreated slice up
    install.add_argument("--repo", type=Path, default=REPO, help="the checkout to copy (configs included)")
    install.add_argument("--python", default="python3.11", help="interpreter for the venv (apt-installed if missing)")
    install.add_argument("--jax-spec", default=JAX_TPU, help="pip requirement for JAX (default: %(default)s)")
    install.add_argument(
        "--gcs-copy",
        action="append",
        default=[],
        metavar="gs://SRC=DEST",
        help="copy data from GCS into the project dir on every worker (repeatable)",
    )
    install.add_argument(
        "--hf-model",
        action="append",
        default=[],
        metavar="ORG/NAME=DEST",
        help="download an HF checkpoint on every worker, e.g. Qwen/Qwen3-8B=checkpoints/Qwen3-8B",
    )
    install.add_argument(
        "--mount-bucket",
        metavar="gs://BUCKET[/DIR]",
        help="gcsfuse-mount the bucket at ~/jaxseeker/checkpoints on every worker (--hf-model downloads there, once)",
    )
    install.add_argument("--env-file", help="KEY=VALUE file (API keys, HF_TOKEN) copied to every worker, never printed")

    p = sub.add_parser("create", parents=[common, shape], help="request a slice (queued resource) and wait for it")
    p.add_argument("--no-wait", action="store_true", help="return once the request is queued")
    p.set_defaults(steps=create_steps)

    p = sub.add_parser("setup", parents=[common, install], help="install jax[tpu] and this project on every worker")
    p.set_defaults(steps=setup_steps)

    p = sub.add_parser(
        "launch",
        parents=[common, shape, install],
        help="check a jaxseeker command here, run it on every worker, recreate the slice if it is lost",
        usage="%(prog)s NAME --zone ZONE --bucket gs://BUCKET --run RUN [--accelerator TYPE --spot …] [--dry-run] "
        "-- JAXSEEKER_ARGS…",
    )
    p.add_argument("--bucket", required=True, help="gs:// root for checkpoints, logs and the run's outputs")
    p.add_argument("--run", required=True, help="run name: runs/RUN on the workers, BUCKET/RUN on GCS")
    p.add_argument("--max-retries", type=int, default=3, help="times a lost slice is recreated and the run resumed")
    p.add_argument(
        "--hang-minutes",
        type=float,
        default=60.0,
        help="report the run (with the end of its log) when its metrics.jsonl has not grown for this long; 0: never",
    )
    p.add_argument("--detach", action="store_true", help="start the job and return (no watching, no retries)")
    p.add_argument("--force", action="store_true", help="launch even when the plan says it does not fit")
    p.set_defaults(steps=None, no_wait=False)  # the jaxseeker arguments follow `--`

    p = sub.add_parser("logs", parents=[common], help="stream a run's log")
    p.add_argument("--run", required=True)
    p.add_argument("--worker", default="0", help="worker index or 'all'")
    p.add_argument("--lines", type=int, default=100)
    p.add_argument("--no-follow", action="store_true")
    p.set_defaults(steps=logs_steps)

    p = sub.add_parser("stop", parents=[common], help="stop a launched run on every worker")
    p.add_argument("--run", required=True)
    p.set_defaults(steps=stop_steps)

    p = sub.add_parser(
        "ssh",
        parents=[common],
        help="run a shell command on the workers",
        usage="%(prog)s NAME --zone ZONE [--worker all|N] [--dry-run] -- COMMAND…",
    )
    p.add_argument("--worker", default="all")
    p.set_defaults(steps=ssh_steps)  # the shell command follows `--`

    p = sub.add_parser("delete", parents=[common], help="tear the slice down")
    p.add_argument("--direct", action="store_true", help="the slice was made with create --direct")
    p.set_defaults(steps=delete_steps)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse, build the stage's commands, print and (unless --dry-run) run them; `launch` checks and watches too."""
    argv = list(sys.argv[1:] if argv is None else argv)
    tail = argv.index("--") if "--" in argv else len(argv)
    parser = build_parser()
    args = parser.parse_args(argv[:tail])
    args.command = argv[tail + 1 :]  # what `launch` / `ssh` run on the workers
    if "--dry-run" in args.command:
        parser.error("--dry-run after `--` would go to the workers' command: put it before `--`")
    try:
        if args.stage == "launch":
            return launch(args)
        execute(args.steps(args), args.dry_run, getattr(args, "wait_timeout", 0.0), getattr(args, "poll", 0.0))
    except UsageError as e:
        parser.error(str(e))
    except SliceStuck as e:
        print(f"tpu.py {args.stage}: {e}", file=sys.stderr)
        return 1
    except CheckError as e:
        print(f"tpu.py launch: {e}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as e:
        print(f"error: `{shlex.join(e.cmd)}` exited with {e.returncode}", file=sys.stderr)
        return e.returncode or 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
