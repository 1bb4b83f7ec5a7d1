"""Fake CPU devices (`--xla_force_host_platform_device_count`) that do not deadlock on a small machine.

XLA:CPU runs a step's independent thunks concurrently on one intra-op thread pool shared by all the fake
devices, and a collective blocks its pool thread until every device reaches it. When a step has a
collective inside a `while` (the scan over layers) and another outside it, one device can be blocked in
both while another has not yet started either; with a pool of `cores` threads (2 here) the waiting
collectives hold every thread and the rest never run: the process aborts after XLA's 40 s rendezvous
timeout ("Expected 8 threads to join the rendezvous, but only 6 of them arrived"). The PjRt CPU client
sizes that pool from `PJRT_NPROC` when it is set, so giving it a few threads per fake device removes the
deadlock. It must be set before JAX creates its CPU backend.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

THREADS_PER_DEVICE = 4  # a device can hold a blocked collective per concurrent branch; 2 were seen at once
_DEVICE_COUNT = re.compile(r"--xla_force_host_platform_device_count=(\d+)")


def forced_device_count(xla_flags: str) -> int | None:
    """The `--xla_force_host_platform_device_count` in an `XLA_FLAGS` string, or None."""
    matches = _DEVICE_COUNT.findall(xla_flags)
    return int(matches[-1]) if matches else None


def cpu_pool_size(devices: int) -> int:
    """Intra-op threads that let `devices` fake devices block in collectives without starving each other."""
    return max(os.cpu_count() or 1, THREADS_PER_DEVICE * devices)


def size_cpu_thread_pool(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables to add to `env` (default: this process's) so its fake CPU devices get a large enough
    pool: `{"PJRT_NPROC": …}` when `XLA_FLAGS` forces more than one device and no pool size is set, else {}."""
    env = os.environ if env is None else env
    devices = forced_device_count(env.get("XLA_FLAGS", ""))
    if devices is None or devices < 2 or "PJRT_NPROC" in env or "NPROC" in env:
        return {}
    return {"PJRT_NPROC": str(cpu_pool_size(devices))}


def fake_cpu_devices_env(devices: int, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of `env` (default: this process's) for a new interpreter that sees `devices` CPU devices."""
    env = dict(os.environ if env is None else env)
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}".strip()
    env["JAX_PLATFORMS"] = "cpu"
    env.update(size_cpu_thread_pool(env))
    return env
