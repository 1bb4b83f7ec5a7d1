"""Kernel isolation for the python tool: each run in its own user, PID, network, mount, IPC, UTS and cgroup namespaces.

What a run sees: a read-only view of the Python installation it runs (its prefixes and /usr), a private tmpfs
scratch directory (its working directory, also /tmp), a fresh /proc that shows only its own processes, /dev with
null, zero, full, random and urandom, no network but a loopback of its own, an environment of a few fixed variables
and nothing of the host's; it runs as uid 1000 without capabilities and cannot create further user namespaces.
When its first process ends, or on a timeout, the kernel kills everything left in its PID namespace. A run is
bounded as a whole, not only per process, by `sandbox_bounds` (a cgroup per run where one can be made, and
oom_score_adj 1000), and a back-end is used only once `sandbox_probe` has seen it isolate.

Two back-ends build the same sandbox: bubblewrap (`bwrap`, the tool Flatpak uses) when it works here, else the
`unshare(2)` launcher of `sandbox_init.py`. Both add the seccomp filter of `seccomp.py` for the holes namespaces
leave (kernel keyrings, socket families the network namespace does not confine, io_uring); Landlock would add
nothing, as the mount namespace already shows no file but the binds. The kernel applies RLIMIT_NPROC to every uid
but 0, so when jaxseeker runs as root the sandbox runs as nobody (65534) on the host: bwrap is then started as
nobody and works only when nobody can read the Python installation; the unshare launcher binds it before dropping
to nobody.

Isolation "none" runs the code in a plain subprocess (the host's file system, processes and network) and logs a
warning on every run; when no back-end works, `resolve` refuses with one line saying why and what to install.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import logging
import marshal
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from jaxseeker.errors import InputError
from jaxseeker.tools import sandbox_bounds, seccomp
from jaxseeker.tools.sandbox_init import SANDBOX_ID

log = logging.getLogger(__name__)

ISOLATIONS = ("auto", "bwrap", "unshare", "none")
BACKENDS = ("bwrap", "unshare")
SCRATCH = "/scratch"
NOBODY = 65534
HOW_TO_FIX = (
    "install bubblewrap (apt-get install bubblewrap) and allow unprivileged user namespaces "
    "(sysctl kernel.unprivileged_userns_clone=1 kernel.apparmor_restrict_unprivileged_userns=0), "
    "or run the tool unisolated with tools.python.isolation: none (--unsafe-python)"
)
_LAUNCHER = Path(__file__).with_name("sandbox_init.py")
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_CHILD_PID = re.compile(rb'"child-pid":\s*(\d+)|\A(\d+)\n')


class SandboxUnavailable(InputError):
    """The requested isolation cannot be had on this machine; the message says why and how to get it."""


@dataclasses.dataclass(frozen=True)
class Sandbox:
    """How runs are isolated: the back-end (bwrap | unshare | none) and the interpreter they may run."""

    backend: str
    interpreter: str


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How a run ended: the exit code (-N: killed by signal N), whether the wall-clock limit ended it, the bounds on
    the run as a whole that applied (`sandbox_bounds`) and how many of its processes reaching them killed."""

    returncode: int
    timed_out: bool
    bounds: tuple[str, ...] = ()
    oom_kills: int = 0


@functools.cache
def python_paths(interpreter: str) -> tuple[str, ...]:
    """The directories the interpreter needs: its prefixes (a venv and its base installation), as written and
    resolved, without those inside /usr or inside one another."""
    if interpreter == sys.executable:
        prefixes = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    else:
        query = "import sys; print(repr([sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]))"
        prefixes = ast.literal_eval(
            subprocess.run(
                [interpreter, "-I", "-c", query], capture_output=True, check=True, text=True, timeout=60
            ).stdout
        )
    paths = {os.path.abspath(p) for p in prefixes} | {os.path.realpath(p) for p in prefixes}
    kept: list[str] = []
    for path in sorted(paths):
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in [*kept, "/usr"]):
            kept.append(path)
    return tuple(kept)


def layout(interpreter: str) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """(read-only binds, (link, target) symlinks) of the sandbox's root: /usr and the host's /bin, /lib… as they
    are (merged-/usr systems have symlinks there), and the interpreter's directories."""
    binds: list[str] = []
    links: list[tuple[str, str]] = []
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            links.append((path, os.readlink(path)))
        elif os.path.isdir(path):
            binds.append(path)
    return (*binds, *python_paths(interpreter)), tuple(links)


def tmp_holds_a_bind(binds: Sequence[str]) -> bool:
    """Whether a bind lies under /tmp (a venv there): /tmp is then a read-only directory of the sandbox's root, not
    the scratch symlink, and code writes where TMPDIR points (the scratch)."""
    return any(path == "/tmp" or path.startswith("/tmp/") for path in binds)


def environment(interpreter: str) -> dict[str, str]:
    """The whole environment of a run: no variable of the host's."""
    path = ":".join(dict.fromkeys([os.path.dirname(interpreter), "/usr/local/bin", "/usr/bin", "/bin"]))
    env = {"PATH": path, "HOME": SCRATCH, "PWD": SCRATCH, "TMPDIR": SCRATCH, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    env.update(dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1"))
    return env


def _bwrap_command(sandbox: Sandbox, argv: Sequence[str], scratch_mb: int, seccomp_fd: int, info_fd: int) -> list[str]:
    binds, links = layout(sandbox.interpreter)
    cmd = [
        shutil.which("bwrap") or "bwrap",  # the one `probe` tried, on this process's PATH
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--uid",
        str(SANDBOX_ID),
        "--gid",
        str(SANDBOX_ID),
        "--hostname",
        "sandbox",
        "--clearenv",
    ]
    for name, value in environment(sandbox.interpreter).items():
        cmd += ["--setenv", name, value]
    for path in binds:
        cmd += ["--ro-bind", path, path]
    for link, target in links:
        cmd += ["--symlink", target, link]
    cmd += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--remount-ro",
        "/dev",
        "--perms",
        "1777",
        "--size",
        str(scratch_mb << 20),
        "--tmpfs",
        SCRATCH,
        *([] if tmp_holds_a_bind(binds) else ["--symlink", SCRATCH, "/tmp"]),
        "--chdir",
        SCRATCH,
        "--remount-ro",
        "/",
        "--seccomp",
        str(seccomp_fd),
        "--info-fd",
        str(info_fd),
        "--",
        *argv,
    ]
    return cmd


def _unshare_command(
    sandbox: Sandbox, argv: Sequence[str], scratch_mb: int, seccomp_fd: int, info_fd: int
) -> list[str]:
    binds, links = layout(sandbox.interpreter)
    spec = {
        "binds": binds,
        "symlinks": links,
        "scratch": SCRATCH,
        "scratch_bytes": scratch_mb << 20,
        "argv": list(argv),
        "env": environment(sandbox.interpreter),
        "seccomp_fd": seccomp_fd,
        "info_fd": info_fd,
    }
    return [sys.executable, "-I", "-S", str(_LAUNCHER), marshal.dumps(spec).hex()]


def _read_child_pid(fd: int, deadline: float) -> int | None:
    """The host pid of the sandbox's first process, as the back-end reports it on `fd` (None: it never did)."""
    data = b""
    while (remaining := deadline - time.monotonic()) > 0:
        if not select.select([fd], [], [], remaining)[0]:
            return None
        chunk = os.read(fd, 4096)
        if not chunk:
            return None
        data += chunk
        found = _CHILD_PID.search(data)
        if found:
            return int(found.group(1) or found.group(2))
    return None


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _pidfd_of_descendant(pid: int, ancestor: int) -> int | None:
    """A pidfd of `pid` when it is a child or grandchild of `ancestor` (so never of an unrelated process that reused
    the number); None when it is gone."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return None
    parent = _parent_of(pid)
    if ancestor in (parent, parent and _parent_of(parent)):
        return pidfd
    os.close(pidfd)
    return None


def run(
    sandbox: Sandbox,
    argv: Sequence[str],
    *,
    stdin: IO[bytes],
    stdout: IO[bytes],
    stderr: IO[bytes],
    timeout_s: float,
    scratch_mb: int = 64,
    cwd: str | None = None,
    memory_mb: int = 0,
    processes: int = 0,
) -> Outcome:
    """Run `argv` in the sandbox with these open files as its standard streams; after `timeout_s` the whole sandbox
    is killed. When this returns, no process of the run is left. `memory_mb` and `processes` (both > 0) bound the
    run as a whole where a cgroup can be made (`sandbox_bounds`); `cwd` is used by isolation "none" only."""
    cgroup, why = sandbox_bounds.make_cgroup(memory_mb << 20, processes) if memory_mb and processes else (None, "")
    try:
        outcome = _run(sandbox, argv, cgroup, stdin, stdout, stderr, timeout_s, scratch_mb, cwd)
        oom_kills = cgroup.oom_kills() if cgroup is not None else 0
    finally:
        if cgroup is not None:
            cgroup.remove()
    no_cgroup = (f"no cgroup ({why})",) if why else ()
    return dataclasses.replace(outcome, bounds=no_cgroup + outcome.bounds, oom_kills=oom_kills)


def _run(
    sandbox: Sandbox,
    argv: Sequence[str],
    cgroup: sandbox_bounds.RunCgroup | None,
    stdin: IO[bytes],
    stdout: IO[bytes],
    stderr: IO[bytes],
    timeout_s: float,
    scratch_mb: int,
    cwd: str | None,
) -> Outcome:
    streams = {"stdin": stdin, "stdout": stdout, "stderr": stderr, "start_new_session": True}
    if sandbox.backend == "none":
        started = sandbox_bounds.start(
            list(argv),
            cgroup,
            cwd=cwd,
            env=environment(sandbox.interpreter) | {"HOME": cwd or "/", "TMPDIR": cwd or "/tmp"},
            **streams,
        )
        return _wait(started, None, time.monotonic() + timeout_s, signal_codes=False)
    seccomp_r, seccomp_w = os.pipe()
    info_r, info_w = os.pipe()
    try:
        os.write(seccomp_w, seccomp.program())
        os.close(seccomp_w)
        build = _bwrap_command if sandbox.backend == "bwrap" else _unshare_command
        as_nobody = (
            {"user": NOBODY, "group": NOBODY, "extra_groups": []}
            if sandbox.backend == "bwrap" and os.geteuid() == 0
            else {}
        )
        deadline = time.monotonic() + timeout_s
        started = sandbox_bounds.start(
            build(sandbox, argv, scratch_mb, seccomp_r, info_w),
            cgroup,
            env={"PATH": "/usr/bin:/bin"},
            pass_fds=(seccomp_r, info_w),
            **streams,
            **as_nobody,
        )
        os.close(info_w)
        info_w = -1
        child = _read_child_pid(info_r, deadline)
        pidfd = _pidfd_of_descendant(child, started.proc.pid) if child else None
        return _wait(started, pidfd, deadline, signal_codes=True)
    finally:
        for fd in (seccomp_r, info_r, info_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)


def _wait(started: sandbox_bounds.BoundedStart, pidfd: int | None, deadline: float, *, signal_codes: bool) -> Outcome:
    """Wait for the back-end until `deadline`, then kill the sandbox's first process (its PID namespace with it)
    and the back-end's process group; in "none", the process group is all there is to kill. The back-end is
    reaped last, so its group id cannot have been reused by then. With `signal_codes`, an exit code 128 + N reads
    as "killed by signal N", as both back-ends report it (and a shell does: code that exits with such a code itself
    is reported as killed)."""
    proc = started.proc
    launcher = os.pidfd_open(proc.pid)
    try:
        timed_out = not select.select([launcher], [], [], max(0.0, deadline - time.monotonic()))[0]
        if timed_out and pidfd is not None:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if pidfd is not None:
            select.select([pidfd], [], [], 10.0)  # readable once the first process, hence its namespace, is gone
    finally:
        for fd in (launcher, pidfd):
            if fd is not None:
                os.close(fd)
    code = proc.returncode
    return Outcome(128 - code if signal_codes and code > 128 else code, timed_out, started.bounds)


def warn_unisolated() -> None:
    """The warning logged on every run of isolation "none"."""
    log.warning(
        "the python tool runs WITHOUT isolation (tools.python.isolation: none): the code can read the "
        "host's files and environment, reach the network and signal other processes"
    )
