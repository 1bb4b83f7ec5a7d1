"""A small synthetic world shared by the QA synthesis tests (built once per session)."""

import pytest

from jaxseeker.world import World, synthetic_world


@pytest.fixture(scope="session")
def world() -> World:
    """800 entities, seed 11."""
    return synthetic_world(800, seed=11)
