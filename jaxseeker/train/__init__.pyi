"""Names `jaxseeker.train` exports, each imported from its module on first use (lazy_loader reads this stub)."""

from .checkpoint import Checkpointer, Restored, restore_params
from .export import export_hf, restore_run
from .optimizer import OptimizerConfig, learning_rate_at, lr_schedule, make_optimizer
from .recipe import RecipeError, read_recipe
from .rl.loop import RLConfig, run_rl
from .rl.rows import episode_rows
from .rl.scoring import RewardConfig
from .rl.step import RLStepConfig, make_rl_step, rl_loss
from .sft.loop import TrainConfig, run_sft
from .sft.step import LossFn, make_sft_step, sft_loss, sft_update
from .state import TrainState, abstract_train_state, create_train_state, train_state_from_params, train_state_shardings

__all__ = [
    "Checkpointer",
    "LossFn",
    "OptimizerConfig",
    "RLConfig",
    "RLStepConfig",
    "RecipeError",
    "Restored",
    "RewardConfig",
    "TrainConfig",
    "TrainState",
    "abstract_train_state",
    "create_train_state",
    "episode_rows",
    "export_hf",
    "learning_rate_at",
    "lr_schedule",
    "make_optimizer",
    "make_rl_step",
    "make_sft_step",
    "read_recipe",
    "restore_params",
    "restore_run",
    "rl_loss",
    "run_rl",
    "run_sft",
    "sft_loss",
    "sft_update",
    "train_state_from_params",
    "train_state_shardings",
]
