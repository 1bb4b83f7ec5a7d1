"""The `python` tool: output, errors, and the limits (time, CPU, memory, output, network, environment, scratch)."""

import logging
import time

import pytest

from jaxseeker.tools import PythonConfig, ToolRegistry, python_tool, run_python
from jaxseeker.tools.sandbox import SandboxUnavailable

pytestmark = pytest.mark.usefixtures("auto_sandbox")  # skipped without isolation, except in CI (sandbox_support)


def test_stdout_and_stderr_are_reported():
    assert run_python("print(sum(range(10)))") == "stdout:\n45"
    text = run_python("import sys\nprint('partial')\nprint('warn', file=sys.stderr)\nsys.exit(3)")
    assert text == "stdout:\npartial\nstderr:\nwarn\n[exit code 3]"


def test_an_exception_shows_a_traceback_of_the_code_only():
    text = run_python("x = 1\n1 / 0")
    assert text.startswith('stderr:\nTraceback (most recent call last):\n  File "main.py", line 2, in <module>')
    assert text.endswith("ZeroDivisionError: division by zero\n[exit code 1]")
    assert "<string>" not in text


def test_markdown_fences_are_stripped_and_silence_is_explained():
    assert run_python("```python\nprint('fenced')\n```") == "stdout:\nfenced"
    assert run_python("x = 2") == "[no output: print() the values you want to see]"


def test_an_infinite_loop_is_killed_by_the_cpu_limit():
    text = run_python("while True:\n    pass", PythonConfig(cpu_s=1, timeout_s=120))  # 1 s of CPU comes first
    assert text == "[killed by SIGXCPU: the CPU-time limit of 1 s was exceeded]"


def test_a_sleeping_process_and_its_children_are_killed_at_the_wall_clock_limit():
    code = "import subprocess, time\np = subprocess.Popen(['sleep', '60'])\ntime.sleep(60)"
    start = time.perf_counter()
    text = run_python(code, PythonConfig(timeout_s=2))  # `test_sandbox_attacks`: nothing of the run survives it
    assert time.perf_counter() - start < 60  # returned before the sleeps ended: it waited for no process
    assert text == "[killed: the wall-clock limit of 2 s was exceeded]"


def test_a_memory_bomb_is_stopped_and_reported():
    text = run_python("blocks = []\nwhile True:\n    blocks.append(bytearray(50_000_000))", PythonConfig(memory_mb=256))
    assert "MemoryError" in text
    assert text.endswith("[exit code 1: the memory limit of 256 MB was reached]")


def test_network_is_refused(server):
    code = (
        "import socket, urllib.request\n"
        f"for attempt in (lambda: socket.create_connection(('127.0.0.1', {server.url.rsplit(':', 1)[1]})),\n"
        f"                lambda: urllib.request.urlopen('{server.url}/x', timeout=1)):\n"
        "    try:\n        attempt()\n        print('connected')\n"
        "    except OSError as exc:\n        print('refused:', exc)"
    )
    text = run_python(code)
    assert text.count("refused:") == 2 and "connected" not in text
    assert server.requests == []


def test_isolation_none_runs_in_a_plain_process_with_a_warning_every_run(caplog, server):
    config = PythonConfig(isolation="none")
    tool = python_tool(config)
    assert tool.description.startswith("Run Python code in a fresh process")
    caplog.set_level(logging.WARNING, logger="jaxseeker.tools.sandbox")
    code = (
        f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {server.url.rsplit(':', 1)[1]}))\n"
        "except OSError as exc:\n    print(exc)"
    )
    for _ in range(2):
        assert (
            ToolRegistry([tool]).call("python", {"code": code}).text
            == "stdout:\nnetwork access is disabled in the python tool"
        )
    assert [r.message.split(" (")[0] for r in caplog.records] == ["the python tool runs WITHOUT isolation"] * 2


def test_without_isolation_the_tool_refuses_to_start_saying_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on it
    with pytest.raises(SandboxUnavailable) as caught:
        python_tool(PythonConfig(isolation="bwrap"))
    message = str(caught.value)
    assert message.startswith(
        "the python tool will not run without isolation and none works here "
        "(bwrap: bwrap is not installed): install bubblewrap (apt-get install bubblewrap)"
    )
    assert "tools.python.isolation: none (--unsafe-python)" in message and "\n" not in message


def test_the_description_states_what_the_sandbox_allows():
    text = python_tool(PythonConfig(timeout_s=5, processes=8)).description
    assert "no network and none of the machine's environment variables" in text
    assert "5 s wall clock" in text and "8 processes" in text


def test_long_output_is_truncated():
    text = run_python("print('x' * 100_000)", PythonConfig(output_chars=1000))
    assert text.startswith("stdout:\n" + "x" * 1000 + "\n[… output cut: 100001 bytes in all]")
    assert len(text) < 1100


def test_output_beyond_the_file_size_limit_stops_the_code():
    text = run_python("while True:\n    print('y' * 10_000)", PythonConfig(file_mb=1, output_chars=100, timeout_s=120))
    assert "File too large" in text
    assert text.endswith("the output / file size limit of 1 MB was reached]")


def test_environment_has_no_keys_and_cwd_is_a_fresh_scratch_dir(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    code = (
        "import os\n"
        "print(sorted(os.listdir('.')))\n"
        "open('note.txt', 'w').write('hi')\n"
        "print('sk-should-not-leak' in str(os.environ))"
    )
    assert run_python(code) == "stdout:\n['main.py']\nFalse"
    assert run_python(code) == "stdout:\n['main.py']\nFalse"  # the note of the first run is gone


def test_python_tool_through_the_registry():
    registry = ToolRegistry([python_tool(PythonConfig(timeout_s=60))])
    assert registry.call("python", {"code": "print(2 ** 10)"}).text == "stdout:\n1024"
    assert registry.call("python", {}).error == "missing required argument 'code' (string)"
