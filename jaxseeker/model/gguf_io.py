"""llama.cpp GGUF files → (config, stacked parameter pytree) (`load_gguf`).

The `gguf` package (llama.cpp's own Python reader) parses the file and dequantises every tensor type it knows
(F16, BF16, Q4_0 … Q8_0, the K- and IQ-quants) to float32; this module only maps names and layouts. Once
dequantised, a GGUF matrix is in Hugging Face's `[out, in]` layout, so `hf_io`'s per-layer table converts it
to ours. llama.cpp's converter reorders the rows of Llama's Q and K projections (it rotates adjacent pairs,
HF rotates halves); `_unpermute` undoes that, as transformers' GGUF loader does.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import gguf
import jax.numpy as jnp
import ml_dtypes
import numpy as np

from jaxseeker.errors import InputError
from jaxseeker.model.config import ConfigError, ModelConfig, from_hf_dict
from jaxseeker.model.hf_io import _LAYER_NAMES, _from_hf, _hf_shape
from jaxseeker.model.params import param_shapes

# GGUF `general.architecture` → our model_type (dense models only: MoE GGUFs keep experts in merged tensors).
GGUF_ARCHITECTURES = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3"}
# Per-layer parameter → the GGUF tensor name after `blk.N.`.
_LAYER_TENSORS = {
    "attn_norm": "attn_norm.weight",
    "mlp_norm": "ffn_norm.weight",
    "q": "attn_q.weight",
    "k": "attn_k.weight",
    "v": "attn_v.weight",
    "o": "attn_output.weight",
    "q_bias": "attn_q.bias",
    "k_bias": "attn_k.bias",
    "v_bias": "attn_v.bias",
    "o_bias": "attn_output.bias",
    "q_norm": "attn_q_norm.weight",
    "k_norm": "attn_k_norm.weight",
    "gate": "ffn_gate.weight",
    "up": "ffn_up.weight",
    "down": "ffn_down.weight",
    "gate_bias": "ffn_gate.bias",
    "up_bias": "ffn_up.bias",
    "down_bias": "ffn_down.bias",
}
_NP_DTYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}
CHATML_END = "<|im_end|>"
GGUF_MAGIC = b"GGUF"
_REQUIRED = object()


class GGUFError(InputError):
    """A file that is not a GGUF, or a GGUF tensor that is missing, of the wrong shape or not dequantisable."""


def open_gguf(path: str | Path) -> Any:
    """A `gguf.GGUFReader` over `path` (memory-mapped); GGUFError naming the file when it is not a GGUF."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"GGUF file not found: {path}")
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic != GGUF_MAGIC:
        raise GGUFError(f"{path}: not a GGUF file (it starts with {magic!r}, not {GGUF_MAGIC!r})")
    try:
        return gguf.GGUFReader(path)
    except (ValueError, IndexError, OSError) as err:  # bad magic or version, or a truncated header
        raise GGUFError(f"{path}: not a readable GGUF file ({err})") from None


def metadata(reader: Any, key: str, default: Any = None) -> Any:
    """The value of GGUF metadata `key` (a number, string or list), or `default` when the file has none."""
    field = reader.fields.get(key)
    return default if field is None else field.contents()


def _f32(value: float) -> float:
    """A float32 metadata value as its shortest decimal (1e-05, not 9.999999747378752e-06)."""
    return float(str(np.float32(value)))


def chat_eos_ids(reader: Any) -> int | tuple[int, ...] | None:
    """The end-of-sequence ids generation stops on: `<|im_end|>` first when the chat template is chatml (llama.cpp
    files often name `<|endoftext|>` as eos), then the file's eos."""
    eos = metadata(reader, "tokenizer.ggml.eos_token_id")
    template = metadata(reader, "tokenizer.chat_template") or ""
    tokens = metadata(reader, "tokenizer.ggml.tokens") if CHATML_END in template else None
    if not tokens or CHATML_END not in tokens:
        return eos
    end = tokens.index(CHATML_END)
    return end if eos in (None, end) else (end, eos)


def gguf_config(reader: Any, path: str | Path, **overrides) -> ModelConfig:
    """The ModelConfig of a GGUF file's metadata (an HF config dict built from it, checked by `from_hf_dict`),
    with `overrides` of its fields."""
    return from_hf_dict(_hf_config(reader, path), source=str(path), **overrides)


def _hf_config(reader: Any, path: str | Path) -> dict[str, Any]:
    """The HF config dict a GGUF file's metadata describes; a ConfigError or GGUFError naming the file where it
    describes what the import does not support."""
    arch = metadata(reader, "general.architecture")
    if arch not in GGUF_ARCHITECTURES:
        raise ConfigError(
            f"{path}: GGUF architecture {arch!r} is not supported; supported: {sorted(GGUF_ARCHITECTURES)}"
        )

    def meta(key: str, default: Any = _REQUIRED) -> Any:
        value = metadata(reader, f"{arch}.{key}", default)
        if value is _REQUIRED:
            raise ConfigError(f"{path}: missing GGUF metadata '{arch}.{key}'")
        if isinstance(value, list):
            raise ConfigError(f"{path}: GGUF metadata '{arch}.{key}' varies by layer ({value[:4]}…), unsupported")
        return value

    names = {t.name: t for t in reader.tensors}
    if meta("expert_count", 0):
        raise ConfigError(
            f"{path}: a mixture-of-experts GGUF ({arch}.expert_count={meta('expert_count')}) is "
            "unsupported; import it from its HF checkpoint"
        )
    if "rope_freqs.weight" in names or meta("rope.scaling.type", "none") != "none":
        raise ConfigError(
            f"{path}: scaled RoPE (rope_freqs.weight or {arch}.rope.scaling.type) is unsupported in GGUF "
            "import; import it from its HF checkpoint"
        )
    if "token_embd.weight" not in names:
        raise GGUFError(f"{path}: no tensor 'token_embd.weight'")
    hidden, heads = meta("embedding_length"), meta("attention.head_count")
    head_dim = meta("attention.key_length", None) or hidden // heads
    if meta("rope.dimension_count", head_dim) != head_dim:
        raise ConfigError(
            f"{path}: {arch}.rope.dimension_count={meta('rope.dimension_count')} rotates part of a "
            f"{head_dim}-dim head, unsupported"
        )
    hf = {
        "model_type": GGUF_ARCHITECTURES[arch],
        "vocab_size": int(names["token_embd.weight"].shape[1]),  # GGUF shapes list the fastest axis first
        "hidden_size": hidden,
        "intermediate_size": meta("feed_forward_length"),
        "num_hidden_layers": meta("block_count"),
        "num_attention_heads": heads,
        "num_key_value_heads": meta("attention.head_count_kv", heads),
        "head_dim": head_dim,
        "rms_norm_eps": _f32(meta("attention.layer_norm_rms_epsilon")),
        "rope_theta": _f32(meta("rope.freq_base", 10_000.0)),
        "max_position_embeddings": meta("context_length"),
        "tie_word_embeddings": "output.weight" not in names,
        "attention_bias": "blk.0.attn_q.bias" in names or "blk.0.attn_output.bias" in names,
        "mlp_bias": "blk.0.ffn_gate.bias" in names,
        "bos_token_id": metadata(reader, "tokenizer.ggml.bos_token_id"),
        "eos_token_id": chat_eos_ids(reader),
        "pad_token_id": metadata(reader, "tokenizer.ggml.padding_token_id"),
        "dtype": "float32",
    }
    if isinstance(hf["eos_token_id"], tuple):
        hf["eos_token_id"] = list(hf["eos_token_id"])
    return hf


def load_gguf_config(path: str | Path, **overrides) -> ModelConfig:
    """The ModelConfig of the GGUF file at `path` (as `load_config` reads config.json), without its weights.
    Its metadata is read once per file version: `gguf.GGUFReader` parses the whole tokenizer (about 3 s of CPU for
    SmolLM2's), and every `plan` and pipeline config of a GGUF policy asks for it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"GGUF file not found: {path}")
    stat = path.stat()
    hf = _cached_hf_config(str(path), stat.st_mtime_ns, stat.st_size)
    return from_hf_dict(dict(hf), source=str(path), **overrides)


@functools.lru_cache(maxsize=8)
def _cached_hf_config(path: str, mtime_ns: int, size: int) -> dict[str, Any]:
    """`_hf_config` of one version (modification time and size) of the file at `path`."""
    return _hf_config(open_gguf(path), path)


def _unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    """Undo convert_hf_to_gguf.py's `LlamaModel.permute` on Q or K rows (weight `[heads * head_dim, embed]` or bias
    `[heads * head_dim]`): within each head, llama.cpp's rows are (pair, 2) where HF's are (2, half)."""
    half = w.shape[0] // heads // 2
    return w.reshape(heads, half, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _dequantised(reader_tensor: Any, path: Path) -> np.ndarray:
    """A GGUF tensor as float32 in numpy (HF) axis order."""
    kind = reader_tensor.tensor_type.name
    try:
        return np.asarray(gguf.dequantize(reader_tensor.data, reader_tensor.tensor_type), np.float32)
    except NotImplementedError:
        raise GGUFError(
            f"{path}: tensor {reader_tensor.name!r} is of type {kind}, which the gguf package cannot dequantise"
        ) from None


def load_gguf(path: str | Path, dtype: str | None = None) -> tuple[ModelConfig, dict]:
    """Read a llama.cpp GGUF checkpoint (Llama, Qwen2, Qwen3; any tensor type the `gguf` package dequantises) into
    (config, params) with float32 (or `dtype`) leaves, the form `load_hf` returns. A missing, misshapen, unknown or
    undequantisable tensor is a GGUFError naming the file and tensor; an unsupported architecture a ConfigError."""
    path = Path(path)
    reader = open_gguf(path)
    cfg = gguf_config(reader, path, param_dtype=dtype or "float32")
    target = _NP_DTYPES[cfg.param_dtype]
    tensors = {t.name: t for t in reader.tensors}
    read: set[str] = set()

    def get(name: str, shape: tuple[int, ...]) -> np.ndarray:  # shape: the HF shape
        if name not in tensors:
            raise GGUFError(f"{path}: tensor {name!r} is missing")
        w = _dequantised(tensors[name], path)
        if w.shape != shape:
            raise GGUFError(f"{path}: tensor {name!r} has shape {list(w.shape)}, the metadata implies {list(shape)}")
        read.add(name)
        return w

    shapes = param_shapes(cfg)
    params: dict = {
        "embed": jnp.asarray(get("token_embd.weight", shapes["embed"]).astype(target)),  # [vocab, embed]
        "final_norm": jnp.asarray(get("output_norm.weight", shapes["final_norm"]).astype(target)),
    }
    if not cfg.tie_word_embeddings:
        params["lm_head"] = jnp.asarray(get("output.weight", shapes["embed"]).T.astype(target))  # [embed, vocab]
    ((_, n),) = cfg.layer_groups  # dense: one stack of every layer
    group = {}
    for key, shape in shapes["blocks"][0].items():
        buf = np.empty(shape, target)  # [layers, ...]
        n_in = _LAYER_NAMES[key][1]
        for j in range(n):
            w = get(f"blk.{j}.{_LAYER_TENSORS[key]}", _hf_shape(shape[1:], n_in))
            if cfg.model_type == "llama" and key in ("q", "k", "q_bias", "k_bias"):
                w = _unpermute(w, cfg.num_heads if key.startswith("q") else cfg.num_kv_heads)
            buf[j] = _from_hf(w, shape[1:], n_in)
        group[key] = jnp.asarray(buf)
    params["blocks"] = (group,)
    unread = sorted(set(tensors) - read)
    if unread:
        raise GGUFError(
            f"{path}: {len(unread)} tensor(s) the {cfg.model_type} layout has no place for: "
            f"{', '.join(unread[:5])}{', …' if len(unread) > 5 else ''}"
        )
    return cfg, params
