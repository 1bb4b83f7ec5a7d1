"""`load_hf` refuses checkpoints whose tensors do not match their config.json, naming the file and tensor."""

import json
import shutil

import jax
import numpy as np
import pytest
import torch
import transformers

from jaxseeker import model
from jaxseeker.model.safetensors_io import SafetensorsError, TensorReader, write_file


@pytest.fixture(scope="module")
def untied(tmp_path_factory):
    """A tiny transformers Qwen3 checkpoint with its own lm_head."""
    torch.manual_seed(0)
    cfg = transformers.Qwen3Config(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        tie_word_embeddings=False,
    )
    path = tmp_path_factory.mktemp("untied")
    transformers.AutoModelForCausalLM.from_config(cfg).save_pretrained(path)
    return path


def _edited(src, dst, edit=None, **config_changes):
    """A copy of checkpoint `src` at `dst`, `edit` applied to its tensor dict and `config_changes` to config.json."""
    shutil.copytree(src, dst)
    reader = TensorReader(dst)
    tensors = {k: np.array(reader.get(k)) for k in reader.names()}
    del reader
    if edit:
        edit(tensors)
    write_file(dst / "model.safetensors", tensors)
    config = json.loads((dst / "config.json").read_text())
    (dst / "config.json").write_text(json.dumps({**config, **config_changes}))
    return dst


def test_the_unedited_checkpoint_loads(untied, tmp_path):
    cfg, params = model.load_hf(_edited(untied, tmp_path / "same"))
    assert not cfg.tie_word_embeddings and params["lm_head"].shape == (32, 64)


def test_a_tensor_of_the_right_size_but_wrong_shape_is_refused(untied, tmp_path):
    name = "model.layers.0.self_attn.k_proj.weight"  # [16, 32]
    bad = _edited(untied, tmp_path / "bad", lambda t: t.update({name: t[name].reshape(8, 64)}))
    with pytest.raises(SafetensorsError, match=rf"model.safetensors: tensor '{name}' is F32 \[8, 64\], expected"):
        model.load_hf(bad)


def test_an_integer_weight_is_refused(untied, tmp_path):
    name = "model.norm.weight"
    bad = _edited(untied, tmp_path / "bad", lambda t: t.update({name: t[name].astype(np.int32)}))
    with pytest.raises(SafetensorsError, match=rf"tensor '{name}' is I32 \[32\], expected a float \[32\]"):
        model.load_hf(bad)


def test_tensors_the_config_has_no_place_for_are_refused(untied, tmp_path):
    extra = "model.layers.0.self_attn.k_proj.bias"  # qwen3 without attention_bias has none
    bad = _edited(untied, tmp_path / "bad", lambda t: t.update({extra: np.zeros(16, np.float32)}))
    with pytest.raises(SafetensorsError, match=rf"1 tensor\(s\) that config.json has no place for: {extra}"):
        model.load_hf(bad)
    fewer_layers = _edited(untied, tmp_path / "fewer", num_hidden_layers=1)
    with pytest.raises(SafetensorsError, match=r"no place for: model.layers.1."):
        model.load_hf(fewer_layers)


def test_a_tied_config_with_a_different_lm_head_is_refused_and_an_equal_one_loads(untied, tmp_path):
    tied = _edited(untied, tmp_path / "tied", tie_word_embeddings=True)
    hf = transformers.AutoModelForCausalLM.from_pretrained(tied)  # transformers keeps the checkpoint's head
    assert not torch.equal(hf.lm_head.weight, hf.model.embed_tokens.weight)
    with pytest.raises(SafetensorsError, match=r"ties the word embeddings, but tensor 'lm_head.weight' differs"):
        model.load_hf(tied)
    same = _edited(
        untied,
        tmp_path / "same",
        lambda t: t.update({"lm_head.weight": t["model.embed_tokens.weight"]}),
        tie_word_embeddings=True,
    )
    cfg, params = model.load_hf(same)
    assert cfg.tie_word_embeddings and "lm_head" not in params


def test_a_missing_tensor_names_the_checkpoint(untied, tmp_path):
    bad = _edited(untied, tmp_path / "bad", lambda t: t.pop("lm_head.weight"))
    with pytest.raises(SafetensorsError, match=rf"{bad}: checkpoint lacks tensor 'lm_head.weight'"):
        model.load_hf(bad)


def test_save_hf_over_another_checkpoint_leaves_none_of_its_weights(untied, tmp_path):
    out = shutil.copytree(untied, tmp_path / "out")
    old = transformers.AutoModelForCausalLM.from_pretrained(untied)
    torch.save(old.state_dict(), out / "pytorch_model.bin")  # what `use_safetensors=False` would read
    (out / "pytorch_model.bin.index.json").write_text("{}")
    cfg = model.ModelConfig.tiny("qwen3")
    model.save_hf(model.init_params(cfg, jax.random.key(1)), cfg, out)
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "generation_config.json", "model.safetensors"]


def test_save_hf_over_a_peft_adapter_leaves_none_of_its_files(untied, tmp_path):
    out = shutil.copytree(untied, tmp_path / "out")
    lora = {"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": np.zeros((8, 32), np.float32)}
    (out / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 8, "target_modules": ["q_proj"]}))
    write_file(out / "adapter_model.safetensors", lora)
    torch.save({k: torch.from_numpy(v) for k, v in lora.items()}, out / "adapter_model.bin")
    cfg = model.ModelConfig.tiny("qwen3")
    model.save_hf(model.init_params(cfg, jax.random.key(1)), cfg, out)
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "generation_config.json", "model.safetensors"]
