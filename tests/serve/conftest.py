"""Fixtures of the serve tests: the tiny policy on disk and loaded, and one server on loopback."""

from __future__ import annotations

import pytest
from serve_support import MODEL_NAME, SHAPE, save_tiny_policy

from jaxseeker.serve import Background, build_served, load_policy


@pytest.fixture(scope="session")
def policy_dir(tmp_path_factory):
    """The tiny random HF policy directory."""
    return save_tiny_policy(tmp_path_factory.mktemp("policy"))


@pytest.fixture(scope="session")
def policy(policy_dir):
    """(cfg, params, tokenizer) of the tiny policy."""
    return load_policy(policy_dir)


@pytest.fixture(scope="session")
def server(policy):
    """The server on 127.0.0.1 (random port), no API key."""
    with Background(build_served(*policy, model_name=MODEL_NAME, shape=SHAPE)) as running:
        yield running


@pytest.fixture
def client(server):
    """An official `openai` client pointed at the server."""
    import openai

    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=60)
