"""Config conversion from and to HF `config.json`, and the errors bad configs give."""

import json

import pytest
import transformers

from jaxseeker import model
from jaxseeker.model import ConfigError


def _write(tmp_path, cfg: dict):
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return tmp_path


def test_reads_transformers5_and_legacy_spellings(tmp_path):
    hf = transformers.Qwen2Config(
        vocab_size=100,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    ).to_dict()
    new = model.from_hf_dict(hf)
    legacy = dict(hf, rope_theta=new.rope_theta, torch_dtype="bfloat16")
    legacy.pop("rope_parameters", None)
    legacy.pop("dtype", None)
    old = model.from_hf_dict(legacy)
    assert old.rope_theta == new.rope_theta and old.hf_dtype == "bfloat16"
    assert new.qkv_bias and not new.qk_norm and new.head_dim == 8


def test_round_trip_through_hf_dict():
    cfg = model.ModelConfig.tiny("qwen3_moe", mlp_only_layers=(0,), decoder_sparse_step=1)
    assert model.from_hf_dict(model.to_hf_dict(cfg)).replace(initializer_range=cfg.initializer_range) == cfg
    assert cfg.layer_groups == ((False, 1), (True, 1))


def test_mixtral_style_num_local_experts_is_read():
    hf = model.to_hf_dict(model.ModelConfig.tiny("qwen3_moe"))
    hf["num_local_experts"] = hf.pop("num_experts")
    assert model.from_hf_dict(hf).num_experts == 4


def test_unsupported_architecture_is_named(tmp_path):
    with pytest.raises(ConfigError, match="model_type='gpt2'"):
        model.load_config(_write(tmp_path, {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}))


def test_missing_field_is_named(tmp_path):
    hf = model.to_hf_dict(model.ModelConfig.tiny("llama"))
    del hf["num_hidden_layers"]
    with pytest.raises(ConfigError, match=r"config.json: missing field 'num_hidden_layers'"):
        model.load_config(_write(tmp_path, hf))


def test_malformed_json_names_file_and_line(tmp_path):
    (tmp_path / "config.json").write_text('{\n "model_type": "qwen3",\n oops\n}')
    with pytest.raises(ConfigError, match=r"config.json:3: invalid JSON"):
        model.load_config(tmp_path)


def test_bad_values_name_the_field():
    with pytest.raises(ConfigError, match="remat: 'sometimes'"):
        model.ModelConfig.tiny(remat="sometimes")
    with pytest.raises(ConfigError, match="rope_type: 'dynamic'"):
        model.ModelConfig.tiny(rope_scaling=(("factor", 2.0), ("rope_type", "dynamic")))
    with pytest.raises(ConfigError, match="num_heads"):
        model.ModelConfig.tiny(num_heads=3, num_kv_heads=2)


@pytest.mark.parametrize(
    "key, value",
    [
        ("hidden_size", "32"),
        ("num_hidden_layers", 2.0),
        ("vocab_size", True),
        ("num_attention_heads", 0),
        ("rms_norm_eps", "1e-6"),
    ],
)
def test_a_number_of_the_wrong_type_or_sign_names_its_key(tmp_path, key, value):
    hf = dict(model.to_hf_dict(model.ModelConfig.tiny("qwen3")), **{key: value})
    with pytest.raises(ConfigError, match=rf"config.json: {key}: expected an? (integer|number) >= [01], got"):
        model.load_config(_write(tmp_path, hf))


def test_rope_parameters_that_are_not_an_object_are_named(tmp_path):
    hf = dict(model.to_hf_dict(model.ModelConfig.tiny("llama")), rope_parameters="llama3")
    with pytest.raises(ConfigError, match=r"config.json: rope_parameters: expected an object, got 'llama3'"):
        model.load_config(_write(tmp_path, hf))
