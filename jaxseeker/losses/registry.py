"""The policy objectives (`rl.objective`) and advantages (`rl.advantage`) a config may name: the built-ins,
or a user's `package.module:function` (`jaxseeker.resolve`).

With `rl.pack` a row of the update holds several episodes, each its own segment, so an objective that reduces per
sequence must reduce per segment to be exact. An objective that declares a `segment_ids` keyword (or takes
**kwargs) gets the batch's `[rows, seq]` segment ids from the RL step (1, 2, … per episode within a row,
0 = padding; unpacked rows: one segment per row); `segment_sum` / `segment_mean` / `segment_count` of
`losses.masked` reduce per episode with them. An objective that only sums or averages over tokens is exact on
packed rows as it is: mark it with the function attribute `token_level = True`. `rl.pack` refuses any other.
"""

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from jaxseeker.losses.advantages import group_advantages, leave_one_out_advantages, mean_centred_advantages
from jaxseeker.losses.gspo import gspo_loss
from jaxseeker.losses.policy import policy_loss
from jaxseeker.resolve import resolve_function

POLICY_OBJECTIVES: dict[str, Callable] = {"policy_loss": policy_loss, "gspo": gspo_loss}
ADVANTAGES: dict[str, Callable] = {
    "grpo": group_advantages,
    "dr_grpo": mean_centred_advantages,
    "rloo": leave_one_out_advantages,
}


def get_policy_objective(name: str) -> Callable:
    """Return the objective `name` names: a key of `POLICY_OBJECTIVES` or a dotted path "pkg.mod:fn".

    The function must have `policy_loss`'s signature:
    `fn(logp, old_logp, advantages, mask, **hyperparams) -> (loss, metrics)`, plus an optional `segment_ids`
    keyword (see the module docstring).
    """
    return resolve_function(name, POLICY_OBJECTIVES, "policy objective")


def takes_segment_ids(objective: Callable) -> bool:
    """Whether the RL step passes `objective` the batch's `segment_ids`: it declares that keyword or takes **kwargs."""
    params = inspect.signature(objective).parameters.values()
    return any(
        p.kind is inspect.Parameter.VAR_KEYWORD
        or (
            p.name == "segment_ids"
            and p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        )
        for p in params
    )


def packs_exactly(objective: Callable) -> bool:
    """Whether `objective` computes the same on packed rows as on one row per episode: it takes `segment_ids`,
    or it is marked `token_level = True`."""
    return getattr(objective, "token_level", False) is True or takes_segment_ids(objective)


def objective_aggregation(objective: Callable, kwargs: Mapping[str, Any]) -> tuple[str, float | None]:
    """(agg, norm) `objective` reduces its per-token loss with: the values in `kwargs`, else its signature's
    defaults, else ("token-mean", None). The RL step reduces its KL and entropy terms the same way, and gradient
    accumulation weighs micro-batches by this aggregation's count (`losses.aggregation_count`)."""
    params = inspect.signature(objective).parameters

    def value(name: str, fallback: Any) -> Any:
        if name in kwargs:
            return kwargs[name]
        default = params[name].default if name in params else inspect.Parameter.empty
        return fallback if default is inspect.Parameter.empty else default

    return value("agg", "token-mean"), value("norm", None)


def get_advantage(name: str) -> Callable:
    """Return the advantage function `name` names: a key of `ADVANTAGES` or a dotted path "pkg.mod:fn".

    The function must have `group_advantages`'s signature:
    `fn(rewards [batch], group_size, **hyperparams) -> [batch]`, each question's G rewards contiguous.
    """
    return resolve_function(name, ADVANTAGES, "advantage")
