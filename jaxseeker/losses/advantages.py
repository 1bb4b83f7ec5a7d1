"""Group-relative advantages (GRPO / Dr. GRPO / RLOO), each `fn(rewards [batch], group_size) -> [batch]`.

The group statistics run in the rewards' float dtype, at least float32 (the RL loop passes float64 under
`jax.enable_x64`). A group whose rewards all lie within `flat_tol` of each other (relative to max(1, max|R|)) gets
A = 0 exactly: in float32 the mean of eight rewards of 1.2 is one rounding step off, and dividing that by
std + eps would give every rollout the same non-zero advantage.
"""

import jax
import jax.numpy as jnp


def _grouped(rewards: jax.Array, group_size: int) -> jax.Array:
    """`[batch]` rewards as `[n_groups, group_size]` floats, after checking the shapes."""
    if rewards.ndim != 1:
        raise ValueError(f"rewards has shape {tuple(rewards.shape)}, expected [batch] (groups contiguous)")
    if not isinstance(group_size, int) or group_size <= 0:
        raise ValueError(f"group_size must be a positive int, got {group_size!r}")
    if rewards.shape[0] % group_size != 0:
        raise ValueError(f"rewards has {rewards.shape[0]} entries, not a multiple of group_size={group_size}")
    return rewards.astype(jnp.promote_types(rewards.dtype, jnp.float32)).reshape(-1, group_size)  # [n_groups, group]


def flat_groups(grouped: jax.Array, flat_tol: float) -> jax.Array:
    """`[n_groups, 1]` bool: the group's rewards span at most flat_tol * max(1, max |R|) (all equal, up to rounding)."""
    if not flat_tol >= 0:
        raise ValueError(f"flat_tol must be >= 0, got {flat_tol}")
    spread = jnp.max(grouped, axis=1, keepdims=True) - jnp.min(grouped, axis=1, keepdims=True)  # [n_groups, 1]
    scale = jnp.maximum(1.0, jnp.max(jnp.abs(grouped), axis=1, keepdims=True))  # [n_groups, 1]
    return spread <= flat_tol * scale


def group_advantages(
    rewards: jax.Array, group_size: int, *, normalize_std: bool = True, eps: float = 1e-6, flat_tol: float = 1e-6
) -> jax.Array:
    """Advantage of each rollout relative to the other rollouts of its question.

    A_i = (R_i - mean_G(R)) / (std_G(R) + eps)   (GRPO, DeepSeekMath arXiv 2402.03300; std is the
    population std over the G rollouts); with `normalize_std=False`, A_i = R_i - mean_G(R)
    (Dr. GRPO, arXiv 2503.20783). A group whose rewards are all equal (within `flat_tol`, module docstring)
    gets A = 0 exactly.

    Args:
      rewards: `[batch]` with the `group_size` rollouts of each question contiguous.
      group_size: G, rollouts per question; must divide `batch`.
    Returns:
      `[batch]` advantages (float32, float64 under x64), one per rollout; the policy loss
      broadcasts them over the rollout's tokens.
    """
    grouped = _grouped(rewards, group_size)  # [n_groups, group]
    centred = grouped - jnp.mean(grouped, axis=1, keepdims=True)  # [n_groups, group]
    if normalize_std:
        centred = centred / (jnp.std(grouped, axis=1, keepdims=True) + eps)
    return jnp.where(flat_groups(grouped, flat_tol), 0.0, centred).reshape(-1)  # [batch]


def mean_centred_advantages(rewards: jax.Array, group_size: int, *, flat_tol: float = 1e-6) -> jax.Array:
    """Dr. GRPO (arXiv 2503.20783): A_i = R_i - mean_G(R), no division by the group's std; 0 for a flat group."""
    return group_advantages(rewards, group_size, normalize_std=False, flat_tol=flat_tol)  # [batch]


def leave_one_out_advantages(rewards: jax.Array, group_size: int, *, flat_tol: float = 1e-6) -> jax.Array:
    """RLOO (arXiv 2402.14740): A_i = R_i - mean_{j≠i} R_j = G / (G - 1) · (R_i - mean_G(R)).

    Each rollout's baseline is the mean of the other G - 1 rollouts of its question, so the baseline
    does not depend on the rollout it scores; needs G >= 2. A flat group gets A = 0 exactly.
    """
    grouped = _grouped(rewards, group_size)  # [n_groups, group]
    if group_size < 2:
        raise ValueError(f"leave-one-out advantages need group_size >= 2, got {group_size}")
    others = (jnp.sum(grouped, axis=1, keepdims=True) - grouped) / (group_size - 1)  # [n_groups, group]
    return jnp.where(flat_groups(grouped, flat_tol), 0.0, grouped - others).reshape(-1)  # [batch]
