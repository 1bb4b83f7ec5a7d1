"""Run a test's worker script in a new interpreter that sees fake CPU devices (the device-count flag must be set
before JAX starts, so a test that needs a mesh of several devices runs its part in a subprocess)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jaxseeker.parallel.cpu_devices import fake_cpu_devices_env


def run_worker(worker: Path, devices: int, *args: str, timeout: int = 600) -> tuple[dict, str]:
    """The JSON of the worker's last stdout line and its stderr; the test fails with the stderr's tail when the
    worker exits non-zero."""
    proc = subprocess.run(
        [sys.executable, str(worker), *args],
        env=fake_cpu_devices_env(devices),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(f"{worker.name} {' '.join(args)} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr
