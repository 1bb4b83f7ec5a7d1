"""Resolve a policy objective named in a config: a built-in name or a user's `package.module:function`."""

import importlib
from collections.abc import Callable

from jaxseeker.losses.policy import policy_loss

POLICY_OBJECTIVES: dict[str, Callable] = {"policy_loss": policy_loss}


def get_policy_objective(name: str) -> Callable:
    """Return the objective `name` names: a key of `POLICY_OBJECTIVES` or a dotted path "pkg.mod:fn".

    The function must have `policy_loss`'s signature:
    `fn(logp, old_logp, advantages, mask, **hyperparams) -> (loss, metrics)`.
    """
    if name in POLICY_OBJECTIVES:
        return POLICY_OBJECTIVES[name]
    if ":" not in name:
        known = ", ".join(sorted(POLICY_OBJECTIVES))
        raise ValueError(
            f"unknown policy objective {name!r}; known names: {known}, or a path 'package.module:function'"
        )
    module_name, _, attr = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"policy objective {name!r}: cannot import module {module_name!r}: {err}") from err
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ValueError(f"policy objective {name!r}: module {module_name!r} has no callable {attr!r}")
    return fn
