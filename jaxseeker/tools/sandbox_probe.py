"""The start-up probe of a sandbox back-end: it must prove isolation, not merely run.

The probe runs a short program in the back-end and accepts it only when what the program sees shows the sandbox:
its own PID namespace (it is PID 1 or 2 there, and the caller's pid is not in its /proc), its own user, mount and
network namespaces (each a different one from the caller's), no file of the caller's (a marker file the caller has
just made in its temporary directory is not there), no network interface but loopback, and uid 1000. A `bwrap` on
PATH that runs the command without isolating it (a wrapper script, a user namespace alone) is refused, whatever
uid the caller has. `resolve` picks the sandbox an isolation setting asks for among the back-ends that pass.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading

from jaxseeker.tools import sandbox, seccomp
from jaxseeker.tools.sandbox import BACKENDS, HOW_TO_FIX, ISOLATIONS, Sandbox, SandboxUnavailable
from jaxseeker.tools.sandbox_init import SANDBOX_ID, SETUP_FAILED

NAMESPACES = ("pid", "user", "mnt", "net")
PROBE = """
import json, os, socket, sys
caller, marker, namespaces = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
print(json.dumps({
    "uid": os.getuid(),
    "pid": os.getpid(),
    "sees_caller": os.path.exists(f"/proc/{caller}"),
    "sees_marker": os.path.exists(marker),
    "namespaces": {name: os.readlink(f"/proc/self/ns/{name}") for name in namespaces},
    "interfaces": sorted(name for _, name in socket.if_nameindex()),
}))
"""


def problems(seen: dict, caller: int, marker: str) -> list[str]:
    """What the probe's report `seen` shows of the host, one phrase each (none: it is isolated)."""
    found = []
    if seen["uid"] != SANDBOX_ID:
        found.append(f"it ran as uid {seen['uid']}, not {SANDBOX_ID}")
    if seen["pid"] > 2:
        found.append(f"it ran as pid {seen['pid']}, not in a PID namespace of its own")
    if seen["sees_caller"] and caller > 2:
        found.append(f"it sees the caller's pid {caller}")
    for name in NAMESPACES:
        if seen["namespaces"][name] == os.readlink(f"/proc/self/ns/{name}"):
            found.append(f"it shares the caller's {name} namespace")
    if seen["sees_marker"]:
        found.append(f"it sees the host file {marker}")
    if seen["interfaces"] != ["lo"]:
        found.append(f"it sees the network interfaces {seen['interfaces']}")
    return found


def try_backend(backend: str, interpreter: str) -> str | None:
    """Why `backend` cannot isolate `interpreter` here, in one line (None: the probe proved it isolates)."""
    if backend == "bwrap" and shutil.which("bwrap") is None:
        return "bwrap is not installed"
    if not seccomp.supported():
        return f"no seccomp filter for this architecture ({os.uname().machine})"
    try:
        sandbox.python_paths(interpreter)
    except (OSError, subprocess.SubprocessError, ValueError, SyntaxError) as exc:
        return f"cannot ask {interpreter} for its prefixes ({type(exc).__name__}: {exc})"
    caller = os.getpid()
    with (
        tempfile.NamedTemporaryFile(prefix="jaxseeker-probe-") as marker,
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        open(os.devnull, "rb") as null,
    ):
        try:
            outcome = sandbox.run(
                sandbox.Sandbox(backend, interpreter),
                [interpreter, "-I", "-c", PROBE, str(caller), marker.name, *NAMESPACES],
                stdin=null,
                stdout=out,
                stderr=err,
                timeout_s=60,
            )
        except OSError as exc:
            return f"{type(exc).__name__}: {exc}"
        out.seek(0)
        err.seek(0)
        printed, problem = out.read().decode(errors="replace").strip(), err.read().decode(errors="replace").strip()
        if outcome.returncode == SETUP_FAILED or (outcome.returncode != 0 and problem):
            lines = problem.splitlines()
            return lines[-1] if lines else f"exit code {outcome.returncode}"
        try:
            seen = json.loads(printed)
        except ValueError:
            return f"the probe printed {printed[:200]!r} with exit code {outcome.returncode}"
        found = problems(seen, caller, marker.name)
    return f"it does not isolate: {'; '.join(found)}" if found else None


_probed: dict[tuple[str, str, str | None], str | None] = {}
_probe_lock = threading.Lock()


def probe(backend: str, interpreter: str) -> str | None:
    """Why `backend` cannot isolate `interpreter` here (None: `try_backend` proved it does); tried once per
    process (and bwrap on PATH)."""
    key = (backend, interpreter, shutil.which("bwrap"))
    with _probe_lock:
        if key not in _probed:
            _probed[key] = try_backend(backend, interpreter)
        return _probed[key]


def resolve(isolation: str, interpreter: str = "") -> Sandbox:
    """The sandbox for `isolation` (auto | bwrap | unshare | none), each back-end probed once; SandboxUnavailable
    with one line naming what failed and how to fix it when the isolation asked for cannot be had."""
    if isolation not in ISOLATIONS:
        raise SandboxUnavailable(f"tools.python.isolation: {isolation!r} is not one of {list(ISOLATIONS)}")
    interpreter = interpreter or sys.executable
    if isolation == "none":
        return Sandbox("none", interpreter)
    reasons = []
    for backend in BACKENDS if isolation == "auto" else (isolation,):
        reason = probe(backend, interpreter)
        if reason is None:
            return Sandbox(backend, interpreter)
        reasons.append(f"{backend}: {reason}")
    raise SandboxUnavailable(
        f"the python tool will not run without isolation and none works here ({'; '.join(reasons)}): {HOW_TO_FIX}"
    )
