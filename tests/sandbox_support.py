"""Kernel isolation for the tests of the python tool's sandbox: had, or else a CI failure or a skip saying why.

A test that needs isolation fails in CI (the variable CI is set, or JAXSEEKER_REQUIRE_SANDBOX, which .ci/run
exports) when it cannot have it; elsewhere it is skipped with the reason.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import pytest

from jaxseeker.tools.sandbox import Sandbox, SandboxUnavailable
from jaxseeker.tools.sandbox_probe import resolve

REQUIRE_ISOLATION = bool(os.environ.get("CI") or os.environ.get("JAXSEEKER_REQUIRE_SANDBOX"))


def isolation(backend: str, interpreters: Sequence[str] = (sys.executable,)) -> Sandbox:
    """The sandbox of `backend` (auto | bwrap | unshare) for the first of `interpreters` it can isolate here;
    otherwise the test fails in CI and is skipped elsewhere, with the reasons."""
    reasons = []
    for interpreter in interpreters:
        try:
            return resolve(backend, interpreter)
        except SandboxUnavailable as exc:
            reasons.append(f"{interpreter}: {exc}")
    message = f"no {backend} isolation on this machine: {'; '.join(reasons)}"
    if REQUIRE_ISOLATION:
        pytest.fail(message)
    pytest.skip(message)
