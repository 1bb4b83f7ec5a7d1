"""Fixtures of the agent tests: a small trained tokenizer, a five-page corpus and its local tools, engines."""

from __future__ import annotations

import pytest
from agent_support import ANSWER, CALL, DATE, PAGES, SEARCH, VISIT

from jaxseeker.agent import ScriptedEngine, prompts, tool_calling_model
from jaxseeker.data import train_tokenizer
from jaxseeker.tools import ToolsConfig, build_registry
from jaxseeker.world.corpus import Corpus


@pytest.fixture(scope="session")
def corpus() -> Corpus:
    """Five pages about a made-up river town."""
    return Corpus(PAGES)


@pytest.fixture(scope="session")
def registry(corpus):
    """The local `search` and `visit` tools over the corpus."""
    return build_registry(ToolsConfig(enabled=("search", "visit")), corpus=corpus)


@pytest.fixture(scope="session")
def tokenizer(registry):
    """A 600-token byte-level BPE with the agent's special tokens and the Qwen-style chat template."""
    texts = [p.text for p in PAGES] * 5 + [prompts.system_prompt(registry.schemas(), date=DATE)] * 5
    texts += [SEARCH, VISIT, ANSWER] * 5
    return train_tokenizer(texts, 600)


@pytest.fixture
def scripted(tokenizer):
    """`scripted(script, **kw)`: a ScriptedEngine ending turns at `<|im_end|>` like the real engine setup."""

    def make(script, *, stop_strings=None, **kwargs):
        eos_ids, stops = prompts.engine_stops(tokenizer)
        stops = stops if stop_strings is None else stop_strings
        return ScriptedEngine(tokenizer, script, eos_ids=eos_ids, stop_strings=stops, **kwargs)

    return make


@pytest.fixture(scope="session")
def call_model():
    """(tokenizer, cfg, params) of a tiny model that calls `search` every turn, its thoughts 4 tokens on average."""
    return tool_calling_model(CALL, mean_think_tokens=4.0)
