"""The `python` tool: run code in a sandbox (`sandbox.py`) with limits on time, CPU, memory, processes and files.

The code arrives on standard input and is written to main.py in the run's scratch directory; a prelude sets
RLIMIT_CPU, RLIMIT_AS, RLIMIT_FSIZE, RLIMIT_CORE, RLIMIT_NOFILE and (in a sandbox, where it counts the run's
processes only) RLIMIT_NPROC, then runs it. These bound each process; the run as a whole is bounded by a cgroup
where one can be made (`sandbox_bounds`: `memory_mb + scratch_mb + SANDBOX_MB` of memory, `processes +
SANDBOX_PROCESSES` tasks), and always gets oom_score_adj 1000. Isolation "none" runs the same prelude in a plain
subprocess, which also replaces the `socket` functions that resolve or connect: that is no barrier (`_socket`,
ctypes or a child process get through), so every such run logs a warning.
"""

from __future__ import annotations

import dataclasses
import re
import signal
import tempfile
from pathlib import Path
from typing import Any

from jaxseeker.tools import sandbox, sandbox_probe
from jaxseeker.tools.base import Tool, ToolError

PYTHON_PARAMETERS = {
    "type": "object",
    "properties": {"code": {"type": "string", "description": "Python code to run; print() what you want to see."}},
    "required": ["code"],
}


@dataclasses.dataclass(frozen=True)
class PythonConfig:
    """Limits and isolation of one run of the `python` tool."""

    timeout_s: float = 10.0  # wall clock; the whole sandbox is killed after it
    cpu_s: int = 10  # RLIMIT_CPU (SIGXCPU, then SIGKILL one second later)
    memory_mb: int = 1024  # RLIMIT_AS per process (MemoryError); the run's cgroup: this + scratch_mb + 64 MB in all
    file_mb: int = 16  # RLIMIT_FSIZE: the largest file the code may write, stdout and stderr included
    scratch_mb: int = 64  # the scratch directory's size (a tmpfs, in memory)
    processes: int = 32  # RLIMIT_NPROC: processes and threads of the run at once (its cgroup: this + 4)
    open_files: int = 64  # RLIMIT_NOFILE: descriptors open at once per process (pipes and sockets hold memory)
    output_chars: int = 8000  # stdout and stderr are each cut here in the observation
    max_code_chars: int = 100_000  # longer code is refused
    isolation: str = "auto"  # auto (bwrap, else unshare) | bwrap | unshare | none (no isolation: a warning per run)
    interpreter: str = ""  # the Python the code runs in; "": the one running jaxseeker

    def __post_init__(self) -> None:
        if self.isolation not in sandbox.ISOLATIONS:
            raise ValueError(f"tools.python.isolation: {self.isolation!r} is not one of {list(sandbox.ISOLATIONS)}")


_PRELUDE = """
import os, resource, sys, traceback
_code = b"".join(iter(lambda: os.read(0, 1 << 16), b"")).decode("utf-8")
os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
with open("main.py", "w", encoding="utf-8") as _f:
    _f.write(_code)
for _name, _soft, _hard in {limits!r}:
    resource.setrlimit(getattr(resource, _name), (_soft, _hard))
{no_socket}
_code = compile(_code, "main.py", "exec")
sys.argv = ["main.py"]
try:
    exec(_code, {{"__name__": "__main__", "__builtins__": __builtins__}})
except SystemExit:
    raise
except BaseException as _exc:
    traceback.print_exception(type(_exc), _exc, _exc.__traceback__.tb_next)
    sys.exit(1)
"""
_NO_SOCKET = """
import socket
def _no_network(*args, **kwargs):
    raise OSError("network access is disabled in the python tool")
for _name in ("connect", "connect_ex", "sendto", "sendmsg"):
    setattr(socket.socket, _name, _no_network)
for _name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "create_connection"):
    setattr(socket, _name, _no_network)
"""
SANDBOX_MB = 64  # the back-end's own processes (bwrap, or the unshare launcher's three small Pythons)
SANDBOX_PROCESSES = 4  # the back-end's processes, beside the code's
_FENCE = re.compile(r"\A\s*```(?:python|py)?[ \t]*\n(.*?)\n?```\s*\Z", re.DOTALL)


def prelude(config: PythonConfig, isolated: bool) -> str:
    """The program the interpreter runs: read the code from stdin, set the limits, run it as main.py."""
    memory, fsize = config.memory_mb << 20, config.file_mb << 20
    limits = [
        ("RLIMIT_CPU", config.cpu_s, config.cpu_s + 1),
        ("RLIMIT_AS", memory, memory),
        ("RLIMIT_FSIZE", fsize, fsize),
        ("RLIMIT_CORE", 0, 0),
        ("RLIMIT_NOFILE", config.open_files, config.open_files),
    ]
    if isolated:  # outside a user namespace the limit would count every process of the user
        limits.append(("RLIMIT_NPROC", config.processes, config.processes))
    return _PRELUDE.format(limits=limits, no_socket="" if isolated else _NO_SOCKET)


def _read_output(path: Path, max_chars: int, *, tail: bool = False) -> str:
    size = path.stat().st_size
    budget = max_chars * 4  # bytes: a UTF-8 character takes at most four
    with path.open("rb") as f:
        if tail:
            f.seek(max(0, size - budget))
        text = f.read(budget).decode("utf-8", errors="replace")
    if len(text) <= max_chars and size <= budget:
        return text
    if tail:
        return f"[… output cut: {size} bytes in all]\n" + text[-max_chars:]
    return text[:max_chars] + f"\n[… output cut: {size} bytes in all]"


def run_memory_mb(config: PythonConfig) -> int:
    """The memory of a run as a whole (every process, its scratch files and the sandbox's own processes) when a
    cgroup bounds it."""
    return config.memory_mb + config.scratch_mb + SANDBOX_MB


def _memory_note(outcome: sandbox.Outcome, config: PythonConfig) -> str:
    if not outcome.oom_kills:
        return ""
    killed = f"{outcome.oom_kills} process{'es' if outcome.oom_kills > 1 else ''}"
    return f"[{killed} of the run killed: together they reached the run's memory limit of {run_memory_mb(config)} MB]"


def _status(outcome: sandbox.Outcome, config: PythonConfig, stderr: str, output_full: bool) -> str:
    returncode, timed_out = outcome.returncode, outcome.timed_out
    if timed_out:
        return f"[killed: the wall-clock limit of {config.timeout_s:g} s was exceeded]"
    if returncode is not None and returncode < 0:
        try:
            sig = signal.Signals(-returncode)
        except ValueError:
            return f"[killed by signal {-returncode}]"
        if sig == signal.SIGXCPU:
            return f"[killed by SIGXCPU: the CPU-time limit of {config.cpu_s} s was exceeded]"
        return f"[killed by {sig.name}]"
    if "MemoryError" in stderr:
        return f"[exit code {returncode}: the memory limit of {config.memory_mb} MB was reached]"
    if "File too large" in stderr or output_full:
        return f"[exit code {returncode}: the output / file size limit of {config.file_mb} MB was reached]"
    return f"[exit code {returncode}]" if returncode else ""


def run_python(code: str, config: PythonConfig = PythonConfig(), box: sandbox.Sandbox | None = None) -> str:
    """Run `code` in a fresh sandbox (`box`, default: the one `config.isolation` resolves to); the observation:
    stdout, stderr and how the run ended."""
    return execute(code, config, box)[0]


def execute(
    code: str, config: PythonConfig = PythonConfig(), box: sandbox.Sandbox | None = None
) -> tuple[str, sandbox.Outcome]:
    """`run_python`'s observation and the run's outcome, which names the bounds on the run as a whole that applied
    (a cgroup's, or why there was none; oom_score_adj)."""
    fenced = _FENCE.match(code)
    if fenced:
        code = fenced.group(1)
    if len(code) > config.max_code_chars:
        raise ToolError(f"code has {len(code)} characters; the limit is {config.max_code_chars}")
    box = box or sandbox_probe.resolve(config.isolation, config.interpreter)
    if box.backend == "none":
        sandbox.warn_unisolated()
    argv = [box.interpreter, "-I", "-c", prelude(config, isolated=box.backend != "none")]
    with tempfile.TemporaryDirectory(prefix="jaxseeker-python-") as root:
        work, source, out, err = Path(root, "work"), Path(root, "main.py"), Path(root, "stdout"), Path(root, "stderr")
        work.mkdir()
        source.write_text(code, encoding="utf-8")
        with source.open("rb") as in_f, out.open("wb") as out_f, err.open("wb") as err_f:
            outcome = sandbox.run(
                box,
                argv,
                stdin=in_f,
                stdout=out_f,
                stderr=err_f,
                timeout_s=config.timeout_s,
                scratch_mb=config.scratch_mb,
                cwd=str(work),
                memory_mb=run_memory_mb(config),
                processes=config.processes + SANDBOX_PROCESSES,
            )
        stdout, stderr = _read_output(out, config.output_chars), _read_output(err, config.output_chars, tail=True)
        output_full = max(out.stat().st_size, err.stat().st_size) >= config.file_mb << 20
    parts = []
    if stdout:
        parts.append(f"stdout:\n{stdout.rstrip()}")
    if stderr:
        parts.append(f"stderr:\n{stderr.rstrip()}")
    parts += [note for note in (_memory_note(outcome, config), _status(outcome, config, stderr, output_full)) if note]
    return ("\n".join(parts) if parts else "[no output: print() the values you want to see]"), outcome


def describe(config: PythonConfig, box: sandbox.Sandbox) -> str:
    """The tool's description to the model: what the code can and cannot do there."""
    limits = (
        f"limits: {config.timeout_s:g} s wall clock, {config.cpu_s} s CPU, {config.memory_mb} MB memory, "
        f"files up to {config.file_mb} MB"
    )
    if box.backend == "none":
        return f"Run Python code in a fresh process and return its printed output ({limits})."
    return (
        f"Run Python code in a fresh sandbox and return its printed output. The sandbox has no network and none "
        f"of the machine's environment variables; it sees the Python standard library and installed packages "
        f"(read-only) and a private scratch directory of {config.scratch_mb} MB (the working directory, also "
        f"/tmp) that is emptied after each run, and nothing else of the machine; {limits}, "
        f"{config.processes} processes."
    )


def python_tool(config: PythonConfig = PythonConfig()) -> Tool:
    """The `python` tool: `code` → stdout / stderr of a sandboxed run; SandboxUnavailable (one line: why, and how to
    install bubblewrap) when `config.isolation` cannot be had here."""
    box = sandbox_probe.resolve(config.isolation, config.interpreter)

    def fn(args: dict[str, Any]) -> str:
        return run_python(args["code"], config, box)

    return Tool("python", describe(config, box), PYTHON_PARAMETERS, fn)
