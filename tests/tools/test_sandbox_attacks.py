"""Attacks on the python tool, each refused by its sandbox, under every back-end (bwrap, unshare) this machine has.

Only loopback is used: the listeners live in this test process, and a connection that got through would reach
them. Every loop is bounded.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from sandbox_support import isolation

from jaxseeker.tools import PythonConfig, run_python, sandbox, seccomp

pytestmark = pytest.mark.heavy  # a minute or more of CPU: runs first (tests/conftest.py)

SECRET = "hf_5ecret0123456789abcdefTOKEN"
ROOT = str(Path(__file__).parents[2])
# the Python under test first; a system one for bwrap as root, which starts bwrap as nobody (see sandbox.py)
INTERPRETERS = (sys.executable, *(p for p in ("/usr/bin/python3",) if os.path.exists(p)))


@pytest.fixture(params=sandbox.BACKENDS)
def box(request) -> sandbox.Sandbox:
    return isolation(request.param, INTERPRETERS)


def run(box: sandbox.Sandbox, code: str, **limits) -> str:
    return run_python(code, PythonConfig(**limits), box)


def run_in_a_host_process(
    box: sandbox.Sandbox, code: str, *, env: dict[str, str] | None = None, setup: str = ""
) -> str:
    """The observation of `code` run by a fresh process (a rollout's stand-in) started with `env` in its environment
    after `setup` (which may set KEY_ID, replaced in `code`); that process must exit normally."""
    script = (
        "import sys\n"
        "from jaxseeker.tools import PythonConfig, run_python, sandbox\n"
        f"KEY_ID = 0\n{setup}\n"
        "code = sys.argv[1].replace('KEY_ID', str(KEY_ID))\n"
        "print(run_python(code, PythonConfig(), sandbox.Sandbox(sys.argv[2], sys.argv[3])), end='')"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, code, box.backend, box.interpreter],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ | {"PYTHONPATH": ROOT} | (env or {}),
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_parents_environment_and_secrets_are_out_of_reach(box):
    code = (
        "import os, glob\n"
        "print(sorted(os.environ))\n"
        "for path in [f'/proc/{os.getppid()}/environ', *glob.glob('/proc/*/environ')]:\n"
        "    try:\n        print(path, open(path, 'rb').read())\n"
        "    except OSError as exc:\n        print(path, type(exc).__name__)"
    )
    text = run_in_a_host_process(box, code, env={"HF_TOKEN": SECRET})
    assert SECRET not in text and "HF_TOKEN" not in text
    assert text.splitlines()[1] == str(sorted(sandbox.environment(box.interpreter)))


def test_no_connection_reaches_a_loopback_listener(box):
    with socket.socket() as listener, socket.socket(socket.AF_UNIX) as abstract:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        name = f"\0jaxseeker-test-{uuid.uuid4().hex}"
        abstract.bind(name)
        abstract.listen(8)
        code = (
            "import _socket, ctypes, socket, struct, subprocess, sys\n"
            "def attempt(label, fn):\n"
            "    try:\n        fn()\n        print(label, 'connected')\n"
            "    except OSError as exc:\n        print(label, 'refused', exc.errno)\n"
            f"attempt('_socket', lambda: _socket.socket().connect(('127.0.0.1', {port})))\n"
            "def libc_connect():\n"
            "    libc = ctypes.CDLL(None, use_errno=True)\n"
            "    fd = libc.socket(2, 1, 0)\n"
            f"    address = struct.pack('!HH4s8x', 2, {port}, bytes([127, 0, 0, 1]))\n"
            "    address = struct.pack('<H', 2) + address[2:]\n"
            "    if libc.connect(fd, address, len(address)) != 0:\n"
            "        raise OSError(ctypes.get_errno(), 'libc connect')\n"
            "attempt('ctypes', libc_connect)\n"
            f"attempt('unix', lambda: socket.socket(socket.AF_UNIX).connect({name!r}))\n"
            "child = subprocess.run([sys.executable, '-c', 'import socket; "
            f'socket.create_connection(("127.0.0.1", {port}), timeout=2)\'], capture_output=True, text=True)\n'
            "print('child', 'connected' if child.returncode == 0 else 'refused')"
        )
        text = run(box, code)
        for sock in (listener, abstract):
            sock.setblocking(False)
            with pytest.raises(BlockingIOError):  # nothing is waiting to be accepted
                sock.accept()
    assert "connected" not in text
    assert [line.split()[:2] for line in text.splitlines()[1:]] == [
        ["_socket", "refused"],
        ["ctypes", "refused"],
        ["unix", "refused"],
        ["child", "refused"],
    ]


def _host_allows(family: int) -> bool:
    try:
        socket.socket(family, socket.SOCK_STREAM if family == socket.AF_VSOCK else socket.SOCK_SEQPACKET).close()
        return True
    except OSError:
        return False


def test_socket_families_outside_the_network_namespace_are_refused(box):
    families = [int(f) for f in (socket.AF_VSOCK, socket.AF_ALG) if _host_allows(f)]
    if not families:
        pytest.skip("this host allows neither AF_VSOCK nor AF_ALG sockets, so the filter cannot be told apart")
    code = (
        "import socket\n"
        f"for family in {families}:\n"
        "    try:\n"
        "        socket.socket(family, socket.SOCK_STREAM if family == socket.AF_VSOCK else socket.SOCK_SEQPACKET)\n"
        "        print(family, 'opened')\n"
        "    except OSError as exc:\n        print(family, exc.errno)"
    )
    import errno

    assert run(box, code) == "stdout:\n" + "\n".join(f"{f} {errno.EAFNOSUPPORT}" for f in families)


def test_the_session_keyring_of_the_parent_is_out_of_reach(box):
    """A key in the caller's session keyring: readable through namespaces alone, refused by the seccomp filter."""
    numbers = seccomp._ARCHES[os.uname().machine][1]
    setup = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        f"assert libc.syscall({numbers['keyctl']}, 1, None) > 0  # KEYCTL_JOIN_SESSION_KEYRING: a new one\n"
        f"KEY_ID = libc.syscall({numbers['add_key']}, b'user', b'jaxseeker-test', b'{SECRET}', {len(SECRET)}, -3)\n"
        "assert KEY_ID > 0, ctypes.get_errno()"
    )
    code = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "buf = ctypes.create_string_buffer(100)\n"
        f"n = libc.syscall({numbers['keyctl']}, 11, KEY_ID, buf, 100)  # KEYCTL_READ\n"
        "print(n, ctypes.get_errno(), buf.raw[:max(n, 0)])"
    )
    assert run_in_a_host_process(box, code, setup=setup) == "stdout:\n-1 1 b''"  # EPERM


def test_the_parent_survives_kill_attempts(box):
    code = (
        "import os, signal\n"
        "for pid in (os.getppid(), 0):\n"
        "    try:\n        os.kill(pid, signal.SIGKILL)\n"
        "    except OSError as exc:\n        print(pid, exc)"
    )
    # the host process printed the observation and exited normally; kill(0) reached the code's own processes only
    assert run_in_a_host_process(box, code).endswith("[killed by SIGKILL]")


def _survivors(token: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


@pytest.mark.parametrize("ending", ["timeout", "exit"])
def test_nothing_of_a_run_outlives_it(box, ending):
    """setsid + double fork: the grandchild says it started, then would say it is alive after the run ends (8 s
    after it starts when the run ends at its 6 s timeout, 4 s when the run exits at once); it must be gone from the
    process table as soon as the run returns, and never write again. The timeout leaves a loaded machine time to
    start Python."""
    token = f"jaxseeker-survivor-{uuid.uuid4().hex}"  # in the code, so in the command line of all its processes
    code = (
        f"# {token}\n"
        "import os, time\n"
        "started_r, started_w = os.pipe()\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        os.write(1, b'STARTED\\n')\n"
        "        os.write(started_w, b'x')\n"
        f"        time.sleep({8 if ending == 'timeout' else 4})\n"
        "        os.write(1, b'ALIVE\\n')\n"
        "    os._exit(0)\n"
        "os.read(started_r, 1)\n"
        f"{'time.sleep(60)' if ending == 'timeout' else ''}\n"
    )
    argv = [box.interpreter, "-I", "-c", code]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, open(os.devnull, "rb") as null:
        timeout_s = 6 if ending == "timeout" else 30
        outcome = sandbox.run(box, argv, stdin=null, stdout=out, stderr=err, timeout_s=timeout_s)
        assert outcome.timed_out == (ending == "timeout")
        assert _survivors(token) == []
        deadline = time.monotonic() + 5  # the grandchild would have written by then
        while time.monotonic() < deadline:
            out.seek(0)
            assert out.read() == b"STARTED\n"
            time.sleep(0.1)
        err.seek(0)
        assert err.read() == b""


def test_a_fork_bomb_is_bounded(box):
    code = (
        "import os, time\n"
        "started, error = 0, None\n"
        "for _ in range(200):\n"
        "    try:\n        pid = os.fork()\n"
        "    except OSError as exc:\n        error = exc.strerror\n        break\n"
        "    if pid == 0:\n        time.sleep(3)\n        os._exit(0)\n"
        "    started += 1\n"
        "print(started, error)"
    )
    text = run(box, code, processes=16)
    started, error = text.removeprefix("stdout:\n").split(" ", 1)
    assert int(started) < 16 and error == "Resource temporarily unavailable"


def test_only_the_scratch_directory_and_the_python_installation_are_visible(box, tmp_path):
    beside = tmp_path / "beside.txt"
    beside.write_text("next to the run")
    code = (
        "import os\n"
        f"for path in ('/etc/passwd', '/root/.bashrc', {str(beside)!r}, {__file__!r}, '/home', '/var'):\n"
        "    try:\n        open(path).read()\n        print('read', path)\n"
        "    except OSError as exc:\n        print(type(exc).__name__, path)\n"
        "print(sorted(os.listdir('/')))\n"
        "print([os.path.join(d, n) for d in ('/root', '/work', '/home', '/opt') if os.path.isdir(d)\n"
        "       for n in os.listdir(d)])"
    )
    lines = run(box, code).splitlines()[1:]
    assert [line.split()[0] for line in lines[:-2]] == ["FileNotFoundError"] * 6, lines
    binds = sandbox.python_paths(box.interpreter)
    tops = {path.split("/")[1] for path in binds}
    assert set(eval(lines[-2])) <= {
        "bin",
        "dev",
        "lib",
        "lib32",
        "lib64",
        "libx32",
        "proc",
        "sbin",
        "scratch",
        "tmp",
        "usr",
        *tops,
    }
    for path in eval(lines[-1]):  # in a directory on the way to the Python installation: only that way
        assert any(b == path or b.startswith(path + "/") for b in binds), path


def test_only_the_scratch_directory_is_writable(box):
    code = (
        "import os, sys\n"
        "for path in ('/x', '/usr/x', sys.prefix + '/x', '/dev/x', '/proc/x', '/root/x'):\n"
        "    try:\n        open(path, 'w').write('x')\n        print(path, 'written')\n"
        "    except OSError as exc:\n        print(path, 'refused')\n"
        "open(os.path.join(os.environ['TMPDIR'], 'note'), 'w').write('scratch')\n"
        "try:\n    open('/tmp/other', 'w').write('x')\n    print('/tmp written', os.path.exists('other'))\n"
        "except OSError as exc:\n    print('/tmp refused')\n"
        "print(os.getcwd(), open('note').read())"
    )
    lines = run(box, code).splitlines()[1:]
    assert [line.split()[-1] for line in lines[:-2]] == ["refused"] * 6
    # /tmp is the scratch, unless the interpreter lives under /tmp: then it is that bind's read-only directory
    under_tmp = sandbox.tmp_holds_a_bind(sandbox.layout(box.interpreter)[0])
    assert lines[-2] == ("/tmp refused" if under_tmp else "/tmp written True")
    assert lines[-1] == "/scratch scratch"


def test_the_code_holds_no_privilege_and_cannot_nest_namespaces(box):
    code = (
        "import ctypes\n"
        "status = dict(line.split(':', 1) for line in open('/proc/self/status'))\n"
        "print([status[k].strip() for k in ('Uid', 'CapEff', 'CapPrm', 'NoNewPrivs', 'Seccomp')])\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.unshare(0x10000000), ctypes.get_errno() != 0)  # CLONE_NEWUSER\n"
        "print(len(open('/proc/self/uid_map').read().splitlines()))"
    )
    assert run(box, code) == (
        "stdout:\n['1000\\t1000\\t1000\\t1000', '0000000000000000', '0000000000000000', '1', '2']\n-1 True\n1"
    )


def test_an_interpreter_under_tmp_runs_and_writes_to_the_scratch():
    """A venv under /tmp is bound into the sandbox's /tmp, which then stays a read-only directory: code still runs
    and writes its temporary files to the scratch (TMPDIR)."""
    base = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable  # bwrap as root: see above
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        os.chmod(tmp, 0o755)  # readable by the user bwrap runs as
        venv = Path(tmp) / "venv"
        subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        for backend in sandbox.BACKENDS:
            box = isolation(backend, (str(venv / "bin" / "python"),))
            code = "import sys, tempfile\nwith tempfile.NamedTemporaryFile() as f:\n    print(sys.prefix, f.name)"
            out = run(box, code)
            prefix, name = out.splitlines()[-1].split()  # the observation: "stdout:" then the printed line
            assert (prefix, os.path.dirname(name)) == (str(venv), "/scratch"), (backend, out)
