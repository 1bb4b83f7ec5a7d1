"""The `python` tool: run code in a limited subprocess (time, CPU, memory, file size, output, no network).

Isolation is best effort and needs no root: a fresh `sys.executable -I` process in its own session and a fresh
scratch directory as cwd, with a clean environment (no API keys; proxies pointed at a closed port). A prelude sets
RLIMIT_CPU, RLIMIT_AS, RLIMIT_FSIZE and RLIMIT_CORE before the code runs and replaces the `socket` functions that
resolve or connect (`getaddrinfo`, `create_connection`, `socket.connect`, `sendto`, …) by ones that raise OSError.
Code that reaches `_socket` directly or starts other programs can still get out; this is not a security sandbox.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from jaxseeker.tools.base import Tool, ToolError

PYTHON_PARAMETERS = {
    "type": "object",
    "properties": {"code": {"type": "string", "description": "Python code to run; print() what you want to see."}},
    "required": ["code"],
}


@dataclasses.dataclass(frozen=True)
class PythonConfig:
    """Limits of one run of the `python` tool."""

    timeout_s: float = 10.0  # wall clock; the process group is killed after it
    cpu_s: int = 10  # RLIMIT_CPU (SIGXCPU, then SIGKILL one second later)
    memory_mb: int = 1024  # RLIMIT_AS: allocations beyond it fail (MemoryError)
    file_mb: int = 16  # RLIMIT_FSIZE: the largest file the code may write, stdout and stderr included
    output_chars: int = 8000  # stdout and stderr are each cut here in the observation
    max_code_chars: int = 100_000


_PRELUDE = """
import resource, socket, sys, traceback
for _limit, _value in ((resource.RLIMIT_CPU, ({cpu}, {cpu} + 1)), (resource.RLIMIT_AS, ({mem}, {mem})),
                       (resource.RLIMIT_FSIZE, ({fsize}, {fsize})), (resource.RLIMIT_CORE, (0, 0))):
    resource.setrlimit(_limit, _value)
def _no_network(*args, **kwargs):
    raise OSError("network access is disabled in the python tool")
for _name in ("connect", "connect_ex", "sendto", "sendmsg"):
    setattr(socket.socket, _name, _no_network)
for _name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "create_connection"):
    setattr(socket, _name, _no_network)
with open("main.py", encoding="utf-8") as _f:
    _code = compile(_f.read(), "main.py", "exec")
sys.argv = ["main.py"]
try:
    exec(_code, {{"__name__": "__main__", "__builtins__": __builtins__}})
except SystemExit:
    raise
except BaseException as _exc:
    traceback.print_exception(type(_exc), _exc, _exc.__traceback__.tb_next)
    sys.exit(1)
"""

_CLOSED_PROXY = "http://127.0.0.1:9"
_FENCE = re.compile(r"\A\s*```(?:python|py)?[ \t]*\n(.*?)\n?```\s*\Z", re.DOTALL)


def _sandbox_env(home: str) -> dict[str, str]:
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    for name in ("http_proxy", "https_proxy", "all_proxy", "ftp_proxy"):
        env[name] = env[name.upper()] = _CLOSED_PROXY
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[name] = "1"
    return env


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


def _status(returncode: int | None, timed_out: bool, config: PythonConfig, stderr: str, output_full: bool) -> str:
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


def run_python(code: str, config: PythonConfig = PythonConfig()) -> str:
    """Run `code` in a fresh limited subprocess; the observation: stdout, stderr and how the run ended."""
    fenced = _FENCE.match(code)
    if fenced:
        code = fenced.group(1)
    if len(code) > config.max_code_chars:
        raise ToolError(f"code has {len(code)} characters; the limit is {config.max_code_chars}")
    prelude = _PRELUDE.format(cpu=config.cpu_s, mem=config.memory_mb << 20, fsize=config.file_mb << 20)
    with tempfile.TemporaryDirectory(prefix="jaxseeker-python-") as root:
        work, out, err = Path(root, "work"), Path(root, "stdout"), Path(root, "stderr")
        work.mkdir()
        (work / "main.py").write_text(code, encoding="utf-8")
        timed_out = False
        with out.open("wb") as out_f, err.open("wb") as err_f:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-c", prelude],
                cwd=work,
                env=_sandbox_env(str(work)),
                stdin=subprocess.DEVNULL,
                stdout=out_f,
                stderr=err_f,
                start_new_session=True,
            )
            try:
                proc.wait(timeout=config.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # the process and anything it started
            proc.wait()
        stdout, stderr = _read_output(out, config.output_chars), _read_output(err, config.output_chars, tail=True)
        output_full = max(out.stat().st_size, err.stat().st_size) >= config.file_mb << 20
    parts = []
    if stdout:
        parts.append(f"stdout:\n{stdout.rstrip()}")
    if stderr:
        parts.append(f"stderr:\n{stderr.rstrip()}")
    status = _status(proc.returncode, timed_out, config, stderr, output_full)
    if status:
        parts.append(status)
    return "\n".join(parts) if parts else "[no output: print() the values you want to see]"


def python_tool(config: PythonConfig = PythonConfig()) -> Tool:
    """The `python` tool: `code` → stdout / stderr of a limited subprocess run."""

    def fn(args: dict[str, Any]) -> str:
        return run_python(args["code"], config)

    description = (
        "Run Python code in a fresh sandbox (no network, time and memory limits) and return its printed output."
    )
    return Tool("python", description, PYTHON_PARAMETERS, fn)
