"""Fixtures of the trajectory-synthesis tests: a small world, its local tools, a tokenizer and QA records."""

from __future__ import annotations

import pytest
from traj_support import DATE

from jaxseeker.agent import as_question, system_prompt
from jaxseeker.data import train_tokenizer
from jaxseeker.synthesis.qa import get_recipe
from jaxseeker.synthesis.qa.recipes import RECIPE_CONFIGS
from jaxseeker.tools import ToolsConfig, build_registry
from jaxseeker.world import World, synthetic_world


@pytest.fixture(scope="session")
def traj_world() -> World:
    """600 entities, seed 3."""
    return synthetic_world(600, seed=3)


@pytest.fixture(scope="session")
def traj_registry(traj_world):
    """The local search and visit tools over the world's pages."""
    return build_registry(ToolsConfig(enabled=("search", "visit")), corpus=traj_world.corpus)


@pytest.fixture(scope="session")
def traj_tokenizer(traj_world, traj_registry):
    """A 1000-token byte-level BPE trained on the pages and the system prompt."""
    texts = [p.text for p in traj_world.pages[:300]] + [system_prompt(traj_registry.schemas(), date=DATE)] * 3
    return train_tokenizer(texts, 1000)


@pytest.fixture(scope="session")
def traj_questions(traj_world):
    """QA records of four recipes as rollout Questions (meta holds tag, level and the evidence): the recipes'
    earlier questions (`natural: false`, what the pipeline makes unless `qa.natural` is set)."""
    records = []
    for recipe, n in (("e2hqa", 30), ("crawlqa", 30), ("sailorfog", 25), ("webexplorer", 25)):
        records += get_recipe(recipe)(traj_world, n, seed=1, config=RECIPE_CONFIGS[recipe](natural=False)).records
    return [as_question(r.to_json()) for r in records]
