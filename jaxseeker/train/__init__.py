"""Training: state, optimizer, the SFT step and loop, checkpoints, metrics, HF export."""

from jaxseeker.train.checkpoint import Checkpointer, Restored, restore_params
from jaxseeker.train.optimizer import OptimizerConfig, learning_rate_at, lr_schedule, make_optimizer
from jaxseeker.train.recipe import RecipeError, read_recipe
from jaxseeker.train.rl import RLConfig, run_rl
from jaxseeker.train.rl_scoring import RewardConfig
from jaxseeker.train.rl_step import RLStepConfig, episode_rows, make_rl_step, rl_loss
from jaxseeker.train.sft_step import make_sft_step, sft_loss, sft_update
from jaxseeker.train.state import (
    TrainState,
    abstract_train_state,
    create_train_state,
    train_state_from_params,
    train_state_shardings,
)

__all__ = [
    "Checkpointer", "OptimizerConfig", "RLConfig", "RLStepConfig", "RecipeError", "Restored", "RewardConfig", "TrainState", "abstract_train_state",
    "create_train_state", "episode_rows", "learning_rate_at", "make_rl_step", "rl_loss", "run_rl", "lr_schedule", "make_optimizer", "make_sft_step", "read_recipe",
    "restore_params", "sft_loss", "sft_update", "train_state_from_params", "train_state_shardings",
]
