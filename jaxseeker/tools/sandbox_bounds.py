"""Bounds on a python run as a whole, not per process: a cgroup per run where one can be made, and oom_score_adj.

Per-process rlimits (`python_exec.py`) leave a run's total open: each forked child gets its own RLIMIT_AS, and
pages of memfds and SysV shared memory count in no process's size. Where this process may create cgroups (cgroup
v2 with the memory and pids controllers enabled in its own cgroup, as systemd's `Delegate=yes` gives; or the
memory and pids hierarchies of cgroup v1, writable by root), each run gets one below this process's cgroup, so it
stays inside whatever limit this process has: `memory.max` (v1: `memory.limit_in_bytes`) bounds every page the run
touches (anonymous, tmpfs, shm, memfd, page cache and, in v2, kernel memory), swap is set to 0, and `pids.max`
bounds its processes and threads. When the run reaches it, the kernel's OOM killer acts inside the run's cgroup.

Where no cgroup can be made, the run's total is the per-process bounds times the process count; the seccomp filter
refuses memfds and SysV IPC, whose pages would count against no process. In both cases the run gets oom_score_adj
1000, written by this process: if the machine runs out of memory, the kernel picks the run before its caller. When
this process holds CAP_SYS_RESOURCE (root, outside a container that drops it), 1000 is also the run's floor; else
the run may lower it to its caller's floor (0), as any process may.

The run's first process is a shell that stops itself; it is moved into the cgroup and given its oom_score_adj while
stopped, then continued into the back-end, so every process of the run starts inside its bounds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

log = logging.getLogger(__name__)

OOM_SCORE_ADJ = 1000
REMOVE_S = 10.0  # how long a run's last processes may take to exit before its cgroup is left behind
CAP_SYS_RESOURCE = 24
SHIM = ("/bin/sh", "-c", 'kill -STOP $$ && exec "$@"', "sandbox")  # stop, wait to be bounded, then exec argv
_CONTROLLERS = ("memory", "pids")


@dataclasses.dataclass(frozen=True)
class RunCgroup:
    """The cgroup directories of one run (v2: one directory; v1: one per controller) and their version."""

    version: int
    dirs: tuple[Path, ...]
    memory_bytes: int
    pids: int

    def attach(self, pid: int) -> None:
        """Move process `pid` (not yet forked: its children follow it) into the run's cgroup."""
        for path in self.dirs:
            (path / "cgroup.procs").write_text(str(pid))

    def oom_kills(self) -> int:
        """How many processes of the run the OOM killer ended for reaching `memory_bytes`."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        memory_dir = self.dirs[0]
        with contextlib.suppress(OSError, ValueError):
            for line in (memory_dir / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        return 0

    def describe(self) -> tuple[str, ...]:
        """The bounds it applies, one phrase each."""
        return (
            f"cgroup v{self.version} memory {self.memory_bytes >> 20} MB (swap 0) for the whole run",
            f"cgroup v{self.version} pids {self.pids}",
        )

    def remove(self) -> None:
        """Kill whatever of the run is left in it (a child of isolation "none" that left its process group; a process
        of a sandbox still exiting) and remove its directories."""
        deadline = time.monotonic() + REMOVE_S
        for path in self.dirs:
            while (pids := (path / "cgroup.procs").read_text().split()) and time.monotonic() < deadline:
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)
                time.sleep(0.01)  # the kernel empties the cgroup once they have exited
            try:
                path.rmdir()
            except OSError as exc:
                log.warning("could not remove the python run's cgroup %s: %s", path, exc)


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(mount point, root within the file system, type, super options) of every cgroup file system mounted."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            dash = fields.index("-")
            if fields[dash + 1] in ("cgroup", "cgroup2"):
                found.append((fields[4], fields[3], fields[dash + 1], set(fields[dash + 3].split(","))))
    return found


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path per hierarchy: "" for cgroup v2, a controller name for each v1 hierarchy."""
    paths = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, names, path = line.rstrip("\n").split(":", 2)
            for name in names.split(",") if names else [""]:
                paths[name] = path
    return paths


def cgroup_directory(point: str, root: str, path: str) -> Path | None:
    """Where cgroup `path` is under a mount of the hierarchy's `root` at `point` (None: outside that mount)."""
    root = root.rstrip("/")
    if path != root and not path.startswith(root + "/"):
        return None
    return Path(point + path[len(root) :])


def v2_parent(own: Path, point: str) -> Path:
    """Where a run's cgroup goes on cgroup v2: below this process's own cgroup when that is the root (the only one
    that may hold processes and enable controllers for children), else beside it, in its parent, which must enable
    memory and pids for its children and be writable (root, or a delegated subtree such as systemd's
    user@.service)."""
    parent = own if own == Path(point) else own.parent
    enabled = set((parent / "cgroup.subtree_control").read_text().split())
    if not enabled >= set(_CONTROLLERS):
        raise OSError(errno.ENOENT, f"{parent} enables {sorted(enabled)} for its children, not memory and pids")
    return parent


def _make_v2(parent: Path, name: str, memory_bytes: int, pids: int) -> RunCgroup:
    path = parent / name
    path.mkdir()
    try:
        (path / "memory.max").write_text(str(memory_bytes))
        if (path / "memory.swap.max").exists():
            (path / "memory.swap.max").write_text("0")
        (path / "pids.max").write_text(str(pids))
    except OSError:
        path.rmdir()
        raise
    return RunCgroup(2, (path,), memory_bytes, pids)


def _make_v1(bases: dict[str, Path], name: str, memory_bytes: int, pids: int) -> RunCgroup:
    made: list[Path] = []
    try:
        for controller in _CONTROLLERS:
            path = bases[controller] / name
            path.mkdir()
            made.append(path)
        memory, pid_dir = made
        (memory / "memory.limit_in_bytes").write_text(str(memory_bytes))
        if (memory / "memory.memsw.limit_in_bytes").exists():  # swap accounting is on: memory + swap, so no swap
            (memory / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
        (pid_dir / "pids.max").write_text(str(pids))
    except OSError:
        for path in made:
            path.rmdir()
        raise
    return RunCgroup(1, tuple(made), memory_bytes, pids)


def make_cgroup(memory_bytes: int, pids: int) -> tuple[RunCgroup | None, str]:
    """A new cgroup for one run, bounding its memory and processes (cgroup v2: see `v2_parent`; v1: below this
    process's own); (None, why) when this process may make none."""
    name = f"jaxseeker-python-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    own = _own_cgroups()
    mounts = _mounts()
    reasons = []
    for point, root, fstype, _ in mounts:
        base = cgroup_directory(point, root, own[""]) if fstype == "cgroup2" and "" in own else None
        if base is not None:
            try:
                return _make_v2(v2_parent(base, point), name, memory_bytes, pids), ""
            except OSError as exc:
                reasons.append(f"cgroup v2 at {base}: {exc.strerror or exc}")
    v1 = {}
    for point, root, fstype, options in mounts:
        for controller in _CONTROLLERS:
            if fstype == "cgroup" and controller in options and controller in own:
                v1[controller] = cgroup_directory(point, root, own[controller])
    if all(v1.get(controller) for controller in _CONTROLLERS):
        try:
            return _make_v1(v1, name, memory_bytes, pids), ""
        except OSError as exc:
            reasons.append(f"cgroup v1 at {v1['memory']}: {exc.strerror or exc}")
    elif not reasons:
        reasons.append("no cgroup file system with the memory and pids controllers is mounted")
    return None, "; ".join(reasons)


def holds_cap_sys_resource() -> bool:
    """Whether this process may set the floor of another's oom_score_adj (CAP_SYS_RESOURCE in its effective set)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> CAP_SYS_RESOURCE & 1)
    return False


@dataclasses.dataclass
class BoundedStart:
    """A started run (its first process stopped until `release`) and the bounds given to it."""

    proc: subprocess.Popen
    cgroup: RunCgroup | None
    bounds: tuple[str, ...]


def start(argv: list[str], cgroup: RunCgroup | None, **popen: object) -> BoundedStart:
    """Start `argv` behind the stopping shell, move it into `cgroup` and set its oom_score_adj, then let it run.
    When the shell ends before it stops (it could not start), the run's outcome is its exit status."""
    proc = subprocess.Popen([*SHIM, *argv], **popen)  # type: ignore[arg-type]
    bounds: list[str] = []
    try:
        stopped = os.waitid(os.P_PID, proc.pid, os.WSTOPPED | os.WEXITED | os.WNOWAIT)
        if stopped is not None and stopped.si_code == os.CLD_STOPPED:
            if cgroup is not None:
                cgroup.attach(proc.pid)
                bounds += cgroup.describe()
            Path(f"/proc/{proc.pid}/oom_score_adj").write_text(str(OOM_SCORE_ADJ))
            bounds.append(f"oom_score_adj {OOM_SCORE_ADJ}" + (" (its floor)" if holds_cap_sys_resource() else ""))
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    os.kill(proc.pid, signal.SIGCONT)  # not reaped yet, so the pid is still the shell's
    return BoundedStart(proc, cgroup, tuple(bounds))
