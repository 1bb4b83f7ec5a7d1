"""`model.load_gguf` on tiny GGUF files written by llama.cpp's `gguf` writer: the exact HF weights back from F32
files (Llama's Q/K permutation undone), every dequantised weight within half a quantisation step, the logits of
transformers' own GGUF loader on F32 / F16 / Q8_0 / Q4_1 files, and one-line errors for bad files."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers
from gguf_support import T, hf_config, hf_state, write_gguf

from jaxseeker import model

TOL = 1e-4  # float32 in two frameworks, as in test_hf_parity (2 tiny layers: about 6e-6 here)
forward = jax.jit(model.forward, static_argnums=2)
FAMILIES = ["llama", "llama_untied", "qwen2", "qwen3"]


@pytest.fixture(scope="module", params=FAMILIES)
def tiny(request, tmp_path_factory):
    """(family, HF config, HF checkpoint dir, F32 GGUF, mixed-type GGUF) of one seeded random model."""
    family = request.param
    config = hf_config(family)
    root = tmp_path_factory.mktemp(family)
    state = hf_state(config, save_to=root / "hf")
    arch = "llama" if family.startswith("llama") else family
    exact = write_gguf(root / "f32.gguf", state, config, arch=arch, types=lambda name: T.F32)
    mixed = write_gguf(root / "mixed.gguf", state, config, arch=arch)
    return family, config, root / "hf", exact, mixed


def _leaves(params) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves(params)]


def test_an_f32_gguf_loads_exactly_the_hf_checkpoint(tiny):
    family, config, hf_dir, exact, _ = tiny
    cfg, params = model.load_gguf(exact)
    hf_cfg, hf_params = model.load_hf(hf_dir)
    assert jax.tree.structure(params) == jax.tree.structure(hf_params)
    for ours, theirs in zip(_leaves(params), _leaves(hf_params)):
        np.testing.assert_array_equal(ours, theirs)  # Q and K rows back in HF's order, bit for bit
    same = (
        "model_type",
        "vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_layers",
        "num_heads",
        "num_kv_heads",
        "head_dim",
        "rms_norm_eps",
        "rope_theta",
        "tie_word_embeddings",
        "qkv_bias",
        "qk_norm",
        "bos_token_id",
    )
    assert {k: getattr(cfg, k) for k in same} == {k: getattr(hf_cfg, k) for k in same}
    assert cfg.max_position_embeddings == config.max_position_embeddings and cfg.param_dtype == "float32"
    assert cfg.eos_token_id == (2, 0)  # chatml: <|im_end|> ends a turn, then the file's eos <|endoftext|>


def test_dequantised_weights_lie_within_half_a_quantisation_step(tiny):
    """Q4_1 stores 16 levels over each 32-value block's range (half a step ≤ max|w|/15), Q8_0 255 levels over
    ±max|w| (≤ max|w|/254), F16 11 significant bits; their float16 scales add < 1e-3·max|w|."""
    _, _, _, exact, mixed = tiny
    _, want = model.load_gguf(exact)
    _, got = model.load_gguf(mixed)
    changed = 0
    for w, q in zip(_leaves(want), _leaves(got)):
        scale = np.abs(w).max()
        assert np.abs(q - w).max() <= scale * (1 / 15 + 1e-3)
        changed += not np.array_equal(q, w)
    assert changed >= 6  # the quantised leaves really went through a dequantiser


def test_logits_match_transformers_gguf_loader(tiny, tmp_path):
    family, _, _, _, mixed = tiny
    cfg, params = model.load_gguf(mixed)
    hf = transformers.AutoModelForCausalLM.from_pretrained(mixed.parent, gguf_file=mixed.name, dtype=torch.float32)
    ids = np.random.default_rng(1).integers(0, cfg.vocab_size, (2, 24))
    ours = np.asarray(forward(params, jnp.asarray(ids), cfg))
    with torch.no_grad():
        theirs = hf(input_ids=torch.tensor(ids)).logits.numpy()
    assert np.abs(theirs).max() > 0.5, "logits near zero would make the comparison vacuous"
    delta = np.abs(ours - theirs).max()
    print(f"{family}: max|Δlogits| = {delta:.2e}")
    assert delta <= TOL


def test_bf16_dtype_gives_bf16_leaves(tiny):
    _, _, _, exact, _ = tiny
    cfg, params = model.load_gguf(exact, dtype="bfloat16")
    assert cfg.param_dtype == "bfloat16" and {x.dtype for x in jax.tree.leaves(params)} == {jnp.dtype(jnp.bfloat16)}


def test_a_file_that_is_not_gguf_is_one_line_naming_it(tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_text("{}")
    with pytest.raises(model.GGUFError, match=f"^{bad}: not a GGUF file"):
        model.load_gguf(bad)
    with pytest.raises(FileNotFoundError, match="nowhere.gguf"):
        model.load_gguf(tmp_path / "nowhere.gguf")


def test_a_truncated_gguf_is_one_line_naming_it(tmp_path):
    config = hf_config("llama_untied")
    whole = write_gguf(tmp_path / "whole.gguf", hf_state(config), config, types=lambda name: T.F32)
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(whole.read_bytes()[:3000])
    with pytest.raises(model.GGUFError, match=f"^{cut}: not a readable GGUF file"):
        model.load_gguf(cut)


def test_an_unsupported_architecture_is_named(tmp_path):
    config = hf_config("llama_untied")
    path = write_gguf(tmp_path / "phi.gguf", hf_state(config), config, arch="phi3", types=lambda n: T.F32)
    with pytest.raises(
        model.ConfigError,
        match=rf"^{path}: GGUF architecture 'phi3' is not supported; supported: "
        r"\['llama', 'qwen2', 'qwen3'\]",
    ):
        model.load_gguf(path)


def test_a_tensor_type_the_gguf_package_cannot_dequantise_is_named(tmp_path):
    config = hf_config("llama_untied")
    odd = "blk.1.ffn_down.weight"  # in Q8_1, llama.cpp's activation format, which the gguf package cannot read
    path = write_gguf(
        tmp_path / "q8_1.gguf", hf_state(config), config, types=lambda name: T.Q8_1 if name == odd else T.F32
    )
    with pytest.raises(
        model.GGUFError, match=f"^{path}: tensor '{odd}' is of type Q8_1, which the gguf package cannot dequantise$"
    ):
        model.load_gguf(path)


def test_a_missing_or_extra_tensor_is_named(tmp_path):
    config = hf_config("llama_untied")
    state = hf_state(config)
    missing = {k: v for k, v in state.items() if k != "model.layers.1.self_attn.v_proj.weight"}
    path = write_gguf(tmp_path / "missing.gguf", missing, config, types=lambda n: T.F32)
    with pytest.raises(model.GGUFError, match=f"^{path}: tensor 'blk.1.attn_v.weight' is missing$"):
        model.load_gguf(path)
    extra = {**state, "model.layers.0.self_attn.q_norm.weight": np.ones(16, np.float32)}
    path = write_gguf(tmp_path / "extra.gguf", extra, config, types=lambda n: T.F32)
    with pytest.raises(
        model.GGUFError, match=f"^{path}: 1 tensor\\(s\\) the llama layout has no place for: blk.0.attn_q_norm.weight$"
    ):
        model.load_gguf(path)


def test_a_gguf_config_is_read_once_per_version_of_its_file(tmp_path):
    path = tmp_path / "policy.gguf"
    for family in ("llama_untied", "qwen2"):  # the same path rewritten: a new version, read anew
        config = hf_config(family)
        write_gguf(path, hf_state(config), config, arch="llama" if family.startswith("llama") else family)
        first, again = model.load_gguf_config(path), model.load_gguf_config(path, param_dtype="bfloat16")
        assert first.model_type == again.model_type == family.split("_")[0]
        assert again.param_dtype == "bfloat16" and first.param_dtype == "float32"  # overrides not cached
