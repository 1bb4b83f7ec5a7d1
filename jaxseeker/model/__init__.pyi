"""Names `jaxseeker.model` exports, each imported from its module on first use (lazy_loader reads this stub)."""

from .backend import check_attention_backend
from .cache import KVCache, init_cache, reset_rows
from .config import ConfigError, ModelConfig, from_hf_dict, load_config, to_hf_dict
from .forward import decode, forward, hidden_states, segment_positions, unembed
from .gguf_import import import_gguf
from .gguf_io import GGUFError, load_gguf, load_gguf_config
from .hf_io import load_hf, save_hf
from .lora import LoraConfig, attach_lora, init_lora, lora_axes, lora_shapes, merge_lora
from .params import abstract_params, count_params, init_params, param_axes, param_shapes
from .pretrained import PRETRAINED, gguf_source, resolve_model

__all__ = [
    "PRETRAINED",
    "ConfigError",
    "GGUFError",
    "KVCache",
    "LoraConfig",
    "ModelConfig",
    "abstract_params",
    "attach_lora",
    "check_attention_backend",
    "count_params",
    "decode",
    "forward",
    "from_hf_dict",
    "gguf_source",
    "hidden_states",
    "import_gguf",
    "init_cache",
    "init_lora",
    "init_params",
    "load_config",
    "load_gguf",
    "load_gguf_config",
    "load_hf",
    "lora_axes",
    "lora_shapes",
    "merge_lora",
    "param_axes",
    "param_shapes",
    "reset_rows",
    "resolve_model",
    "save_hf",
    "segment_positions",
    "to_hf_dict",
    "unembed",
]
