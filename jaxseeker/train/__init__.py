"""Training: state, optimizer, the SFT step and loop, checkpoints, metrics, HF export."""

from jaxseeker.train.checkpoint import Checkpointer, Restored, restore_params
from jaxseeker.train.export import export_hf, restore_run
from jaxseeker.train.optimizer import OptimizerConfig, learning_rate_at, lr_schedule, make_optimizer
from jaxseeker.train.recipe import RecipeError, read_recipe
from jaxseeker.train.rl import RLConfig, run_rl
from jaxseeker.train.rl_scoring import RewardConfig
from jaxseeker.train.rl_step import RLStepConfig, episode_rows, make_rl_step, rl_loss
from jaxseeker.train.sft import TrainConfig, run_sft
from jaxseeker.train.sft_step import LossFn, make_sft_step, sft_loss, sft_update
from jaxseeker.train.state import (
    TrainState,
    abstract_train_state,
    create_train_state,
    train_state_from_params,
    train_state_shardings,
)

__all__ = [
    "Checkpointer", "LossFn", "OptimizerConfig", "RLConfig", "RLStepConfig", "RecipeError", "Restored",
    "RewardConfig", "TrainConfig", "TrainState", "abstract_train_state", "create_train_state", "episode_rows",
    "export_hf", "learning_rate_at", "lr_schedule", "make_optimizer", "make_rl_step", "make_sft_step",
    "read_recipe", "restore_params", "restore_run", "rl_loss", "run_rl", "run_sft", "sft_loss", "sft_update",
    "train_state_from_params", "train_state_shardings",
]
