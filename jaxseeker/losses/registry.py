"""The policy objectives (`rl.objective`) and advantages (`rl.advantage`) a config may name: the built-ins,
or a user's `package.module:function` (`jaxseeker.resolve`)."""

from collections.abc import Callable

from jaxseeker.losses.advantages import group_advantages, leave_one_out_advantages, mean_centred_advantages
from jaxseeker.losses.policy import policy_loss
from jaxseeker.resolve import resolve_function

POLICY_OBJECTIVES: dict[str, Callable] = {"policy_loss": policy_loss}
ADVANTAGES: dict[str, Callable] = {"grpo": group_advantages, "dr_grpo": mean_centred_advantages,
                                   "rloo": leave_one_out_advantages}


def get_policy_objective(name: str) -> Callable:
    """Return the objective `name` names: a key of `POLICY_OBJECTIVES` or a dotted path "pkg.mod:fn".

    The function must have `policy_loss`'s signature:
    `fn(logp, old_logp, advantages, mask, **hyperparams) -> (loss, metrics)`.
    """
    return resolve_function(name, POLICY_OBJECTIVES, "policy objective")


def get_advantage(name: str) -> Callable:
    """Return the advantage function `name` names: a key of `ADVANTAGES` or a dotted path "pkg.mod:fn".

    The function must have `group_advantages`'s signature:
    `fn(rewards [batch], group_size, **hyperparams) -> [batch]`, each question's G rewards contiguous.
    """
    return resolve_function(name, ADVANTAGES, "advantage")
