"""Tiny GGUF files for tests, written with llama.cpp's own `gguf` writer the way its convert_hf_to_gguf.py writes
an HF checkpoint: llama.cpp tensor names, Llama's Q/K rows permuted, tensors quantised by `gguf.quants.quantize`,
and a byte-level BPE tokenizer with a chatml template."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np
import torch
import transformers
from tokenizers import pre_tokenizers

T = gguf.GGMLQuantizationType
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MERGES = ["h e", "Ġ t", "Ġt he", "i s", "Ġ is", "a p", "Ġ c", "Ġc ap"]  # a few, so that BPE has something to merge
CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# Each layer's tensors in a different type: every dequantiser is exercised at every kind of tensor.
MIXED = {
    0: {
        "attn_q": T.Q4_1,
        "attn_k": T.Q4_1,
        "attn_v": T.F16,
        "attn_output": T.Q8_0,
        "ffn_gate": T.Q4_1,
        "ffn_up": T.F16,
        "ffn_down": T.Q8_0,
    },
    1: {
        "attn_q": T.F16,
        "attn_k": T.Q8_0,
        "attn_v": T.Q4_1,
        "attn_output": T.F32,
        "ffn_gate": T.F32,
        "ffn_up": T.Q4_1,
        "ffn_down": T.Q4_1,
    },
}
_HF_TO_GGUF = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
}


def hf_config(family: str):
    """A tiny transformers config of "llama" (tied, as SmolLM2), "llama_untied", "qwen2" or "qwen3"; vocabulary =
    the test tokenizer's, matrix rows multiples of 32 (the quantisation block)."""
    common = dict(
        vocab_size=len(tokens()),
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        initializer_range=0.15,
        rms_norm_eps=1e-5,
        bos_token_id=1,
        eos_token_id=0,
        pad_token_id=0,
    )
    if family == "qwen2":
        return transformers.Qwen2Config(**common, rope_theta=1e6, tie_word_embeddings=False)
    if family == "qwen3":  # transformers' GGUF loader reads no head_dim for qwen3: its default, 128, it must be
        return transformers.Qwen3Config(
            **{**common, "num_attention_heads": 2, "num_key_value_heads": 1},
            head_dim=128,
            rope_theta=1e6,
            tie_word_embeddings=True,
        )
    return transformers.LlamaConfig(**common, rope_theta=1e4, tie_word_embeddings=family == "llama")


def hf_state(config, save_to: Path | None = None) -> dict[str, np.ndarray]:
    """The state dict (numpy, HF names; no tied head) of a seeded random transformers model of `config`, which is
    also saved to `save_to` as an HF checkpoint when given."""
    torch.manual_seed(0)
    hf = transformers.AutoModelForCausalLM.from_config(config)
    if save_to is not None:
        hf.save_pretrained(save_to)
    tied = config.tie_word_embeddings
    return {k: v.numpy() for k, v in hf.state_dict().items() if not (tied and k == "lm_head.weight")}


def tokens() -> list[str]:
    """The vocabulary: 3 special tokens (ids 0-2, as SmolLM2's), the 256 byte-level symbols, one per merge."""
    merged = [m.replace(" ", "") for m in MERGES]
    return SPECIAL + sorted(pre_tokenizers.ByteLevel.alphabet()) + merged


def _permute(w: np.ndarray, heads: int) -> np.ndarray:
    """convert_hf_to_gguf.py's `LlamaModel.permute`: HF's rotary halves → llama.cpp's adjacent pairs."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_name(hf_name: str) -> str:
    """The llama.cpp name of an HF tensor name."""
    if hf_name == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf_name == "model.norm.weight":
        return "output_norm.weight"
    if hf_name == "lm_head.weight":
        return "output.weight"
    _, _, layer, rest = hf_name.split(".", 3)
    module, kind = rest.rsplit(".", 1)
    return f"blk.{layer}.{_HF_TO_GGUF[module]}.{kind}"


def mixed_types(name: str) -> T:
    """Q8_0 embeddings (as SmolLM2's file), F16 head, F32 norms and biases, `MIXED` for layer matrices."""
    parts = name.split(".")
    if name == "token_embd.weight":
        return T.Q8_0
    if name == "output.weight":
        return T.F16
    if parts[0] == "blk" and parts[-1] == "weight" and parts[2] in MIXED[int(parts[1]) % 2]:
        return MIXED[int(parts[1]) % 2][parts[2]]
    return T.F32


def write_gguf(
    path: Path,
    state: dict[str, np.ndarray],
    hf_config,
    *,
    arch: str = "llama",
    types: Callable[[str], T] = mixed_types,
    eos: int = 0,
    tokenizer: bool = True,
) -> Path:
    """Write the HF `state` dict (names and `[out, in]` layouts of a transformers model of `hf_config`) as a GGUF
    of architecture `arch`, each tensor in `types(gguf_name)`. `eos` is the tokenizer's eos id (0 is
    `<|endoftext|>`, as in Qwen's files; SmolLM2's names `<|im_end|>`)."""
    c = hf_config
    writer = gguf.GGUFWriter(path, arch)
    writer.add_name("tiny")
    writer.add_block_count(c.num_hidden_layers)
    writer.add_context_length(c.max_position_embeddings)
    writer.add_embedding_length(c.hidden_size)
    writer.add_feed_forward_length(c.intermediate_size)
    writer.add_head_count(c.num_attention_heads)
    writer.add_head_count_kv(c.num_key_value_heads)
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(c.rope_parameters["rope_theta"])
    writer.add_layer_norm_rms_eps(c.rms_norm_eps)
    writer.add_vocab_size(c.vocab_size)
    if tokenizer:
        vocab = tokens()
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre("default")
        writer.add_token_list(vocab)
        writer.add_token_types([3 if t in SPECIAL else 1 for t in vocab])
        writer.add_token_merges(MERGES)
        writer.add_bos_token_id(1)
        writer.add_eos_token_id(eos)
        writer.add_pad_token_id(0)
        writer.add_add_bos_token(False)
        writer.add_chat_template(CHATML)
    for hf_name, w in state.items():
        name = gguf_name(hf_name)
        w = np.asarray(w, np.float32)
        if arch == "llama" and ".attn_q." in name:
            w = _permute(w, c.num_attention_heads)
        elif arch == "llama" and ".attn_k." in name:
            w = _permute(w, c.num_key_value_heads)
        kind = types(name)
        try:
            data = gguf.quants.quantize(w, kind)
        except NotImplementedError:  # a type the package cannot write (Q8_1): zero blocks of its byte size
            data = np.zeros(gguf.quants.quant_shape_to_byte_shape(w.shape, kind), np.uint8)
        writer.add_tensor(name, data, raw_dtype=None if kind in (T.F32, T.F16) else kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
