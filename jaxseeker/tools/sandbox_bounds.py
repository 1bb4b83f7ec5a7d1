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
import uuid
from pathlib import Path

log = logging.getLogger(__name__)

OOM_SCORE_ADJ = 1000
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
        """Remove the run's directories (every process of the run has ended by now)."""
        for path in self.dirs:
            try:
                path.rmdir()
            except OSError as exc:
                log.warning("could not remove the python run's cgroup %s: %s", path, exc)


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, file system type, super options) of every cgroup file system, from /proc/self/mountinfo."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            fstype, options = fields[fields.index("-") + 1], fields[fields.index("-") + 3]
            if fstype in ("cgroup", "cgroup2"):
                found.append((fields[4], fstype, set(options.split(","))))
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


def _limit_v2(base: Path) -> Path:
    enabled = set((base / "cgroup.subtree_control").read_text().split())
    if not enabled >= set(_CONTROLLERS):
        available = set((base / "cgroup.controllers").read_text().split())
        if not available >= set(_CONTROLLERS):
            raise OSError(errno.ENOENT, f"{base} offers controllers {sorted(available)}, not memory and pids")
        (base / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in _CONTROLLERS))
    return base


def _make_v2(base: Path, name: str, memory_bytes: int, pids: int) -> RunCgroup:
    path = _limit_v2(base) / name
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
    """A new cgroup for one run below this process's own, bounding its memory and processes; (None, why) when this
    process may not make one (no delegated cgroup v2, no writable memory and pids hierarchies of cgroup v1)."""
    name = f"jaxseeker-python-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    own = _own_cgroups()
    mounts = _mounts()
    reasons = []
    for point, fstype, _ in mounts:
        if fstype == "cgroup2" and "" in own:
            base = Path(point + own[""])
            try:
                return _make_v2(base, name, memory_bytes, pids), ""
            except OSError as exc:
                reasons.append(f"cgroup v2 at {base}: {exc.strerror or exc}")
    v1 = {
        c: Path(point + own[c])
        for point, fstype, opts in mounts
        for c in _CONTROLLERS
        if fstype == "cgroup"
        if c in opts and c in own
    }
    if set(v1) == set(_CONTROLLERS):
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
