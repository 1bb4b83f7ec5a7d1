"""LoRA runs: the recipe's `model.lora`, the merge of adapters into the frozen base, the run file that says
which base a run's adapters belong to (its checkpoints hold the adapters and their optimizer state only), and the
adapters written as a PEFT adapter directory."""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax
import numpy as np

from jaxseeker import model
from jaxseeker.errors import InputError
from jaxseeker.model.safetensors_io import write_file
from jaxseeker.train.recipe import RecipeError

# In a LoRA run's directory: the adapters' rank, alpha and targets, and the HF directory of the frozen base.
LORA_FILE = "lora.json"


def lora_from_recipe(section: Mapping[str, Any] | None) -> model.LoraConfig | None:
    """The `model.lora` section (`{rank, alpha, targets}`, see `model.LoraConfig`) or None when absent or rank 0
    (full fine-tuning); a bad key or value is a RecipeError naming it."""
    values = (section or {}).get("lora")
    if values is None:
        return None
    if not isinstance(values, Mapping):
        raise RecipeError(f"model.lora: expected a mapping of rank, alpha, targets, got {values!r}")
    known = [f.name for f in dataclasses.fields(model.LoraConfig)]
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise RecipeError(f"model.lora: unknown keys {unknown}; known keys: {known}")
    try:
        lora = model.LoraConfig(**values)
    except model.ConfigError as e:  # "lora.rank: …"
        raise RecipeError(f"model.{e}") from None
    if lora.enabled and not (section or {}).get("hf_path"):
        raise RecipeError("model.lora: adapters train on a pretrained model; give model.hf_path")
    return lora if lora.enabled else None


def merge_fn(cfg: model.ModelConfig, lora: model.LoraConfig, shardings: Any) -> Callable[[Any, Any], Any]:
    """`(base, adapters) -> params` with the adapters merged in (`model.merge_lora`), jitted, the result placed by
    `shardings` (a pytree shaped like the params, or None); one compile per config, shardings and shapes."""
    return _merge_fn(cfg, lora, jax.tree.structure(shardings), tuple(jax.tree.leaves(shardings)))


@functools.lru_cache(maxsize=8)
def _merge_fn(cfg: model.ModelConfig, lora: model.LoraConfig, treedef: Any, leaves: tuple) -> Callable:
    """`merge_fn`'s jitted function, cached on hashable arguments (a sharding pytree is not hashable, its parts are)."""

    def merge(base: Any, adapters: Any) -> Any:
        return model.merge_lora(base, adapters, cfg, lora)

    return jax.jit(merge, out_shardings=jax.tree.unflatten(treedef, leaves))


def write_lora_file(run: Path, lora: model.LoraConfig | None, base: str | Path | None) -> None:
    """Record in the run directory `run` the adapters of a LoRA run and its base checkpoint `base` (made absolute);
    remove an earlier record when `lora` is None."""
    if lora is None:
        (run / LORA_FILE).unlink(missing_ok=True)
        return
    record = {"rank": lora.rank, "alpha": lora.alpha, "targets": list(lora.targets), "base": str(Path(base).absolute())}
    (run / LORA_FILE).write_text(json.dumps(record, indent=2))


def read_lora_file(run: Path) -> tuple[model.LoraConfig | None, Path | None]:
    """(adapters' config, base checkpoint directory) of the run directory `run`; (None, None) for full fine-tuning."""
    marker = run / LORA_FILE
    if not marker.exists():
        return None, None
    try:
        record = json.loads(marker.read_text(encoding="utf-8"))
        base = Path(record.pop("base"))
        return model.LoraConfig(**record), base
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise ValueError(
            f'{marker}: expected {{"rank", "alpha", "targets", "base"}} ({type(err).__name__}: {err})'
        ) from None


def write_peft_adapter(
    adapters: dict,
    cfg: model.ModelConfig,
    lora: model.LoraConfig,
    out_dir: str | Path,
    *,
    base: str | Path | None = None,
) -> Path:
    """Write `adapters` as a PEFT LoRA adapter of the HF model of `cfg` (`adapter_config.json` and
    `adapter_model.safetensors`, float32): `lora_A` is A `[rank, in]`, `lora_B` is B `[out, rank]`, PEFT's scale
    alpha / rank is ours. Dense layers only (PEFT names MoE experts' weights otherwise)."""
    if cfg.num_experts and any(t in ("gate", "up", "down") for t in lora.targets):
        raise InputError("a PEFT adapter of MoE expert weights is not written: give targets among q, k, v, o")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, np.ndarray] = {}
    first = 0
    for (_, n), group in zip(cfg.layer_groups, adapters["blocks"]):
        for name, ab in group.items():
            a, b = np.asarray(jax.device_get(ab["a"]), np.float32), np.asarray(jax.device_get(ab["b"]), np.float32)
            part = "self_attn" if name in ("q", "k", "v", "o") else "mlp"
            for j in range(n):
                prefix = f"base_model.model.model.layers.{first + j}.{part}.{model.lora.HF_MODULES[name]}"
                tensors[f"{prefix}.lora_A.weight"] = a[j].reshape(-1, lora.rank).T.copy()  # [rank, in]
                tensors[f"{prefix}.lora_B.weight"] = b[j].reshape(lora.rank, -1).T.copy()  # [out, rank]
        first += n
    write_file(out / "adapter_model.safetensors", dict(sorted(tensors.items())))
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": lora.rank,
        "lora_alpha": lora.alpha,
        "lora_dropout": 0.0,
        "target_modules": [model.lora.HF_MODULES[t] for t in lora.targets],
        "bias": "none",
        "fan_in_fan_out": False,
        "inference_mode": True,
        "base_model_name_or_path": str(base) if base else None,
    }
    (out / "adapter_config.json").write_text(json.dumps(config, indent=2))
    return out
