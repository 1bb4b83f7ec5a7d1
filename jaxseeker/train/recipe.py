"""Recipes: one YAML file with a section per stage, `key=value` overrides, unknown keys named."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from jaxseeker.errors import InputError, closest, did_you_mean

# The recipes shipped inside the package (pyproject.toml package-data; `configs/` at the repository root links here):
# `--config demo` names CONFIGS_DIR/demo.yaml.
CONFIGS_DIR = Path(__file__).resolve().parent.parent / "configs"


class RecipeError(InputError):
    """A recipe file or override is malformed or names an unknown key."""


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader reading `1e-4` as a float, as YAML 1.2 does (YAML 1.1, PyYAML's, wants `1.0e-4` and
    would hand the learning rate on as the string '1e-4'). One resolver here rather than ruamel.yaml, a second YAML
    library, for YAML 1.2."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                   |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                   |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                   |[-+]?\.(?:inf|Inf|INF)
                   |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def load_yaml(text: str) -> Any:
    """`text` parsed as YAML with the safe loader, `1e-4` a float."""
    return yaml.load(text, Loader=_Loader)  # a SafeLoader subclass: no arbitrary objects


def shipped_configs() -> list[str]:
    """The names of the recipes shipped with jaxseeker (`--config NAME` reads CONFIGS_DIR/NAME.yaml)."""
    return sorted(p.stem for p in CONFIGS_DIR.glob("*.yaml"))


def find_config(name: str | Path) -> Path:
    """The recipe file `name` means: a file that exists, else, for a bare name (`demo` or `demo.yaml`), the shipped
    recipe of that name. A directory or a missing file is a RecipeError naming it (and the closest shipped recipe)."""
    path = Path(name)
    if path.is_file():
        return path
    if path.is_dir():
        inside = sorted(path.glob("*.yaml"))
        example = f"; give one of its recipes, e.g. {inside[0]}" if inside else ""
        raise RecipeError(f"{path}: is a directory, not a recipe file{example}")
    stem = path.name.removesuffix(".yaml")  # not Path.stem: webdancer_qwen2.5-7b_sft has a dot of its own
    if len(path.parts) == 1 and (CONFIGS_DIR / f"{stem}.yaml").is_file():
        return CONFIGS_DIR / f"{stem}.yaml"
    near = closest(stem, shipped_configs())
    raise RecipeError(f"{path}: no such file" + (f" (did you mean the shipped recipe {near!r}?)" if near else ""))


def read_recipe(path: str | Path, overrides: Sequence[str] = ()) -> dict:
    """The recipe mapping of a YAML file (or a shipped recipe's name: `find_config`) with `a.b.c=value` overrides
    applied (values parsed as YAML)."""
    path = find_config(path)
    try:
        recipe = load_yaml(path.read_text()) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise RecipeError(f"{where}: invalid YAML: {getattr(e, 'problem', e)}") from None
    if not isinstance(recipe, dict):
        raise RecipeError(f"{path}: a recipe is a mapping of sections")
    recipe = copy.deepcopy(recipe)
    recipe.setdefault("name", path.stem)
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise RecipeError(f"--set {item!r}: expected key=value, e.g. optimizer.lr=1e-4")
        node = recipe
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise RecipeError(f"--set {item!r}: {part!r} is not a section")
        node[leaf] = load_yaml(raw)
    return recipe


def check_sections(recipe: Mapping, known: Sequence[str], where: str) -> None:
    """Raise when `recipe` has a top-level key outside `known`, listing the known ones."""
    unknown = sorted(set(recipe) - set(known))
    if unknown:
        raise RecipeError(f"{where}: unknown sections {unknown}{did_you_mean(unknown, known)}; known: {sorted(known)}")


_FITS = {  # scalar field type -> does a parsed YAML value fit it
    int: lambda v: isinstance(v, int) and not isinstance(v, bool),
    float: lambda v: isinstance(v, int | float) and not isinstance(v, bool),  # YAML's 3 for 3.0
    str: lambda v: isinstance(v, str),
    bool: lambda v: isinstance(v, bool),
}


def _type_error(hint: Any, value: Any) -> str | None:
    """Why `value` does not fit a scalar field typed `hint` (int, float, str, bool, or one of them | None); None when
    it fits or the type is not one of those (containers and nested configs check themselves)."""
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if value is None and type(None) in options:
        return None
    scalars = [t for t in options if t in _FITS]
    if len(scalars) != len(options) - (type(None) in options):
        return None
    if any(_FITS[t](value) for t in scalars):
        return None
    names = " or ".join("null" if t is type(None) else t.__name__ for t in options)
    return f"expected {names}, got {value!r} ({type(value).__name__})"


def build(cls: type, values: Mapping[str, Any] | None, where: str):
    """A frozen dataclass `cls` from a mapping; an unknown key, or a value of the wrong scalar type, is an error
    naming it."""
    values = dict(values or {})
    known = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise RecipeError(f"{where}: unknown keys {unknown}{did_you_mean(unknown, known)}; known keys: {known}")
    hints = typing.get_type_hints(cls)
    for key, value in values.items():
        wrong = _type_error(hints[key], value)
        if wrong:
            raise RecipeError(f"{where}.{key}: {wrong}")
    try:
        return cls(**values)
    except (TypeError, ValueError) as e:
        message = str(e)  # a config's own check names the key already ("rl.epochs must be >= 1")
        raise RecipeError(message if message.startswith(f"{where}.") else f"{where}: {message}") from None


def check_kwargs(fn: Callable, kwargs: Mapping[str, Any], where: str) -> None:
    """Raise when `kwargs` names a keyword `fn` does not take (a typo in a recipe would fail only at run time)."""
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    known = [n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    unknown = sorted(set(kwargs) - set(known))
    if unknown:
        raise RecipeError(f"{where}: unknown keys {unknown}{did_you_mean(unknown, known)}; {fn.__name__} takes {known}")


def merged(base: Mapping[str, Any], over: Mapping[str, Any], depth: int = 1) -> dict[str, Any]:
    """`base` with `over` laid on it key by key: a mapping in both merges in turn, `depth` levels down; anything
    else in `over` replaces."""
    out = dict(base)
    for key, value in over.items():
        both = depth > 0 and isinstance(value, Mapping) and isinstance(out.get(key), Mapping)
        out[key] = merged(out[key], value, depth - 1) if both else value
    return out


PIPELINE_SECTIONS = ("policy", "qa", "expert", "eval", "sft", "extend", "rft")  # `world`, `rl`: RL ones too


def recipe_kind(recipe: Mapping[str, Any]) -> str:
    """ "pipeline" (`jaxseeker pipeline`), "rl" (`jaxseeker rl`) or "sft" (`jaxseeker sft`), by the sections."""
    if any(s in recipe for s in PIPELINE_SECTIONS):
        return "pipeline"
    if "rl" in recipe:
        return "rl"
    if "train" in recipe or "data" in recipe:
        return "sft"
    raise RecipeError(
        f"recipe: no `train` / `data` (SFT), `rl` (RL) or `policy` (pipeline) section; sections: {sorted(recipe)}"
    )
