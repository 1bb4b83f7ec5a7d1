"""A small synthetic world shared by the world tests (built once per session)."""

import pytest

from jaxseeker.world import World, synthetic_world


@pytest.fixture(scope="session")
def small_world() -> World:
    """600 entities, seed 7."""
    return synthetic_world(600, seed=7)
