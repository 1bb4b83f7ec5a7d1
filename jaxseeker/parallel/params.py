"""Where a model's parameters go on a mesh: the shardings their logical axes and the rules give."""

from __future__ import annotations

from typing import Any

from jax.sharding import Mesh

from jaxseeker import model
from jaxseeker.parallel.rules import DEFAULT_RULES, Rules, tree_shardings


def param_shardings(cfg: model.ModelConfig, mesh: Mesh, rules: Rules | None = None) -> Any:
    """A `NamedSharding` per parameter of `cfg`, in the params' structure: what training, the engine and
    `model.load_hf(path, shardings=lambda cfg: param_shardings(cfg, mesh))` place them by."""
    return tree_shardings(
        model.param_axes(cfg), model.abstract_params(cfg), mesh, DEFAULT_RULES if rules is None else rules
    )
