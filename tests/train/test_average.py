"""Weight averaging: the mean of HF checkpoints, checked in transformers against the mean of their tensors."""

import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers
from cli_support import usage_error

from jaxseeker.cli import main
from jaxseeker.train.average import average_hf, average_params, wise_ft


def _qwen3(path, seed: int, hidden: int = 64):
    """A tiny random Qwen3 saved by transformers at `path` with a chat template beside it; its state dict."""
    torch.manual_seed(seed)
    cfg = transformers.Qwen3Config(
        vocab_size=128,
        hidden_size=hidden,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        tie_word_embeddings=True,
    )
    hf = transformers.AutoModelForCausalLM.from_config(cfg)
    hf.save_pretrained(path)
    (path / "chat_template.jinja").write_text(f"template of model {seed}")
    return {k: v.numpy().copy() for k, v in hf.state_dict().items()}


def _loaded(path) -> dict:
    return {k: v.numpy() for k, v in transformers.AutoModelForCausalLM.from_pretrained(path).state_dict().items()}


def test_average_hf_is_the_mean_of_the_tensors_and_loads_in_transformers(tmp_path):
    a, b, c = (_qwen3(tmp_path / name, seed) for seed, name in enumerate("abc"))
    out = average_hf([tmp_path / "a", tmp_path / "b", tmp_path / "c"], tmp_path / "soup")
    soup = _loaded(out)
    assert soup.keys() == a.keys()
    for key in a:
        np.testing.assert_allclose(soup[key], (a[key] + b[key] + c[key]) / 3, atol=1e-6)
    assert not np.allclose(soup["model.layers.0.mlp.up_proj.weight"], a["model.layers.0.mlp.up_proj.weight"])
    assert (out / "chat_template.jinja").read_text() == "template of model 0"  # the first model's tokenizer files


def test_weights_are_normalised(tmp_path):
    a, b = (_qwen3(tmp_path / name, seed) for seed, name in enumerate("ab"))
    soup = _loaded(average_hf([tmp_path / "a", tmp_path / "b"], tmp_path / "soup", weights=[3, 1]))
    for key in a:
        np.testing.assert_allclose(soup[key], 0.75 * a[key] + 0.25 * b[key], atol=1e-6)


def test_average_params_keeps_dtypes_and_refuses_other_shapes():
    x = {"w": jnp.ones((2, 3), jnp.bfloat16), "b": jnp.zeros(3)}
    y = {"w": jnp.full((2, 3), 3.0, jnp.bfloat16), "b": jnp.ones(3)}
    mean = average_params([x, y])
    assert mean["w"].dtype == jnp.bfloat16 and float(mean["w"][0, 0]) == 2.0
    np.testing.assert_allclose(mean["b"], 0.5)
    with pytest.raises(ValueError, match=r"\['w'\]: shapes differ"):
        average_params([x, {"w": jnp.ones((3, 2)), "b": jnp.ones(3)}])
    with pytest.raises(ValueError, match="weights must be > 0"):
        average_params([x, y], [1, 0])
    with pytest.raises(ValueError, match="2 weights for 1"):
        average_params([x], [1, 1])


def test_other_architectures_are_refused_by_name(tmp_path):
    _qwen3(tmp_path / "a", 0)
    _qwen3(tmp_path / "wide", 1, hidden=96)
    with pytest.raises(
        ValueError, match=r"wide/config.json differs from .*a/config.json in 'hidden_size' \(96 vs 64\)"
    ):
        average_hf([tmp_path / "a", tmp_path / "wide"], tmp_path / "soup")
    with pytest.raises(ValueError, match="two or more"):
        average_hf([tmp_path / "a"], tmp_path / "soup")


def test_command_writes_the_average(tmp_path, capsys):
    a, b = (_qwen3(tmp_path / name, seed) for seed, name in enumerate("ab"))
    assert main(["average", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "soup")]) == 0
    assert "averaged 2 checkpoints" in capsys.readouterr().out
    key = "model.norm.weight"
    np.testing.assert_allclose(_loaded(tmp_path / "soup")[key], (a[key] + b[key]) / 2, atol=1e-6)
    with pytest.raises(SystemExit, match=r"jaxseeker average: .*nowhere: no such file"):
        main(["average", str(tmp_path / "a"), str(tmp_path / "nowhere"), "--out", str(tmp_path / "soup2")])
    with pytest.raises(SystemExit, match="jaxseeker average: 1 weights for 2 checkpoints"):
        main(["average", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "soup2"), "--weights", "1"])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["average", "a", "b", "--out", "s", "--weights", "1", "0"], "--weights: must be a number > 0, got 0"),
        (["average", "a", "b", "--out", "s", "--weights", "-1", "2"], "--weights: must be a number > 0, got -1"),
        (["average", "a", "b", "--out", "s", "--weights", "1", "inf"], "--weights: must be a number > 0, got inf"),
        (["export-hf", "--model", "run", "--out", "hf", "--step", "-1"], "--step: must be an integer >= 0, got -1"),
    ],
)
def test_average_and_export_numbers_out_of_range_are_usage_errors(argv, message, capsys):
    assert usage_error(argv, capsys) == f"jaxseeker {argv[0]}: error: argument {message}"


def test_wise_ft_is_the_float64_weight_mean_rounded_once(tmp_path):
    """(1 - 0.3)·start + 0.3·tuned, each weight the float64 mean rounded once to float32: exactly, not within a
    tolerance (float32 accumulation rounds the products and the sum)."""
    start, tuned = (_qwen3(tmp_path / name, seed) for seed, name in enumerate(["sft", "rl"]))
    out = wise_ft(tmp_path / "sft", tmp_path / "rl", tmp_path / "wise", 0.3)
    mean = _loaded(out)
    for key in start:
        exact = (0.7 * start[key].astype(np.float64) + 0.3 * tuned[key].astype(np.float64)).astype(np.float32)
        np.testing.assert_array_equal(mean[key], exact, err_msg=key)
    with pytest.raises(ValueError, match=r"ratio must lie in \(0, 1\)"):
        wise_ft(tmp_path / "sft", tmp_path / "rl", tmp_path / "wise", 1.0)
