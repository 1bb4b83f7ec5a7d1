"""Training: state, optimizer, the SFT step and loop, checkpoints, metrics, HF export."""

from jaxseeker.train.checkpoint import Checkpointer, Restored, restore_params
from jaxseeker.train.optimizer import OptimizerConfig, learning_rate_at, lr_schedule, make_optimizer
from jaxseeker.train.recipe import RecipeError, read_recipe
from jaxseeker.train.sft_step import make_sft_step, sft_loss, sft_update
from jaxseeker.train.state import (
    TrainState,
    abstract_train_state,
    create_train_state,
    train_state_from_params,
    train_state_shardings,
)

__all__ = [
    "Checkpointer", "OptimizerConfig", "RecipeError", "Restored", "TrainState", "abstract_train_state",
    "create_train_state", "learning_rate_at", "lr_schedule", "make_optimizer", "make_sft_step", "read_recipe",
    "restore_params", "sft_loss", "sft_update", "train_state_from_params", "train_state_shardings",
]
