"""Shared fixtures: two tiny real tokenizers (Qwen-style template / chatml fallback) and a JSONL writer."""

import json

import pytest

from jaxseeker.data.tokenizer import load_tokenizer, train_tokenizer

from .samples import sentences


@pytest.fixture(scope="session")
def tokenizer_dirs(tmp_path_factory):
    """Two saved tokenizer directories: 'qwen' (Jinja chat template) and 'chatml' (no template)."""
    texts = sentences(300)
    dirs = {}
    for name, template in (("qwen", True), ("chatml", False)):
        out = tmp_path_factory.mktemp(f"tok_{name}")
        train_tokenizer(texts, 700, out, chat_template=template)
        dirs[name] = out
    return dirs


@pytest.fixture(scope="session", params=["qwen", "chatml"])
def tokenizer(request, tokenizer_dirs):
    """Each tokenizer variant, loaded back from its directory."""
    return load_tokenizer(tokenizer_dirs[request.param])


@pytest.fixture(scope="session")
def qwen_tokenizer(tokenizer_dirs):
    """The variant with the Qwen-style chat template."""
    return load_tokenizer(tokenizer_dirs["qwen"])


@pytest.fixture
def write_jsonl(tmp_path):
    """Writes lines (dicts are JSON-encoded, strings written as-is) to a file under tmp_path."""

    def write(name: str, lines: list) -> str:
        path = tmp_path / name
        path.write_text("".join((json.dumps(x) if isinstance(x, dict) else x) + "\n" for x in lines))
        return str(path)

    return write
