"""Expensive set-up built once per test session and shared by the pytest-xdist workers that need it.

Under `--dist loadfile` the tests of one file run on one worker, so a module fixture is built once per file; a
set-up two files need (a quick pipeline run, split over two files so that two workers run their tests side by
side) would be built twice. `built_once` builds it in the session's temporary directory, which every worker of
the session shares, under a file lock (pytest-xdist's documented way to share a session fixture): the first
worker builds, one that asks meanwhile waits for it and then reads what it built.
"""

from __future__ import annotations

import os
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from filelock import FileLock

T = TypeVar("T")


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], T]) -> tuple[Path, T]:
    """(directory, result) of `build(directory)`, run once per session whichever worker asks first. `result` must
    pickle: the other workers get a copy of it. Without xdist (one process) it is built in a fresh directory."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        root = tmp_path_factory.mktemp(name)
        return root, build(root)
    shared = tmp_path_factory.getbasetemp().parent  # this session's: every worker's basetemp lies under it
    root, result = shared / name, shared / f"{name}.pickle"
    with FileLock(shared / f"{name}.lock"):
        if not result.exists():  # first here, or the first builder failed: (re)build from nothing
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir()
            result.write_bytes(pickle.dumps(build(root)))
        return root, pickle.loads(result.read_bytes())
