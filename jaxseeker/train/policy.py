"""The trained policy of a recipe: mesh, model config and weights, tokenizer and the sharded train state.

Shared by the SFT and RL loops, whose recipes name the model and tokenizer the same way.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import optax

from jaxseeker import model
from jaxseeker.data import load_tokenizer
from jaxseeker.errors import InputError
from jaxseeker.model.backend import check_attention_backend
from jaxseeker.parallel import MeshConfig, make_mesh, make_rules, maybe_initialize_distributed, param_shardings
from jaxseeker.train.lora import lora_from_recipe
from jaxseeker.train.recipe import RecipeError, build
from jaxseeker.train.state import TrainState, create_train_state, train_state_from_params


def resolved(spec: str, key: str) -> Path:
    """`model.resolve_model(spec)`: the HF directory a recipe's `key` names; a RecipeError naming the key if none."""
    try:
        return model.resolve_model(spec)
    except InputError as e:
        raise RecipeError(f"{key}: {e}") from None


def model_from_recipe(section: Mapping[str, Any], shardings: Any = None) -> tuple[model.ModelConfig, dict | None]:
    """(config, params or None): `hf_path` loads a checkpoint (an HF directory, a GGUF file or a registered name:
    `model.resolve_model`; other keys override its config), its leaves placed by `shardings` (see `model.load_hf`);
    otherwise the keys are ModelConfig fields and params are initialised later. `lora` is not a config field
    (`lora_from_recipe` reads it)."""
    section = dict(section or {})
    hf_path = section.pop("hf_path", None)
    section.pop("lora", None)
    try:
        if hf_path:
            return model.load_hf(resolved(hf_path, "model.hf_path"), shardings=shardings, **section)
        return build(model.ModelConfig, section, "model"), None
    except model.ConfigError as e:
        raise RecipeError(f"model: {e}") from None


@dataclasses.dataclass(kw_only=True)
class Policy:
    """What `build_policy` returns. With LoRA, `state.params` are the adapters and `base` the frozen params (placed by
    `base_shardings`); in full fine-tuning `lora` and `base` are None."""

    cfg: model.ModelConfig
    tokenizer: Any
    mesh: Any
    rules: Any
    state: TrainState
    shardings: TrainState
    lora: model.LoraConfig | None = None
    base: Any = None
    base_shardings: Any = None


def build_policy(
    recipe: Mapping[str, Any], optimizer: optax.GradientTransformation, *, tokenizer: str | None, seed: int, where: str
) -> Policy:
    """The recipe's mesh (`mesh`, `rules`), model (`model`: `hf_path` or config fields; `lora` for adapters on the
    frozen checkpoint), tokenizer (`tokenizer`, default the model's `hf_path`; `where` names the key in errors) and a
    sharded TrainState for `optimizer` (of the adapters with LoRA)."""
    maybe_initialize_distributed()
    mesh = make_mesh(build(MeshConfig, recipe.get("mesh"), "mesh"))
    rules = make_rules(recipe.get("rules"))
    lora = lora_from_recipe(recipe.get("model"))
    try:  # before any weights load: splash off TPU, cudnn off GPU
        check_attention_backend((recipe.get("model") or {}).get("attention_impl", "xla"))
    except model.ConfigError as e:
        raise RecipeError(f"model.{e}") from None
    cfg, params = model_from_recipe(  # a checkpoint loads each device's slice only, as the state will hold it
        recipe.get("model"), lambda c: param_shardings(c, mesh, rules)
    )
    tok_path = tokenizer or (recipe.get("model") or {}).get("hf_path")
    if not tok_path:
        raise RecipeError(f"{where}: a tokenizer directory is needed when the model is not an HF checkpoint")
    tok = load_tokenizer(resolved(tok_path, where if tokenizer else "model.hf_path"))  # by name or GGUF file too
    if len(tok) > cfg.vocab_size:
        raise RecipeError(f"model.vocab_size={cfg.vocab_size} is smaller than the tokenizer's {len(tok)} tokens")
    if lora is not None:
        state, shardings = create_train_state(
            functools.partial(model.init_lora, cfg, lora), model.lora_axes(cfg, lora), optimizer, seed, mesh, rules
        )
        return Policy(
            cfg=cfg,
            tokenizer=tok,
            mesh=mesh,
            rules=rules,
            state=state,
            shardings=shardings,
            lora=lora,
            base=params,
            base_shardings=param_shardings(cfg, mesh, rules),
        )
    axes = model.param_axes(cfg)
    if params is None:
        state, shardings = create_train_state(
            functools.partial(model.init_params, cfg), axes, optimizer, seed, mesh, rules
        )
    else:
        state, shardings = train_state_from_params(params, axes, optimizer, seed, mesh, rules)
    return Policy(cfg=cfg, tokenizer=tok, mesh=mesh, rules=rules, state=state, shardings=shardings)
