"""Attacks on a python run as a whole, not on one process: memory spread over forked children, SysV shared memory,
memfds, open pipes, processes, and the OOM killer's choice. Each held against the per-process limits alone.

Every attack allocates at most 800 MB, in a run whose cgroup (where one can be made) caps it far lower; the OOM
killer then acts inside the run's cgroup, never on the host.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import uuid
from pathlib import Path

import pytest
from sandbox_support import REQUIRE_ISOLATION, isolation

from jaxseeker.tools import PythonConfig, sandbox, sandbox_bounds
from jaxseeker.tools.python_exec import SANDBOX_PROCESSES, execute, run_memory_mb

INTERPRETERS = (sys.executable, *(p for p in ("/usr/bin/python3",) if os.path.exists(p)))  # bwrap as root: nobody
BLOCK_MB = 200
# four children each fill BLOCK_MB and hold it until all four have tried; each reports whether it still held its
# block, intact, when released (0) or was killed (-9)
CHILDREN_HOLD_MEMORY = f"""
import os
release_r, release_w = os.pipe()
children = []
for _ in range(4):
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(release_w)
        block = b"x" * ({BLOCK_MB} << 20)
        os.write(ready_w, b"k")
        os.read(release_r, 1)
        os._exit(0 if block.count(b"x") == len(block) else 1)
    os.close(ready_w)
    os.read(ready_r, 1)
    os.close(ready_r)
    children.append(pid)
os.close(release_w)
print([os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children])
"""


@pytest.fixture(params=sandbox.BACKENDS)
def box(request) -> sandbox.Sandbox:
    return isolation(request.param, INTERPRETERS)


def _cgroup_or_skip(outcome: sandbox.Outcome) -> None:
    """A cgroup bounded the run; without one (no delegated cgroup v2, not root for v1) the test fails in CI as root,
    where one can always be made, and is skipped elsewhere."""
    if any(bound.startswith("no cgroup") for bound in outcome.bounds):
        message = f"no cgroup for the run here: {outcome.bounds}"
        if REQUIRE_ISOLATION and os.geteuid() == 0:
            pytest.fail(message)
        pytest.skip(message)


def _cgroup_bound(outcome: sandbox.Outcome, bound: str) -> bool:
    return any(f"cgroup v{version} {bound}" in outcome.bounds for version in (1, 2))


@pytest.mark.parametrize("backend", [*sandbox.BACKENDS, "none"])
def test_memory_held_by_forked_children_is_bounded_for_the_run_as_a_whole(backend):
    """Four children of 200 MB, each under memory_mb=256 (RLIMIT_AS is per process): 800 MB without a bound on the
    run. Its cgroup allows 256 + 16 (scratch) + 64 (sandbox) = 336 MB in all, so one block of 200 MB fits and a second
    does not: the OOM killer ends three children inside the run, and the observation says so."""
    box = sandbox.Sandbox("none", sys.executable) if backend == "none" else isolation(backend, INTERPRETERS)
    config = PythonConfig(memory_mb=256, scratch_mb=16, processes=16)
    text, outcome = execute(CHILDREN_HOLD_MEMORY, config, box)
    _cgroup_or_skip(outcome)
    assert run_memory_mb(config) == 336 and 1 * BLOCK_MB <= 336 < 2 * BLOCK_MB
    assert sorted(eval(text.splitlines()[1])) == [-9, -9, -9, 0], text
    assert outcome.oom_kills == 3
    assert text.endswith("[3 processes of the run killed: together they reached the run's memory limit of 336 MB]")
    assert _cgroup_bound(outcome, "memory 336 MB (swap 0) for the whole run")


def test_processes_are_bounded_for_the_run_even_without_isolation():
    """Isolation "none" has no user namespace, so no RLIMIT_NPROC of its own: its cgroup's pids.max (processes + 4)
    is the bound; 40 sleeping children would all start without it."""
    code = (
        "import os, time\n"
        "started, error = 0, None\n"
        "for _ in range(40):\n"
        "    try:\n        pid = os.fork()\n"
        "    except OSError as exc:\n        error = exc.errno\n        break\n"
        "    if pid == 0:\n        time.sleep(30)\n        os._exit(0)\n"
        "    started += 1\n"
        "print(started, error)"
    )  # the children are killed with the run's process group when it returns
    text, outcome = execute(code, PythonConfig(processes=8, isolation="none"), sandbox.Sandbox("none", sys.executable))
    _cgroup_or_skip(outcome)
    assert _cgroup_bound(outcome, f"pids {8 + SANDBOX_PROCESSES}")
    started, error = text.splitlines()[1].split()
    # the shell that starts the run execs the code's interpreter: 1 task of the 12 is the code, 11 may be its children
    assert (int(started), int(error)) == (8 + SANDBOX_PROCESSES - 1, errno.EAGAIN), text


def test_nothing_of_an_unisolated_run_outlives_it():
    """Isolation "none": a child that leaves the run's session (setsid) escapes the kill of its process group, but not
    its cgroup, which is emptied before it is removed."""
    token = f"jaxseeker-escapee-{uuid.uuid4().hex}"
    code = (
        "import os, sys\n"
        "started_r, started_w = os.pipe()\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    waiter = 'import os, sys, time; os.write(int(sys.argv[1]), b\"x\"); time.sleep(60)'\n"
        "    os.set_inheritable(started_w, True)\n"
        f"    os.execv(sys.executable, [sys.executable, '-c', waiter, str(started_w), {token!r}])\n"
        "print(os.read(started_r, 1))"
    )
    text, outcome = execute(code, PythonConfig(isolation="none"), sandbox.Sandbox("none", sys.executable))
    _cgroup_or_skip(outcome)
    assert text == "stdout:\nb'x'"
    assert _survivors(token) == []


def _survivors(token: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if token.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
    return found


def test_sysv_ipc_is_refused(box):
    """SysV shared memory (and semaphore and message sets) lives in the kernel, outside every process's RLIMIT_AS:
    four 100 MB segments, attached and filled, were 400 MB that no per-process limit saw."""
    code = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.shmat.restype = ctypes.c_void_p\n"
        "made = 0\n"
        "for _ in range(4):\n"
        "    shmid = libc.shmget(0, 100 << 20, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600\n"
        "    if shmid < 0:\n        print('shmget', ctypes.get_errno())\n        break\n"
        "    address = libc.shmat(shmid, None, 0)\n"
        "    libc.shmctl(shmid, 0, None)  # IPC_RMID: gone once detached\n"
        "    ctypes.memset(address, 1, 100 << 20)\n"
        "    made += 1\n"
        "print('segments', made)\n"
        "print('semget', libc.semget(0, 1, 0o1600), ctypes.get_errno())\n"
        "print('msgget', libc.msgget(0, 0o1600), ctypes.get_errno())"
    )
    text, _ = execute(code, PythonConfig(), box)
    assert text == f"stdout:\nshmget {errno.EPERM}\nsegments 0\nsemget -1 {errno.EPERM}\nmsgget -1 {errno.EPERM}"


def test_memfds_are_refused(box):
    """memfd pages count in no process's RLIMIT_AS once unmapped: 40 memfds of 16 MB (file_mb) held 640 MB."""
    code = (
        "import os\n"
        "fds = []\n"
        "try:\n"
        "    for i in range(40):\n"
        "        fd = os.memfd_create(f'm{i}')\n"
        "        os.write(fd, b'x' * (16 << 20))\n"
        "        fds.append(fd)\n"
        "except OSError as exc:\n    print('refused', exc.errno)\n"
        "print(len(fds))"
    )
    text, _ = execute(code, PythonConfig(), box)
    assert text == f"stdout:\nrefused {errno.EPERM}\n0"


def test_open_descriptors_are_bounded(box):
    """Pipes hold up to 1 MB each in the kernel (F_SETPIPE_SZ): open_files bounds how many a process holds. With 32,
    the standard streams and the run's own descriptors leave room for at most 14 pipes (two descriptors each)."""
    code = (
        "import os\n"
        "pipes, error = 0, None\n"
        "for _ in range(200):\n"
        "    try:\n        os.pipe()\n    except OSError as exc:\n        error = exc.errno\n        break\n"
        "    pipes += 1\n"
        "print(pipes, error)"
    )
    text, _ = execute(code, PythonConfig(open_files=32), box)
    pipes, error = text.splitlines()[1].split()
    assert int(pipes) <= (32 - 3) // 2 and int(error) == errno.EMFILE, text


def test_the_run_is_the_oom_killers_first_choice(box):
    """oom_score_adj 1000 on every process of the run, written by the caller; the caller's own value is untouched.
    A caller with CAP_SYS_RESOURCE also makes 1000 the run's floor; without it, the run may go back to 0, its
    caller's floor, and never below."""
    caller_before = Path("/proc/self/oom_score_adj").read_text()
    code = (
        "import os\n"
        "print(open('/proc/self/oom_score_adj').read().strip(), flush=True)\n"
        "if os.fork() == 0:\n"
        "    print(open('/proc/self/oom_score_adj').read().strip(), flush=True)\n"
        "    os._exit(0)\n"
        "os.wait()\n"
        "for value in ('-1', '0'):\n"
        "    try:\n"
        "        with open('/proc/self/oom_score_adj', 'w') as f:\n            f.write(value)\n"
        "        print(value, 'set')\n"
        "    except OSError as exc:\n        print(value, 'refused', exc.errno)"
    )
    text, outcome = execute(code, PythonConfig(), box)
    floor = sandbox_bounds.holds_cap_sys_resource()
    assert text.splitlines()[1:] == [
        "1000",
        "1000",
        f"-1 refused {errno.EACCES}",
        f"0 refused {errno.EACCES}" if floor else "0 set",
    ]
    assert ("oom_score_adj 1000 (its floor)" if floor else "oom_score_adj 1000") in outcome.bounds
    assert Path("/proc/self/oom_score_adj").read_text() == caller_before


def test_where_a_runs_cgroup_goes(tmp_path):
    """Placement only (the kernel's enforcement is what the attacks above check): on cgroup v2 a run's cgroup goes
    below the root, else beside the caller's cgroup in a parent that enables memory and pids; a cgroup path outside
    a mount's root has no directory under it. A directory tree stands in for the cgroup2 mount."""
    (tmp_path / "cgroup.subtree_control").write_text("cpu memory pids\n")
    (tmp_path / "service").mkdir()
    (tmp_path / "service" / "cgroup.subtree_control").write_text("\n")
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "cgroup.subtree_control").write_text("cpu\n")
    (tmp_path / "user" / "app").mkdir()
    point = str(tmp_path)
    assert sandbox_bounds.v2_parent(tmp_path, point) == tmp_path
    assert sandbox_bounds.v2_parent(tmp_path / "service", point) == tmp_path
    with pytest.raises(OSError, match=r"user enables \['cpu'\] for its children, not memory and pids"):
        sandbox_bounds.v2_parent(tmp_path / "user" / "app", point)
    assert sandbox_bounds.cgroup_directory(point, "/", "/user/app") == tmp_path / "user" / "app"
    assert sandbox_bounds.cgroup_directory(point, "/user", "/user/app") == tmp_path / "app"
    assert sandbox_bounds.cgroup_directory(point, "/user", "/username") is None
