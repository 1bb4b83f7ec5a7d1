"""Resolve a function a config names: a built-in name, or a user's `package.module:function` on the Python path.

Policy objectives (`rl.objective`), advantages (`rl.advantage`), reward functions (`reward.fn`) and SFT losses
(`train.loss`) are all named this way.
"""

import importlib
from collections.abc import Callable, Mapping


def resolve_function(name: str, builtins: Mapping[str, Callable], kind: str) -> Callable:
    """Return `builtins[name]`, or the callable a path "package.module:function" names; `kind` words the errors."""
    if name in builtins:
        return builtins[name]
    if ":" not in name:
        known = ", ".join(sorted(builtins))
        raise ValueError(f"unknown {kind} {name!r}; known names: {known}, or a path 'package.module:function'")
    module_name, _, attr = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"{kind} {name!r}: cannot import module {module_name!r}: {err}") from err
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ValueError(f"{kind} {name!r}: module {module_name!r} has no callable {attr!r}")
    return fn
