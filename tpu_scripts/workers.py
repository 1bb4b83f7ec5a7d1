"""What runs on the workers of a slice: set-up (the checkout, Python, jax[tpu], data, an optional bucket mount),
the detached job of a launch, the wait for it (with hang detection), its logs, stop and any shell command.

Each function returns gcloud ssh / scp commands (`slices.on_workers`) whose bash scripts are built here.
"""

from __future__ import annotations

import argparse
import re
import shlex
import time

import supervise
from slices import MOUNT_DIR, REMOTE_DIR, UsageError, on_workers, tpu_vm

JAX_TPU = "jax[tpu]==0.10.2"  # the jax of the project's environment: the slices run what was tested here

LOG_SYNC_S = 60  # seconds between copies of each worker's log to gs://BUCKET/RUN/logs/

TARBALL = "jaxseeker-src.tar.gz"

EXCLUDE = (".venv", ".git", "runs", "__pycache__", "*.egg-info", ".pytest_cache", "checkpoints")

METADATA_GET = (
    "curl -sf -H Metadata-Flavor:Google http://metadata.google.internal/computeMetadata/v1/instance/attributes"
)

RUN_SECTIONS = {"sft": "train", "rl": "rl"}  # jaxseeker commands whose recipe section takes out_dir / checkpoint_dir

HANG_LOG_LINES = 30  # lines of the log a hang report shows


def setup_steps(args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """Pack this checkout, copy it to every worker, install Python, jax[tpu] and the project, mount the bucket (with
    --mount-bucket), fetch data."""
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
    if args.mount_bucket:
        steps.append((f"mount {args.mount_bucket}", on_workers(args, mount_bucket_script(args.mount_bucket))))
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
        # into a mounted bucket once (every worker sees it), else onto each worker's disk
        worker = "0" if args.mount_bucket else "all"
        steps.append((f"download {repo_id}", on_workers(args, f"cd ~/{REMOTE_DIR} && {with_env()}{download}", worker)))
    # process index, local devices, global devices, device kind: the global count proves the workers joined
    check = "import jax; print(jax.process_index(), jax.local_device_count(), jax.device_count(), jax.devices()[0])"
    steps.append(
        ("check devices", on_workers(args, f'cd ~/{REMOTE_DIR} && {distributed_env()}.venv/bin/python -c "{check}"'))
    )
    return steps


def mount_bucket_script(bucket: str) -> str:
    """Bash for every worker: install gcsfuse (Google's apt repository) when missing and mount `bucket`
    (gs://BUCKET or gs://BUCKET/DIR) at ~/REMOTE_DIR/MOUNT_DIR, where checkpoints and `--hf-model` downloads go: a
    145 GB checkpoint does not fit a worker's 100 GiB boot disk. A mounted directory is left as is."""
    match = re.fullmatch(r"gs://([a-z0-9][-_.a-z0-9]*)(?:/(.+?))?/?", bucket)
    if not match:
        raise UsageError(f"--mount-bucket {bucket!r}: expected gs://BUCKET or gs://BUCKET/DIR")
    name, folder = match.groups()
    mnt = f"~/{REMOTE_DIR}/{MOUNT_DIR}"
    repo = "https://packages.cloud.google.com/apt"
    key = "/usr/share/keyrings/cloud.google.asc"
    install = (
        f'echo "deb [signed-by={key}] {repo} gcsfuse-$(lsb_release -c -s) main" '
        "| sudo tee /etc/apt/sources.list.d/gcsfuse.list > /dev/null && "
        f"curl -sf {repo}/doc/apt-key.gpg | sudo tee {key} > /dev/null && "
        "sudo apt-get update -q && sudo apt-get install -y -q gcsfuse"
    )
    only = f"--only-dir {shlex.quote(folder)} " if folder else ""
    return (
        f"set -e; command -v gcsfuse > /dev/null || ({install}); mkdir -p {mnt}; "
        f"mountpoint -q {mnt} || gcsfuse --implicit-dirs {only}{shlex.quote(name)} {mnt}; df -h {mnt}"
    )


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
    processes are gone without a status). With --hang-minutes N, a worker whose run's `metrics.jsonl` (process 0's,
    in the out dir) has not grown for N minutes while the job runs prints `jaxseeker-hang=N` and the end of the
    log instead, and stops waiting (the job goes on)."""
    paths = run_paths(args)
    status = paths["status"]
    hang = ""
    if args.hang_minutes > 0:
        metrics = f"~/{REMOTE_DIR}/{paths['out_dir']}/metrics.jsonl"
        hang = (
            f'if [ -n "$(find {metrics} -mmin +{args.hang_minutes:g} 2> /dev/null)" ]; then '
            f"echo {supervise.HANG_MARKER}{args.hang_minutes:g}; tail -n {HANG_LOG_LINES} {paths['log']}; exit 0; fi; "
        )
    script = (
        f"while [ ! -f {status} ]; do kill -0 $(cat {paths['pid']} 2> /dev/null) 2> /dev/null || break; {hang}"
        f"sleep 10; done; if [ -f {status} ]; then echo {supervise.EXIT_MARKER}$(cat {status}); "
        f"else echo {supervise.EXIT_MARKER}killed; fi"
    )
    return on_workers(args, script)


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
