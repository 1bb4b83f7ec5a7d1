"""Hugging Face checkpoints ⇄ the stacked parameter pytree (`load_hf`, `save_hf`)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax.experimental import multihost_utils

from jaxseeker.model.config import ModelConfig, load_config, to_hf_dict
from jaxseeker.model.params import param_shapes
from jaxseeker.model.safetensors_io import SafetensorsError, TensorReader, write_sharded

# Per-layer parameter → (HF name suffix, number of leading "input" dims). Linear weights are stored by
# HF as [out, in]; ours are [in..., out...]. None marks a vector stored as is (norms, biases).
_LAYER_NAMES: dict[str, tuple[str, int | None]] = {
    "attn_norm": ("input_layernorm.weight", None),
    "mlp_norm": ("post_attention_layernorm.weight", None),
    "q": ("self_attn.q_proj.weight", 1),
    "k": ("self_attn.k_proj.weight", 1),
    "v": ("self_attn.v_proj.weight", 1),
    "o": ("self_attn.o_proj.weight", 2),
    "q_bias": ("self_attn.q_proj.bias", None),
    "k_bias": ("self_attn.k_proj.bias", None),
    "v_bias": ("self_attn.v_proj.bias", None),
    "o_bias": ("self_attn.o_proj.bias", None),
    "q_norm": ("self_attn.q_norm.weight", None),
    "k_norm": ("self_attn.k_norm.weight", None),
    "gate": ("mlp.gate_proj.weight", 1),
    "up": ("mlp.up_proj.weight", 1),
    "down": ("mlp.down_proj.weight", 1),
    "gate_bias": ("mlp.gate_proj.bias", None),
    "up_bias": ("mlp.up_proj.bias", None),
    "down_bias": ("mlp.down_proj.bias", None),
    "router": ("mlp.gate.weight", 1),
}
_EXPERT_NAMES = {"gate": "gate_proj", "up": "up_proj", "down": "down_proj"}
_NP_DTYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}


def _from_hf(w: np.ndarray, shape: tuple[int, ...], n_in: int | None) -> np.ndarray:
    return w.reshape(shape) if n_in is None else w.T.reshape(shape)


def _to_hf(p: np.ndarray, n_in: int | None) -> np.ndarray:
    if n_in is None:
        return p.reshape(-1)
    return p.reshape(math.prod(p.shape[:n_in]), -1).T


def _expert_weight(reader: TensorReader, prefix: str, key: str, shape: tuple[int, ...]) -> np.ndarray:
    """`[experts, in, out]` for gate/up/down, from per-expert tensors or from transformers 5 fused ones."""
    experts, n_in, n_out = shape
    per_expert = f"{prefix}mlp.experts.0.{_EXPERT_NAMES[key]}.weight"
    if per_expert in reader:
        return np.stack(
            [
                reader.get(f"{prefix}mlp.experts.{j}.{_EXPERT_NAMES[key]}.weight", (n_out, n_in)).T
                for j in range(experts)
            ]
        )
    if key == "down":
        return np.swapaxes(reader.get(f"{prefix}mlp.experts.down_proj", (experts, n_out, n_in)), 1, 2)
    fused = reader.get(f"{prefix}mlp.experts.gate_up_proj", (experts, 2 * n_out, n_in))  # [experts, 2 * mlp, embed]
    part = fused[:, :n_out] if key == "gate" else fused[:, n_out:]
    return np.swapaxes(part, 1, 2)


def _hf_shape(shape: tuple[int, ...], n_in: int | None) -> tuple[int, ...]:
    """The HF shape of a per-layer tensor of our `shape` (see `_to_hf`)."""
    if n_in is None:
        return (math.prod(shape),)
    return math.prod(shape[n_in:]), math.prod(shape[:n_in])


def load_hf(
    path: str | Path, dtype: str | None = None, *, shardings: Any = None, **config_overrides
) -> tuple[ModelConfig, dict]:
    """Read an HF checkpoint directory (config.json + safetensors, sharded or not, bf16 included) into
    (config, params). Each stacked leaf is read on the host and placed before the next is read, so at most
    one leaf is held twice. `dtype` sets the parameter dtype (default: the checkpoint's). A tensor that is missing,
    not float, of another shape than config.json implies, or one config.json has no place for is a SafetensorsError.

    `shardings` places the leaves: a pytree of `jax.sharding.Sharding` shaped like the params, or a function
    of the checkpoint's config returning one. Each device then receives only its own slice of every leaf
    (`jax.make_array_from_callback`), across all the processes of a multi-host run, so a model larger than
    one device loads straight into its training layout. Default: every leaf whole on the default device."""
    path = Path(path)
    cfg = load_config(path, **config_overrides)
    cfg = cfg.replace(param_dtype=dtype or config_overrides.get("param_dtype") or cfg.hf_dtype)
    target = _NP_DTYPES[cfg.param_dtype]
    reader = TensorReader(path)
    shapes = param_shapes(cfg)
    where = shardings(cfg) if callable(shardings) else shardings

    def place(host: np.ndarray, sharding: jax.sharding.Sharding | None) -> jax.Array:
        if sharding is None:
            return jnp.asarray(host)
        return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])

    def top(name: str, host: np.ndarray) -> jax.Array:
        return place(host.astype(target), None if where is None else where[name])

    embed = reader.get("model.embed_tokens.weight", (cfg.vocab_size, cfg.hidden_size))
    params: dict = {
        "embed": top("embed", embed),
        "final_norm": top("final_norm", reader.get("model.norm.weight", (cfg.hidden_size,))),
    }
    if not cfg.tie_word_embeddings:
        params["lm_head"] = top("lm_head", reader.get("lm_head.weight", (cfg.vocab_size, cfg.hidden_size)).T)
    elif "lm_head.weight" in reader and not np.array_equal(reader.get("lm_head.weight", embed.shape), embed):
        raise SafetensorsError(
            f"{path}: config.json ties the word embeddings, but tensor 'lm_head.weight' differs from "
            "'model.embed_tokens.weight' (transformers leaves them untied); set "
            "tie_word_embeddings false to load the head"
        )
    blocks, first = [], 0
    for g, ((moe, n), gshapes) in enumerate(zip(cfg.layer_groups, shapes["blocks"])):
        group = {}
        for key, shape in gshapes.items():
            buf = np.empty(shape, target)  # [layers, ...]
            for j in range(n):
                prefix = f"model.layers.{first + j}."
                if moe and key in _EXPERT_NAMES:
                    buf[j] = _expert_weight(reader, prefix, key, shape[1:])
                else:
                    suffix, n_in = _LAYER_NAMES[key]
                    buf[j] = _from_hf(reader.get(prefix + suffix, _hf_shape(shape[1:], n_in)), shape[1:], n_in)
            group[key] = place(buf, None if where is None else where["blocks"][g][key])
        blocks.append(group)
        first += n
    params["blocks"] = tuple(blocks)
    unread = sorted(k for k in reader.names() if k not in reader.read and not k.endswith("rotary_emb.inv_freq"))
    if unread:
        raise SafetensorsError(
            f"{path}: {len(unread)} tensor(s) that config.json has no place for: "
            f"{', '.join(unread[:5])}{', …' if len(unread) > 5 else ''}"
        )
    return cfg, params


def hf_tensors(params: dict, cfg: ModelConfig, dtype: str) -> Iterator[tuple[str, np.ndarray]]:
    """The HF-named tensors of `params` (per-expert names for MoE, which every transformers version loads), in
    file order, each read to the host and converted when it is drawn: one layer's slice of a stacked leaf at a
    time, so exporting holds the params and one tensor, not a second copy of the model. Leaves spread over several
    processes are gathered tensor by tensor onto every process, so all of them must draw the tensors together."""
    target = _NP_DTYPES[dtype]

    def host(x) -> np.ndarray:
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            x = multihost_utils.process_allgather(x, tiled=True)
        return np.asarray(jax.device_get(x)).astype(target)

    def per_layer(leaf, j: int, n_in: int | None) -> Callable[[], np.ndarray]:
        return lambda: np.ascontiguousarray(_to_hf(host(leaf[j]), n_in))

    def per_expert(leaf, j: int, e: int) -> Callable[[], np.ndarray]:
        return lambda: np.ascontiguousarray(host(leaf[j, e]).T)

    lazy: dict[str, Callable[[], np.ndarray]] = {"model.embed_tokens.weight": lambda: host(params["embed"])}
    first = 0
    for (moe, n), group in zip(cfg.layer_groups, params["blocks"]):
        for key, leaf in group.items():
            for j in range(n):
                prefix = f"model.layers.{first + j}."
                if moe and key in _EXPERT_NAMES:
                    for e in range(cfg.num_experts):
                        lazy[f"{prefix}mlp.experts.{e}.{_EXPERT_NAMES[key]}.weight"] = per_expert(leaf, j, e)
                else:
                    suffix, n_in = _LAYER_NAMES[key]
                    lazy[prefix + suffix] = per_layer(leaf, j, n_in)
        first += n
    lazy["model.norm.weight"] = lambda: host(params["final_norm"])
    if not cfg.tie_word_embeddings:
        lazy["lm_head.weight"] = lambda: np.ascontiguousarray(host(params["lm_head"]).T)
    for name in sorted(lazy, key=_name_order):
        yield name, lazy[name]()


def _name_order(name: str) -> tuple:
    parts = name.split(".")
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in parts)


_WEIGHT_FILES = ("*.safetensors", "model.safetensors.index.json", "pytorch_model*.bin", "pytorch_model.bin.index.json")
# A PEFT adapter's files: next to a full model, transformers may load the directory as that adapter.
_ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin")


def save_hf(
    params: dict, cfg: ModelConfig, out_dir: str | Path, *, dtype: str | None = None, max_shard_bytes: int = 2 << 30
) -> Path:
    """Write `config.json`, `generation_config.json` and safetensors (sharded with an index when large)
    that `transformers.AutoModelForCausalLM.from_pretrained` loads, replacing any weight files already in `out_dir`
    (safetensors or PyTorch `.bin`) and removing a PEFT adapter's. `dtype` defaults to the params' dtype.

    Params spread over the processes of a multi-host run are saved by calling this on every process: each tensor
    is gathered in turn and process 0 alone writes the files, which every process sees when the call returns."""
    out = Path(out_dir)
    dtype = dtype or cfg.param_dtype
    cfg = cfg.replace(hf_dtype=dtype)
    tensors = hf_tensors(params, cfg, dtype)
    spread = any(not leaf.is_fully_addressable for leaf in jax.tree.leaves(params) if isinstance(leaf, jax.Array))
    if spread and jax.process_index() != 0:
        for _ in tensors:  # join process 0's gather of every tensor
            pass
        multihost_utils.sync_global_devices(f"save_hf {out}")
        return out
    out.mkdir(parents=True, exist_ok=True)
    for pattern in _WEIGHT_FILES + _ADAPTER_FILES:  # an earlier checkpoint's, which a loader might read instead
        for stale in out.glob(pattern):
            stale.unlink()
    write_sharded(out, tensors, max_shard_bytes)
    (out / "config.json").write_text(json.dumps(to_hf_dict(cfg), indent=2))
    generation = {k: v for k, v in to_hf_dict(cfg).items() if k in ("bos_token_id", "eos_token_id", "pad_token_id")}
    (out / "generation_config.json").write_text(json.dumps({**generation, "do_sample": False}, indent=2))
    if spread:
        multihost_utils.sync_global_devices(f"save_hf {out}")
    return out
