"""The start-up probe accepts a back-end only when it proves isolation: a `bwrap` on PATH that runs the command on
the host (a wrapper that execs it, or one that adds a user namespace and so prints the expected uid 1000) is refused.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_support import isolation

from jaxseeker.tools import sandbox, sandbox_probe

# bwrap is started as nobody when the caller is root (see sandbox.py): the probe's Python must be one nobody can run
INTERPRETER = "/usr/bin/python3" if os.geteuid() == 0 else sys.executable
SKIP_OPTIONS = 'while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do shift; done\nshift\n'
FAKES = {
    "exec": 'exec "$@"\n',
    # the uid inside is 1000, as the real bwrap gives: a check of the uid alone accepted this one
    "user-namespace-only": 'exec unshare --user --map-user=1000 --map-group=1000 -- "$@"\n',
}


@pytest.fixture
def fake_bwrap_dir() -> Iterator[Path]:
    """A directory that nobody may enter (it runs bwrap when the caller is root), for a fake `bwrap`."""
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="jaxseeker-fake-bwrap-") as tmp:
        os.chmod(tmp, 0o755)
        yield Path(tmp)


@pytest.mark.parametrize("fake", sorted(FAKES))
def test_a_bwrap_that_does_not_isolate_is_refused(fake, fake_bwrap_dir, monkeypatch):
    if not os.path.exists(INTERPRETER):
        pytest.skip(f"{INTERPRETER} is missing: nothing nobody can run for the probe")
    if fake == "user-namespace-only" and shutil.which("unshare") is None:
        pytest.skip("util-linux's unshare is not installed")
    script = fake_bwrap_dir / "bwrap"
    script.write_text("#!/bin/sh\n" + SKIP_OPTIONS + FAKES[fake])
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_bwrap_dir}:{os.environ['PATH']}")
    assert shutil.which("bwrap") == str(script)
    with pytest.raises(sandbox.SandboxUnavailable) as refused:
        sandbox_probe.resolve("bwrap", INTERPRETER)
    message = str(refused.value)
    assert "bwrap: it does not isolate:" in message
    for phrase in ("not in a PID namespace of its own", "shares the caller's pid namespace", "shares the caller's mnt"):
        assert phrase in message, message
    assert "it sees the host file" in message and "it sees the network interfaces" in message, message
    # the user-namespace fake passes the uid check and the user namespace check: the others refuse it
    assert ("it ran as uid" in message) == (fake == "exec" and os.geteuid() != 1000), message
    assert ("shares the caller's user namespace" in message) == (fake == "exec"), message


@pytest.mark.parametrize("backend", sandbox.BACKENDS)
def test_the_real_back_ends_pass_the_probe(backend):
    """Each check of the probe, on the real back-ends: a PID namespace of its own, no host file, loopback only."""
    box = isolation(backend, (sys.executable, INTERPRETER))
    assert sandbox_probe.try_backend(box.backend, box.interpreter) is None


def test_the_probes_report_of_the_host_names_every_leak():
    """`problems` on a report as the host itself would give it: every check fails, each with its own phrase."""
    seen = {
        "uid": os.getuid(),
        "pid": os.getpid(),
        "sees_caller": True,
        "sees_marker": True,
        "namespaces": {name: os.readlink(f"/proc/self/ns/{name}") for name in sandbox_probe.NAMESPACES},
        "interfaces": ["eth0", "lo"],
    }
    found = sandbox_probe.problems(seen, os.getpid(), "/tmp/marker")
    assert found == [
        *([f"it ran as uid {os.getuid()}, not 1000"] if os.getuid() != 1000 else []),
        f"it ran as pid {os.getpid()}, not in a PID namespace of its own",
        f"it sees the caller's pid {os.getpid()}",
        "it shares the caller's pid namespace",
        "it shares the caller's user namespace",
        "it shares the caller's mnt namespace",
        "it shares the caller's net namespace",
        "it sees the host file /tmp/marker",
        "it sees the network interfaces ['eth0', 'lo']",
    ]
