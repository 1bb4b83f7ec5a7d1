"""The `python` tool: output, errors, and the limits (time, CPU, memory, output, network, environment, scratch)."""

import time

from jaxseeker.tools import PythonConfig, ToolRegistry, python_tool, run_python


def is_running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


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
    text = run_python("while True:\n    pass", PythonConfig(cpu_s=1, timeout_s=10))
    assert text == "[killed by SIGXCPU: the CPU-time limit of 1 s was exceeded]"


def test_a_sleeping_process_and_its_children_are_killed_at_the_wall_clock_limit(tmp_path):
    marker = tmp_path / "child.pid"
    code = (
        "import subprocess, time\n"
        "p = subprocess.Popen(['sleep', '30'])\n"
        f"open({str(marker)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(30)"
    )
    start = time.perf_counter()
    # 2 s: time for the interpreter to start and write the marker even on a loaded machine, far below the 30 s sleeps
    text = run_python(code, PythonConfig(timeout_s=2))
    assert time.perf_counter() - start < 10
    assert text == "[killed: the wall-clock limit of 2 s was exceeded]"
    child = int(marker.read_text())
    deadline = time.monotonic() + 2
    while is_running(child) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not is_running(child)


def test_a_memory_bomb_is_stopped_and_reported():
    text = run_python("blocks = []\nwhile True:\n    blocks.append(bytearray(50_000_000))", PythonConfig(memory_mb=256))
    assert "MemoryError" in text
    assert text.endswith("[exit code 1: the memory limit of 256 MB was reached]")


def test_network_is_refused(server):
    server.route = lambda request: None  # never called
    code = (
        "import socket, urllib.request\n"
        f"for attempt in (lambda: socket.create_connection(('127.0.0.1', {server.url.rsplit(':', 1)[1]})),\n"
        f"                lambda: urllib.request.urlopen('{server.url}/x', timeout=1)):\n"
        "    try:\n        attempt()\n        print('connected')\n"
        "    except OSError as exc:\n        print('refused:', exc)"
    )
    text = run_python(code)
    assert text.count("refused:") == 2 and "connected" not in text
    assert "network access is disabled in the python tool" in text
    assert server.requests == []


def test_long_output_is_truncated():
    text = run_python("print('x' * 100_000)", PythonConfig(output_chars=1000))
    assert text.startswith("stdout:\n" + "x" * 1000 + "\n[… output cut: 100001 bytes in all]")
    assert len(text) < 1100


def test_output_beyond_the_file_size_limit_stops_the_code():
    text = run_python("while True:\n    print('y' * 10_000)", PythonConfig(file_mb=1, output_chars=100, timeout_s=10))
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
    registry = ToolRegistry([python_tool(PythonConfig(timeout_s=5))])
    assert registry.call("python", {"code": "print(2 ** 10)"}).text == "stdout:\n1024"
    assert registry.call("python", {}).error == "missing required argument 'code' (string)"
