"""The model config: a frozen dataclass converted from and to Hugging Face `config.json`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from jaxseeker.errors import InputError

ARCHITECTURES = {
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
    "llama": "LlamaForCausalLM",
}
ROPE_TYPES = ("default", "linear", "llama3", "yarn")
REMAT_POLICIES = ("none", "dots", "full")
ATTENTION_IMPLS = ("xla", "jax_xla", "cudnn", "splash", "blocked")  # see model.layers.dot_attention
CONTEXT_ATTENTIONS = ("all_gather", "ring")  # across a mesh's context axis: see parallel.ring_attention
DTYPES = ("float32", "bfloat16", "float16")


class ConfigError(InputError):
    """A config field is missing, unknown or has a value outside its allowed set."""


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Shape and numerics of a decoder-only policy (Qwen2/2.5, Qwen3, Qwen3-MoE, Llama)."""

    model_type: str = "qwen3"  # qwen2 | qwen3 | qwen3_moe | llama
    vocab_size: int = 2048  # rows of the embedding and of the head
    hidden_size: int = 256  # width of the residual stream
    intermediate_size: int = 704  # width of a dense MLP
    num_layers: int = 4  # config.json's num_hidden_layers
    num_heads: int = 4  # query heads (num_attention_heads)
    num_kv_heads: int = 2  # key/value heads (num_key_value_heads): grouped-query attention
    head_dim: int = 64  # width of one head
    rms_norm_eps: float = 1e-6  # epsilon of every RMS norm
    rope_theta: float = 1_000_000.0  # RoPE base
    rope_scaling: tuple[tuple[str, Any], ...] = ()  # sorted (key, value) items of HF rope scaling, minus theta
    max_position_embeddings: int = 32768  # the longest context the checkpoint was trained for
    tie_word_embeddings: bool = True  # the head is the embedding's transpose
    qkv_bias: bool = False  # biases on the q/k/v projections (Qwen2)
    o_bias: bool = False  # bias on the attention output projection
    mlp_bias: bool = False  # biases in the MLP
    qk_norm: bool = True  # RMS norm of each head's q and k (Qwen3)
    # Mixture of experts (Qwen3-MoE); num_experts == 0 means dense.
    num_experts: int = 0
    num_experts_per_tok: int = 0  # experts a token is routed to (top k)
    moe_intermediate_size: int = 0  # width of one expert's MLP
    norm_topk_prob: bool = True  # renormalise the top-k routing weights to sum to 1
    decoder_sparse_step: int = 1  # every n-th layer is a MoE layer
    mlp_only_layers: tuple[int, ...] = ()  # layers kept dense
    # Token ids for generation_config.json.
    bos_token_id: int | None = None
    eos_token_id: int | tuple[int, ...] | None = None  # one id, or several (the first ends a turn)
    pad_token_id: int | None = None
    # Numerics and execution (not part of the HF architecture).
    hf_dtype: str = "float32"  # dtype of the checkpoint's weights (config.json's dtype)
    param_dtype: str = "float32"  # dtype the parameters are held in (the master weights when training)
    compute_dtype: str = "float32"  # dtype of the matmuls (bfloat16 on TPU and GPU)
    remat: str = "none"  # what the backward pass recomputes: none | dots | full (each layer's input only kept)
    attention_impl: str = "xla"  # xla | jax_xla | cudnn (GPU) | splash (TPU) | blocked
    context_attention: str = "all_gather"  # how attention crosses the context axis when the mesh has one
    initializer_range: float = 0.02  # std of the random initialisation (a model without a checkpoint)

    def __post_init__(self):
        if isinstance(self.rope_scaling, dict):  # a recipe's `model.rope_scaling: {rope_type: yarn, factor: 4, …}`
            rope = dict(self.rope_scaling)
            if rope.get("rope_type", "default") in ("llama3", "yarn"):
                rope.setdefault("original_max_position_embeddings", self.max_position_embeddings)
            object.__setattr__(self, "rope_scaling", tuple(sorted(rope.items())))
        _check_choice("model_type", self.model_type, tuple(ARCHITECTURES))
        _check_choice("remat", self.remat, REMAT_POLICIES)
        _check_choice("attention_impl", self.attention_impl, ATTENTION_IMPLS)
        _check_choice("context_attention", self.context_attention, CONTEXT_ATTENTIONS)
        for name in ("param_dtype", "compute_dtype", "hf_dtype"):
            _check_choice(name, getattr(self, name), DTYPES)
        _check_choice("rope_scaling.rope_type", self.rope_type, ROPE_TYPES)
        if self.num_heads % self.num_kv_heads:
            raise ConfigError(f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})")
        if self.num_experts and not (0 < self.num_experts_per_tok <= self.num_experts):
            raise ConfigError(f"num_experts_per_tok must be in 1..{self.num_experts}, got {self.num_experts_per_tok}")
        if self.num_experts and self.moe_intermediate_size <= 0:
            raise ConfigError("moe_intermediate_size must be positive when num_experts > 0")

    @property
    def context_reach(self) -> int:
        """The longest context the positions serve: max_position_embeddings, or the original length times the factor
        of a rope scaling (YaRN, linear, llama3)."""
        rope = dict(self.rope_scaling)
        if "factor" not in rope:
            return self.max_position_embeddings
        original = rope.get("original_max_position_embeddings") or self.max_position_embeddings
        return max(self.max_position_embeddings, int(original * rope["factor"]))

    @property
    def rope_type(self) -> str:
        """The HF rope type name ('default' when unscaled)."""
        return dict(self.rope_scaling).get("rope_type", "default")

    @property
    def is_moe_layer(self) -> tuple[bool, ...]:
        """Per layer: does it use the sparse MoE block (HF's decoder_sparse_step / mlp_only_layers rule)."""
        return tuple(
            self.num_experts > 0 and i not in self.mlp_only_layers and (i + 1) % self.decoder_sparse_step == 0
            for i in range(self.num_layers)
        )

    @property
    def layer_groups(self) -> tuple[tuple[bool, int], ...]:
        """Runs of consecutive layers of one kind: ((is_moe, count), …); each run is one scanned stack."""
        groups: list[list] = []
        for moe in self.is_moe_layer:
            if groups and groups[-1][0] == moe:
                groups[-1][1] += 1
            else:
                groups.append([moe, 1])
        return tuple((m, n) for m, n in groups)

    def replace(self, **changes) -> ModelConfig:
        """A copy with some fields changed (validated)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def tiny(cls, model_type: str = "qwen3", **overrides) -> ModelConfig:
        """A few-hundred-thousand-parameter config for tests, in the shape of `model_type`."""
        base = dict(
            model_type=model_type,
            vocab_size=512,
            hidden_size=64,
            intermediate_size=128,
            num_layers=2,
            num_heads=4,
            num_kv_heads=2,
            head_dim=16,
            max_position_embeddings=2048,
            initializer_range=0.1,
            qkv_bias=model_type == "qwen2",
            qk_norm=model_type in ("qwen3", "qwen3_moe"),
            tie_word_embeddings=model_type != "llama",
        )
        if model_type == "qwen3_moe":
            base.update(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)
        base.update(overrides)
        return cls(**base)


def _check_choice(name: str, value, allowed: tuple) -> None:
    if value not in allowed:
        raise ConfigError(f"{name}: {value!r} is not one of {list(allowed)}")


def _dtype_name(value) -> str:
    name = str(value or "float32").replace("torch.", "")
    return {"bf16": "bfloat16", "fp32": "float32", "fp16": "float16"}.get(name, name)


def _require(hf: dict, key: str, source: str):
    if key not in hf:
        raise ConfigError(f"{source}: missing field '{key}'")
    return hf[key]


_HF_SIZES = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "max_position_embeddings",
)
_HF_COUNTS = ("num_experts", "num_local_experts", "num_experts_per_tok", "moe_intermediate_size", "decoder_sparse_step")
_HF_NUMBERS = ("rms_norm_eps", "rope_theta", "initializer_range")


def _check_types(hf: dict, source: str) -> None:
    """Raise a ConfigError naming the first numeric field of the wrong type or sign (None stands for unset)."""
    for key in (*_HF_SIZES, *_HF_COUNTS, *_HF_NUMBERS):
        value = hf.get(key)
        kind, least = (float, 0) if key in _HF_NUMBERS else (int, 1 if key in _HF_SIZES else 0)
        if value is not None and (isinstance(value, bool) or not isinstance(value, kind | int) or value < least):
            noun = "a number" if kind is float else "an integer"
            raise ConfigError(f"{source}: {key}: expected {noun} >= {least}, got {value!r}")
    for key in ("rope_parameters", "rope_scaling"):
        if hf.get(key) is not None and not isinstance(hf[key], dict):
            raise ConfigError(f"{source}: {key}: expected an object, got {hf[key]!r}")


def from_hf_dict(hf: dict, source: str = "config.json", **overrides) -> ModelConfig:
    """Build a ModelConfig from an HF config dict (transformers 4 and 5 spellings)."""
    model_type = hf.get("model_type")
    if model_type not in ARCHITECTURES:
        archs = hf.get("architectures")
        raise ConfigError(
            f"{source}: unsupported architecture model_type={model_type!r} (architectures={archs}); "
            f"supported: {sorted(ARCHITECTURES)}"
        )
    if hf.get("hidden_act", "silu") != "silu":
        raise ConfigError(f"{source}: hidden_act={hf['hidden_act']!r} is unsupported (only 'silu')")
    if hf.get("use_sliding_window"):
        raise ConfigError(f"{source}: use_sliding_window=true is unsupported")
    _check_types(hf, source)
    hidden = _require(hf, "hidden_size", source)
    heads = _require(hf, "num_attention_heads", source)
    rope = dict(hf.get("rope_parameters") or hf.get("rope_scaling") or {})
    theta = rope.pop("rope_theta", None) or hf.get("rope_theta") or 10_000.0
    if "type" in rope:
        rope.setdefault("rope_type", rope.pop("type"))
    if rope.get("rope_type", "default") == "default":
        rope = {}
    elif rope["rope_type"] in ("llama3", "yarn"):
        rope.setdefault("original_max_position_embeddings", hf.get("max_position_embeddings"))
    eos = hf.get("eos_token_id")
    moe = model_type == "qwen3_moe"
    fields = dict(
        model_type=model_type,
        vocab_size=_require(hf, "vocab_size", source),
        hidden_size=hidden,
        intermediate_size=_require(hf, "intermediate_size", source),
        num_layers=_require(hf, "num_hidden_layers", source),
        num_heads=heads,
        num_kv_heads=hf.get("num_key_value_heads") or heads,
        head_dim=hf.get("head_dim") or hidden // heads,
        rms_norm_eps=hf.get("rms_norm_eps", 1e-6),
        rope_theta=float(theta),
        rope_scaling=tuple(sorted(rope.items())),
        max_position_embeddings=hf.get("max_position_embeddings", 32768),
        tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),
        qkv_bias=True if model_type == "qwen2" else bool(hf.get("attention_bias", False)),
        o_bias=model_type == "llama" and bool(hf.get("attention_bias", False)),
        mlp_bias=model_type == "llama" and bool(hf.get("mlp_bias", False)),
        qk_norm=model_type in ("qwen3", "qwen3_moe"),
        num_experts=(hf.get("num_experts") or hf.get("num_local_experts") or 0) if moe else 0,
        num_experts_per_tok=hf.get("num_experts_per_tok", 0) if moe else 0,
        moe_intermediate_size=hf.get("moe_intermediate_size", 0) if moe else 0,
        norm_topk_prob=bool(hf.get("norm_topk_prob", True)),
        decoder_sparse_step=hf.get("decoder_sparse_step", 1) or 1,
        mlp_only_layers=tuple(hf.get("mlp_only_layers") or ()),
        bos_token_id=hf.get("bos_token_id"),
        eos_token_id=tuple(eos) if isinstance(eos, list) else eos,
        pad_token_id=hf.get("pad_token_id"),
        hf_dtype=_dtype_name(hf.get("dtype") or hf.get("torch_dtype")),
        initializer_range=hf.get("initializer_range", 0.02),
    )
    if moe and fields["num_experts"] == 0:
        raise ConfigError(f"{source}: missing field 'num_experts' (or 'num_local_experts') for qwen3_moe")
    fields.update(overrides)
    try:
        return ModelConfig(**fields)
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None


def to_hf_dict(cfg: ModelConfig) -> dict:
    """The HF `config.json` dict of `cfg` (transformers 5 spelling, readable by 4.x too)."""
    rope = dict(cfg.rope_scaling) or {"rope_type": "default"}
    hf = {
        "architectures": [ARCHITECTURES[cfg.model_type]],
        "model_type": cfg.model_type,
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_heads,
        "num_key_value_heads": cfg.num_kv_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "rms_norm_eps": cfg.rms_norm_eps,
        "max_position_embeddings": cfg.max_position_embeddings,
        "tie_word_embeddings": cfg.tie_word_embeddings,
        "rope_theta": cfg.rope_theta,
        "rope_parameters": {"rope_theta": cfg.rope_theta, **rope},
        "rope_scaling": dict(cfg.rope_scaling) or None,
        "initializer_range": cfg.initializer_range,
        "dtype": cfg.hf_dtype,
        "torch_dtype": cfg.hf_dtype,
        "use_cache": True,
        "attention_dropout": 0.0,
        "bos_token_id": cfg.bos_token_id,
        "eos_token_id": list(cfg.eos_token_id) if isinstance(cfg.eos_token_id, tuple) else cfg.eos_token_id,
        "pad_token_id": cfg.pad_token_id,
    }
    if cfg.model_type == "llama":
        hf.update(attention_bias=cfg.o_bias, mlp_bias=cfg.mlp_bias)
    if cfg.model_type in ("qwen3", "qwen3_moe"):
        hf["attention_bias"] = cfg.qkv_bias
    if cfg.model_type in ("qwen2", "qwen3", "qwen3_moe"):
        hf.update(use_sliding_window=False, sliding_window=None, max_window_layers=cfg.num_layers)
    if cfg.model_type == "qwen3_moe":
        hf.update(
            num_experts=cfg.num_experts,
            num_experts_per_tok=cfg.num_experts_per_tok,
            moe_intermediate_size=cfg.moe_intermediate_size,
            norm_topk_prob=cfg.norm_topk_prob,
            decoder_sparse_step=cfg.decoder_sparse_step,
            mlp_only_layers=list(cfg.mlp_only_layers),
            output_router_logits=False,
            router_aux_loss_coef=0.001,
        )
    return hf


def load_config(path: str | Path, **overrides) -> ModelConfig:
    """Read `config.json` (or a directory holding it) into a ModelConfig."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    try:
        hf = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None
    if not isinstance(hf, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return from_hf_dict(hf, source=str(path), **overrides)
