"""A recipe's `model.hf_path` may name a GGUF file or a registered model as well as an HF directory: the SFT / RL
policy and the planner read it through `model.resolve_model`."""

import jax
import numpy as np
import optax
import pytest
from gguf_support import hf_config, hf_state, write_gguf

from jaxseeker import model
from jaxseeker.planning.recipe import model_config
from jaxseeker.train.policy import build_policy, model_from_recipe
from jaxseeker.train.recipe import RecipeError


@pytest.fixture
def tiny_gguf(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXSEEKER_CACHE", str(tmp_path / "cache"))
    config = hf_config("llama")
    return write_gguf(tmp_path / "tiny.gguf", hf_state(config), config)


def test_hf_path_may_be_a_gguf_file(tiny_gguf, tmp_path):
    cfg, params = model_from_recipe({"hf_path": str(tiny_gguf), "attention_impl": "blocked"})
    want_cfg, want = model.load_gguf(tiny_gguf)
    assert cfg == want_cfg.replace(attention_impl="blocked")
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(want)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert [p.name for p in (tmp_path / "cache" / "models").iterdir()][0].startswith("tiny-")


def test_the_policy_takes_the_tokenizer_of_a_gguf_model(tiny_gguf):
    policy = build_policy(
        {"model": {"hf_path": str(tiny_gguf)}}, optax.sgd(0.1), tokenizer=None, seed=0, where="train.tokenizer"
    )
    assert len(policy.tokenizer) == policy.cfg.vocab_size and policy.tokenizer.eos_token == "<|im_end|>"


def test_an_unknown_model_name_is_a_recipe_error_naming_the_key():
    with pytest.raises(RecipeError, match=r"^model.hf_path: model 'smollm-7t': neither a registered name"):
        model_from_recipe({"hf_path": "smollm-7t"})


def test_the_planner_reads_a_gguf_config_without_its_weights(tiny_gguf, tmp_path):
    cfg = model_config({"hf_path": str(tiny_gguf), "remat": "full"}, notes := [])
    assert cfg == model.load_gguf_config(tiny_gguf, remat="full") and not notes
    assert not (tmp_path / "cache").exists()  # nothing imported


@pytest.mark.skipif(jax.default_backend() == "tpu", reason="splash runs natively on TPU")
def test_splash_off_tpu_is_refused_before_any_weights_load(monkeypatch):
    monkeypatch.delenv("JAXSEEKER_INTERPRET_KERNELS", raising=False)
    recipe = {"model": {"hf_path": "not-a-model", "attention_impl": "splash"}}  # never resolved: refused first
    with pytest.raises(RecipeError, match=r"^model.attention_impl='splash' is the Pallas TPU kernel .*=cudnn \(GPU\)"):
        build_policy(recipe, optax.sgd(0.1), tokenizer=None, seed=0, where="train.tokenizer")
