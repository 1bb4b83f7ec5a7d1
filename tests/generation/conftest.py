"""Fixtures of the generation tests."""

import pytest

from .reference import CFG, numpy_params


@pytest.fixture(scope="session")
def tiny():
    """(cfg, params) of the tiny random Qwen3 model."""
    return CFG, numpy_params(CFG, seed=0)
