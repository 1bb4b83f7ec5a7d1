"""The slice itself, as gcloud commands: its shape, create (a queued resource or a plain TPU VM, with an optional
persistent data disk), its state, delete, and the wait for a queued resource to become ACTIVE.

Standard library only: `tpu.py` builds these commands and prints or runs them.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import shlex
import subprocess
import time

REMOTE_DIR = "jaxseeker"  # the project on each worker, relative to the home directory
MOUNT_DIR = "checkpoints"  # under REMOTE_DIR: where a data disk or a bucket is mounted (`--hf-model` downloads go)
# The disk types a TPU VM can attach: Hyperdisk Balanced on v6e (no Persistent Disk there), Balanced Persistent
# Disk on the others (Cloud TPU docs, "Attach durable block storage to a TPU VM").
DISK_TYPES = {"v4": "pd-balanced", "v5e": "pd-balanced", "v5p": "pd-balanced", "v6e": "hyperdisk-balanced"}
# Chips a single-host slice has at most (v5e / v6e hosts of small slices drive 8, the others 4); larger slices have
# hosts of 4 chips.
SINGLE_HOST_CHIPS = {"v4": 4, "v5e": 8, "v5p": 4, "v6e": 8}
WAITING = "WAITING_FOR_RESOURCES"
STUCK = frozenset({"FAILED", "SUSPENDED", "SUSPENDING"})  # a queued resource in one of these never becomes ACTIVE


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


class UsageError(ValueError):
    """A bad argument; the message names it."""


class SliceStuck(RuntimeError):
    """A queued resource that will not become ACTIVE (or not within --wait-timeout); the message (one line) says its
    state and what to do."""


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


def host_count(args: argparse.Namespace) -> int | None:
    """How many VMs (hosts) the slice's shape has; None when the launcher was not given its shape."""
    chip, chips = slice_chips(args)
    if chips is None:
        return None
    return 1 if chips <= SINGLE_HOST_CHIPS[chip] else math.ceil(chips / 4)


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


def data_disk_name(args: argparse.Namespace) -> str:
    """The persistent disk `create --data-disk` makes for the slice: NAME-data."""
    return f"{args.name}-data"


def data_disk_flag(args: argparse.Namespace) -> list[str]:
    """`--data-disk=source=…,mode=read-write` attaching the slice's disk (none without --data-disk). A read-write
    disk attaches to one VM only: a slice of several hosts is refused (`setup --mount-bucket` serves those)."""
    if not args.data_disk:
        return []
    if not re.fullmatch(r"\d+(GB|TB)?", args.data_disk):
        raise UsageError(f"--data-disk {args.data_disk!r}: expected a size such as 500GB or 2TB")
    hosts = host_count(args)
    if hosts != 1:
        many = f"{hosts} hosts" if hosts else "hosts of unknown number (no --accelerator or --topology)"
        raise UsageError(
            f"--data-disk: this slice has {many} and a read-write disk attaches to one VM; mount the bucket on "
            "every worker instead (setup --mount-bucket gs://BUCKET)"
        )
    if not args.project:
        raise UsageError("--data-disk needs --project: the disk is attached by its full path, projects/P/zones/Z/…")
    return [
        f"--data-disk=source=projects/{args.project}/zones/{args.zone}/disks/{data_disk_name(args)},mode=read-write"
    ]


def data_disk_steps(args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """Create the slice's persistent disk (it outlives the slice: `delete` leaves it, a recreated slice reattaches
    it), of the type the slice's generation can attach."""
    chip, _ = slice_chips(args)
    disk = ["gcloud", "compute", "disks", "create", data_disk_name(args), f"--size={args.data_disk}"]
    return [("create data disk", [*disk, f"--type={DISK_TYPES[chip]}", *where(args)])]


def mount_disk_script() -> str:
    """Bash for the worker: format the attached data disk on first use (ext4) and mount it at ~/REMOTE_DIR/MOUNT_DIR.
    The data disk is the whole disk without partitions that nothing mounts; a mounted directory is left as is."""
    mnt = f"~/{REMOTE_DIR}/{MOUNT_DIR}"
    find = (
        "lsblk -ndpo NAME,TYPE | awk '$2 == \"disk\" {print $1}' | while read -r d; do "
        '[ "$(lsblk -npo NAME "$d" | wc -l)" = 1 ] && ! findmnt -rn -S "$d" > /dev/null && echo "$d"; done | head -n 1'
    )
    return (
        f"set -e; mkdir -p {mnt}; if ! mountpoint -q {mnt}; then dev=$({find}); "
        '[ -n "$dev" ] || { echo "no unmounted data disk on this worker" >&2; exit 1; }; '
        'sudo blkid "$dev" > /dev/null || '
        'sudo mkfs.ext4 -q -m 0 -E lazy_itable_init=0,lazy_journal_init=0,discard "$dev"; '
        f'sudo mount -o discard,defaults "$dev" {mnt}; sudo chown "$USER" {mnt}; fi; df -h {mnt}'
    )


def create_steps(args: argparse.Namespace, disk_exists: bool = False) -> list[tuple[str, list[str]]]:
    """A queued resource (or, with --direct, a plain TPU VM create) of the requested shape; with --data-disk, its
    persistent disk first (unless `disk_exists`: a slice recreated after a loss reattaches it) and, once the slice
    is ACTIVE, the disk formatted and mounted."""
    shape, version, disk = shape_flags(args), runtime_version(args), data_disk_flag(args)
    if disk and args.no_wait:
        raise UsageError("--data-disk mounts the disk once the slice is ACTIVE: drop --no-wait")
    tier = ["--spot"] if args.spot else ["--reserved"] if args.reserved else []
    steps = data_disk_steps(args) if disk and not disk_exists else []
    if args.direct:
        steps.append(("create", tpu_vm(args, "create", *shape, f"--version={version}", *tier, *disk)))
    else:
        create = ["gcloud", "compute", "tpus", "queued-resources", "create", args.name, f"--node-id={args.name}"]
        steps.append(("create", [*create, *shape, f"--runtime-version={version}", *tier, *disk, *where(args)]))
        if not args.no_wait:
            steps.append(("wait until ACTIVE", queued_state(args)))
    if disk:
        steps.append(("mount data disk", on_workers(args, mount_disk_script())))
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


def state_command(args: argparse.Namespace) -> list[str]:
    """The command that prints the slice's state: the queued resource's, or with --direct the TPU VM's."""
    if args.direct:
        return tpu_vm(args, "describe", "--format=value(state)")
    return queued_state(args)


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


def wait_active(cmd: list[str], timeout_s: float, poll_s: float) -> None:
    """Poll the queued resource until ACTIVE. SliceStuck, naming the state, when it is FAILED or SUSPENDED or still
    waiting (for capacity: WAITING_FOR_RESOURCES) at the timeout."""
    name = cmd[5]
    deadline = time.monotonic() + timeout_s
    while True:
        state = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()
        print(f"# state: {state}", flush=True)
        if state == "ACTIVE":
            return
        details = f"details: {shlex.join(cmd[:6] + cmd[7:])}"
        if state in STUCK:
            raise SliceStuck(f"queued resource {name} is {state}: it will not become ACTIVE; {details}")
        if time.monotonic() > deadline:
            why = " (no capacity granted yet; it stays queued: delete it to withdraw)" if state == WAITING else ""
            raise SliceStuck(
                f"queued resource {name} is still {state or 'of unknown state'} after {timeout_s:g} s "
                f"(--wait-timeout){why}; {details}"
            )
        time.sleep(poll_s)
