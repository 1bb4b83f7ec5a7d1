#!/usr/bin/env python3
"""Create, set up, launch on, watch and delete a Cloud TPU VM or pod slice (v4, v5e, v5p, v6e) with gcloud.

    tpu.py create NAME --zone us-east5-a --accelerator v5p-64 [--spot]       # queued resource → ACTIVE
    tpu.py setup  NAME --zone us-east5-a [--hf-model Qwen/Qwen3-8B=checkpoints/Qwen3-8B] [--gcs-copy SRC=DEST]
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
given and relaunches the run with `--resume`, at most `--max-retries` times (`supervise.py` decides). The other
commands use the standard library only; `launch` runs under the project's environment (it imports jaxseeker).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import supervise
from launch_check import CheckError, check_command, format_plan, plan_verdict

REPO = Path(__file__).resolve().parent.parent
JAX_TPU = "jax[tpu]==0.10.2"  # the jax of the project's environment: the slices run what was tested here
LOG_SYNC_S = 60  # seconds between copies of each worker's log to gs://BUCKET/RUN/logs/
REMOTE_DIR = "jaxseeker"  # the project on each worker, relative to the home directory
TARBALL = "jaxseeker-src.tar.gz"
EXCLUDE = (".venv", ".git", "runs", "__pycache__", "*.egg-info", ".pytest_cache", "checkpoints")
METADATA_GET = (
    "curl -sf -H Metadata-Flavor:Google http://metadata.google.internal/computeMetadata/v1/instance/attributes"
)


@dataclasses.dataclass(frozen=True)
class Generation:
    """How gcloud names one TPU generation."""

    accelerator_prefix: str  # accelerator types are PREFIX-N
    type_flag: str  # --type with --topology
    runtime_version: str  # the TPU VM image for JAX
    topology_dims: int  # 3: a torus of AxBxC chips; 2: AxB


GENERATIONS = {
    "v4": Generation("v4", "v4", "tpu-ubuntu2204-base", 3),
    "v5e": Generation("v5litepod", "v5litepod", "v2-alpha-tpuv5-lite", 2),
    "v5p": Generation("v5p", "v5p", "v2-alpha-tpuv5", 3),
    "v6e": Generation("v6e", "v6e", "v2-alpha-tpuv6e", 2),
}
RUN_SECTIONS = {"sft": "train", "rl": "rl"}  # jaxseeker commands whose recipe section takes out_dir / checkpoint_dir


class UsageError(ValueError):
    """A bad argument; the message names it."""


def generation_of(accelerator: str) -> str:
    """The generation key of an accelerator type such as v5p-64 or v5litepod-16."""
    for key, gen in GENERATIONS.items():
        if re.fullmatch(rf"{gen.accelerator_prefix}-\d+", accelerator):
            return key
    known = ", ".join(f"{g.accelerator_prefix}-N" for g in GENERATIONS.values())
    raise UsageError(f"--accelerator {accelerator!r}: expected one of {known} (e.g. v5p-64)")


def shape_flags(args: argparse.Namespace) -> list[str]:
    """--accelerator-type, or --type and --topology (a chip torus such as 2x4x4) for the slice's shape."""
    if bool(args.accelerator) == bool(args.topology):
        raise UsageError("give either --accelerator (e.g. v5p-64) or --generation and --topology (e.g. v5p 2x4x4)")
    if args.accelerator:
        generation_of(args.accelerator)
        return [f"--accelerator-type={args.accelerator}"]
    gen = GENERATIONS[args.generation]
    if not re.fullmatch(rf"\d+(x\d+){{{gen.topology_dims - 1}}}", args.topology):
        raise UsageError(
            f"--topology {args.topology!r}: {args.generation} slices are {gen.topology_dims}-D, "
            f"e.g. {'x'.join(['2'] * gen.topology_dims)}"
        )
    return [f"--type={gen.type_flag}", f"--topology={args.topology}"]


def runtime_version(args: argparse.Namespace) -> str:
    """The TPU VM image: --runtime-version, or the JAX image of the slice's generation."""
    if args.runtime_version:
        return args.runtime_version
    key = generation_of(args.accelerator) if args.accelerator else args.generation
    return GENERATIONS[key].runtime_version


def where(args: argparse.Namespace) -> list[str]:
    """--zone and (when given) --project, on every gcloud command."""
    return [f"--zone={args.zone}"] + ([f"--project={args.project}"] if args.project else [])


def tpu_vm(args: argparse.Namespace, verb: str, *rest: str) -> list[str]:
    """`gcloud compute tpus tpu-vm VERB NAME … --zone …` (scp names the TPU in its `NAME:PATH` argument)."""
    name = [] if verb == "scp" else [args.name]
    return ["gcloud", "compute", "tpus", "tpu-vm", verb, *name, *rest, *where(args)]


def on_workers(args: argparse.Namespace, script: str, worker: str = "all") -> list[str]:
    """Run the bash `script` on `worker` ("all" or an index) of the slice over ssh."""
    return tpu_vm(args, "ssh", f"--worker={worker}", f"--command={script}")


def create_steps(args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """A queued resource (or, with --direct, a plain TPU VM create) of the requested shape."""
    shape, version = shape_flags(args), runtime_version(args)
    tier = ["--spot"] if args.spot else ["--reserved"] if args.reserved else []
    if args.direct:
        return [("create", tpu_vm(args, "create", *shape, f"--version={version}", *tier))]
    create = [
        "gcloud",
        "compute",
        "tpus",
        "queued-resources",
        "create",
        args.name,
        f"--node-id={args.name}",
        *shape,
        f"--runtime-version={version}",
        *tier,
        *where(args),
    ]
    steps = [("create", create)]
    if not args.no_wait:
        steps.append(("wait until ACTIVE", queued_state(args)))
    return steps


def queued_state(args: argparse.Namespace) -> list[str]:
    """The command that prints the queued resource's state (WAITING_FOR_RESOURCES, …, ACTIVE)."""
    return [
        "gcloud",
        "compute",
        "tpus",
        "queued-resources",
        "describe",
        args.name,
        "--format=value(state.state)",
        *where(args),
    ]


def setup_steps(args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """Pack this checkout, copy it to every worker, install Python, jax[tpu] and the project, fetch data."""
    local_tar = f"/tmp/{args.name}-{TARBALL}"
    excludes = [f"--exclude={pattern}" for pattern in EXCLUDE]
    install = " && ".join(
        [
            "set -e",
            f"mkdir -p ~/{REMOTE_DIR}",
            f"tar -xzf ~/{TARBALL} -C ~/{REMOTE_DIR}",
            f"cd ~/{REMOTE_DIR}",
            f"(command -v {args.python} || (sudo apt-get update -q && sudo apt-get install -y -q {args.python} "
            f"{args.python}-venv))",
            f"{args.python} -m venv .venv",
            ".venv/bin/pip install -q --upgrade pip",
            f'.venv/bin/pip install -q -e . "{args.jax_spec}" gcsfs',  # gcsfs: orbax / epath on gs://
        ]
    )
    steps = [
        ("pack", ["tar", "-czf", local_tar, *excludes, "-C", str(args.repo), "."]),
        ("copy", tpu_vm(args, "scp", local_tar, f"{args.name}:{TARBALL}", "--worker=all")),
        ("install", on_workers(args, install)),
    ]
    if args.env_file:
        steps.append(
            ("copy env file", tpu_vm(args, "scp", args.env_file, f"{args.name}:{REMOTE_DIR}/.env", "--worker=all"))
        )
    for item in args.gcs_copy:
        src, dest = split_pair(item, "--gcs-copy", "gs://BUCKET/PATH=DEST")
        if not src.startswith("gs://"):
            raise UsageError(f"--gcs-copy {item!r}: the source must be a gs:// path")
        steps.append(
            (
                f"fetch {src}",
                on_workers(
                    args,
                    f"cd ~/{REMOTE_DIR} && mkdir -p {shlex.quote(dest)} && "
                    f"gcloud storage cp -r {shlex.quote(src)} {shlex.quote(dest)}",
                ),
            )
        )
    for item in args.hf_model:
        repo_id, dest = split_pair(item, "--hf-model", "ORG/NAME=DEST")
        download = shlex.join([".venv/bin/hf", "download", repo_id, "--local-dir", dest])
        steps.append((f"download {repo_id}", on_workers(args, f"cd ~/{REMOTE_DIR} && {with_env()}{download}")))
    # process index, local devices, global devices, device kind: the global count proves the workers joined
    check = "import jax; print(jax.process_index(), jax.local_device_count(), jax.device_count(), jax.devices()[0])"
    steps.append(
        ("check devices", on_workers(args, f'cd ~/{REMOTE_DIR} && {distributed_env()}.venv/bin/python -c "{check}"'))
    )
    return steps


def split_pair(item: str, flag: str, form: str) -> tuple[str, str]:
    """`A=B` → (A, B); anything else is an error that shows the expected form."""
    left, sep, right = item.partition("=")
    if not (sep and left and right):
        raise UsageError(f"{flag} {item!r}: expected {form}")
    return left, right


def with_env() -> str:
    """Shell prefix that exports the variables of the copied env file (keys stay off the command line)."""
    return "if [ -f .env ]; then set -a; . ./.env; set +a; fi; "


def distributed_env() -> str:
    """Shell prefix that exports JAX_COORDINATOR_ADDRESS (worker 0, port 8476), JAX_NUM_PROCESSES and JAX_PROCESS_ID
    from the TPU VM metadata, so `jaxseeker.parallel.maybe_initialize_distributed()` joins all workers."""
    hosts = f'{METADATA_GET}/worker-network-endpoints | tr , "\\n" | rev | cut -d: -f1 | rev'  # the IP of name:id:IP
    worker = f"{METADATA_GET}/agent-worker-number"
    return (
        f'hosts=$({hosts}); export JAX_COORDINATOR_ADDRESS=$(echo "$hosts" | head -n 1):8476 '
        f'JAX_NUM_PROCESSES=$(echo "$hosts" | wc -l) JAX_PROCESS_ID=$({worker}); '
    )


def run_paths(args: argparse.Namespace) -> dict[str, str]:
    """Where a run writes: the local out dir on each worker, the log, pid and exit status files, and the gs://
    checkpoint, copy and log dirs."""
    if not re.fullmatch(r"gs://[a-z0-9][-_.a-z0-9]*(/[^\s]*)?", args.bucket or ""):
        raise UsageError(f"--bucket {args.bucket!r}: expected a gs:// path, e.g. gs://my-bucket/jaxseeker")
    if not re.fullmatch(r"[A-Za-z0-9][-_.A-Za-z0-9]*", args.run):
        raise UsageError(f"--run {args.run!r}: use letters, digits, '-', '_' and '.'")
    root = f"{args.bucket.rstrip('/')}/{args.run}"
    return {
        "out_dir": f"runs/{args.run}",
        "log": f"~/{args.run}.log",
        "pid": f"~/{args.run}.pid",
        "status": f"~/{args.run}.status",
        "checkpoints": f"{root}/checkpoints",
        "copy": f"{root}/out",
        "logs": f"{root}/logs",
    }


def run_command(args: argparse.Namespace, paths: dict[str, str], resume: bool) -> list[str]:
    """The jaxseeker command line the workers run: for `sft` and `rl` with the run's out and checkpoint dirs, and
    with `--resume` when `resume` (a relaunch after the slice was lost)."""
    command = list(args.command)
    section = RUN_SECTIONS.get(command[0])
    if section:
        if resume and "--resume" not in command:
            command.append("--resume")
        command += [
            "--set",
            f"{section}.out_dir={paths['out_dir']}",
            "--set",
            f"{section}.checkpoint_dir={paths['checkpoints']}",
        ]
    return command


def launch_steps(args: argparse.Namespace, resume: bool = False) -> list[tuple[str, list[str]]]:
    """Start the same `jaxseeker …` command on every worker, detached, logging to ~/RUN.log, which each worker
    copies to gs://BUCKET/RUN/logs/START/worker-N.log every LOG_SYNC_S seconds and when the command ends (START:
    this launch's UTC time, so a relaunch keeps the earlier logs). At the end worker 0 copies the run's out dir
    (metrics, plots, summary) to gs://BUCKET/RUN/out, then each worker writes the exit status to ~/RUN.status."""
    if not args.command:
        raise UsageError("launch: give the jaxseeker command after --, e.g. -- sft --config configs/x.yaml")
    paths = run_paths(args)
    log_copy = f"{paths['logs']}/{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}/worker-$JAX_PROCESS_ID.log"
    sync = f"gcloud storage cp {paths['log']} {log_copy} > /dev/null 2>&1"
    job = "".join(
        [
            f"cd ~/{REMOTE_DIR} && {with_env()}{distributed_env()}",
            f"(while sleep {LOG_SYNC_S}; do {sync}; done) & syncer=$!; ",
            shlex.join([".venv/bin/jaxseeker", *run_command(args, paths, resume)]),
            f"; status=$?; kill $syncer 2> /dev/null; {sync}; ",
            f'if [ "$JAX_PROCESS_ID" = 0 ]; then gcloud storage rsync -r {paths["out_dir"]} {paths["copy"]}; fi; ',
            f"echo $status > {paths['status']}; exit $status",
        ]
    )
    start = (
        f"rm -f {paths['status']}; "
        f"setsid nohup bash -c {shlex.quote(job)} > {paths['log']} 2>&1 < /dev/null & echo $! > {paths['pid']}"
    )
    return [("launch", on_workers(args, start))]


def wait_command(args: argparse.Namespace) -> list[str]:
    """ssh to every worker until the run's job ends there; each prints `jaxseeker-exit=N` (`killed` when its
    processes are gone without a status)."""
    paths = run_paths(args)
    status = paths["status"]
    script = (
        f"while [ ! -f {status} ]; do kill -0 $(cat {paths['pid']} 2> /dev/null) 2> /dev/null || break; sleep 10; "
        f"done; if [ -f {status} ]; then echo {supervise.EXIT_MARKER}$(cat {status}); "
        f"else echo {supervise.EXIT_MARKER}killed; fi"
    )
    return on_workers(args, script)


def state_command(args: argparse.Namespace) -> list[str]:
    """The command that prints the slice's state: the queued resource's, or with --direct the TPU VM's."""
    if args.direct:
        return tpu_vm(args, "describe", "--format=value(state)")
    return queued_state(args)


def slice_chips(args: argparse.Namespace) -> tuple[str, int | None]:
    """The chip kind and count of the slice's shape, for the plan (None: the recipe's mesh). v4 and v5p
    accelerator types count TensorCores, two a chip; v5e and v6e count chips."""
    if args.accelerator:
        key = generation_of(args.accelerator)
        cores = int(args.accelerator.rsplit("-", 1)[1])
        return key, cores // 2 if key in ("v4", "v5p") else cores
    if args.topology:
        return args.generation, math.prod(int(n) for n in args.topology.split("x"))
    return "v5p", None


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
    and recreated, the run relaunched with --resume, at most --max-retries times. The exit status of the job, or 1
    when it was given up on."""
    can_recreate = bool(args.accelerator or args.topology)
    retries = checks = 0
    execute(launch_steps(args), False, args.wait_timeout)
    while True:
        print(f"# waiting for the job (logs: {run_paths(args)['logs']}/)", flush=True)
        started = time.monotonic()
        wait = subprocess.run(wait_command(args), capture_output=True, text=True, check=False)
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
        execute(create_steps(args) + setup_steps(args) + launch_steps(args, resume=True), False, args.wait_timeout)


def launch(args: argparse.Namespace) -> int:
    """`tpu.py launch`: the local check, then (detached, or under --dry-run, just) the start, else the start watched
    by `supervise_launch`."""
    launch_steps(args)  # its own flags first: a bad --bucket or --run fails before the check
    check_locally(args)
    if args.detach or args.dry_run:
        steps = launch_steps(args)
        if not args.detach:
            steps += [("wait for the job", wait_command(args)), ("slice state", state_command(args))]
        execute(steps, args.dry_run, args.wait_timeout)
        return 0
    return supervise_launch(args)


def logs_steps(args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """Stream (or, with --no-follow, print the end of) the run's log on one worker or all."""
    log = f"~/{args.run}.log"
    tail = f"tail -n {args.lines} {'-F ' if not args.no_follow else ''}{log}"
    return [("logs", on_workers(args, tail, args.worker))]


def stop_steps(args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """Stop the run's process group on every worker (the pid file written by launch)."""
    pid = f"~/{args.run}.pid"
    return [("stop", on_workers(args, f"if [ -f {pid} ]; then kill -- -$(cat {pid}) || true; rm -f {pid}; fi"))]


def ssh_steps(args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """Run any shell command in the project directory of the chosen workers."""
    command = list(args.command)
    if not command:
        raise UsageError("ssh: give the command after --, e.g. -- nvidia-smi")
    return [("ssh", on_workers(args, f"cd ~/{REMOTE_DIR} && " + " ".join(command), args.worker))]


def delete_steps(args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """Delete the queued resource and its VMs (or, with --direct, the TPU VM)."""
    if args.direct:
        return [("delete", tpu_vm(args, "delete", "--quiet"))]
    return [
        (
            "delete",
            ["gcloud", "compute", "tpus", "queued-resources", "delete", args.name, "--force", "--quiet", *where(args)],
        )
    ]


def wait_active(cmd: list[str], timeout_s: float, poll_s: float = 30.0) -> None:
    """Poll the queued resource until ACTIVE; FAILED / SUSPENDED or the timeout is an error."""
    deadline = time.monotonic() + timeout_s
    while True:
        state = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()
        print(f"# state: {state}", flush=True)
        if state == "ACTIVE":
            return
        if state in ("FAILED", "SUSPENDED") or time.monotonic() > deadline:
            raise RuntimeError(f"queued resource is {state or 'unknown'}; see: {shlex.join(cmd[:-1])}")
        time.sleep(poll_s)


def execute(steps: list[tuple[str, list[str]]], dry_run: bool, wait_timeout_s: float) -> None:
    """Print each stage and its command; run it unless `dry_run`."""
    for stage, cmd in steps:
        print(f"# {stage}", flush=True)
        print(shlex.join(cmd), flush=True)
        if dry_run:
            continue
        if stage == "wait until ACTIVE":
            wait_active(cmd, wait_timeout_s)
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
    p.add_argument("--poll", type=float, default=60.0, help="seconds between looks at a slice after a dropped session")
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
        execute(args.steps(args), args.dry_run, getattr(args, "wait_timeout", 0.0))
    except UsageError as e:
        parser.error(str(e))
    except CheckError as e:
        print(f"tpu.py launch: {e}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as e:
        print(f"error: `{shlex.join(e.cmd)}` exited with {e.returncode}", file=sys.stderr)
        return e.returncode or 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
