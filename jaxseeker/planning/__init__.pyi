"""Names `jaxseeker.planning` exports, each imported from its module on first use (lazy_loader reads this stub)."""

from .chips import CHIPS, USABLE_HBM, Chip
from .fit import choose_update, memory_plan, plan_stage, planned_recipe, suggest_mesh
from .flops import step_flops
from .memory import StageShape, abstract_mesh
from .recipe import rl_stages, sft_stages

__all__ = [
    "CHIPS",
    "USABLE_HBM",
    "Chip",
    "StageShape",
    "abstract_mesh",
    "choose_update",
    "memory_plan",
    "plan_stage",
    "planned_recipe",
    "rl_stages",
    "sft_stages",
    "step_flops",
    "suggest_mesh",
]
