"""The flags several commands take, each under one name, with one meaning, type and help everywhere:

    --config RECIPE, --set KEY=VALUE      a recipe (a YAML file or a shipped recipe's name) and its overrides
    --world WORLD                         a saved world directory or a spec: synthetic / pages / atlas
    --mesh AXES                           the device mesh, e.g. tensor=8
    --k K                                 rollouts per question
    --max-context TOKENS                  context tokens of an episode (or a server slot)
    --llm-url, --llm-model, --llm-key-env an OpenAI-compatible server: teacher, judge, solver, summarizer alike
    --model MODEL                         the policy: an HF directory, a GGUF file, a registered name (a run
                                          directory where the command restores one)

Each `add_*` adds its flags to a parser or an argument group. Old names stay accepted for one release through
`Parser.rename` (`cli_parser`). Jax-free: building the parser imports nothing heavy.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jaxseeker.argtypes import at_least
from jaxseeker.errors import InputError, closest
from jaxseeker.parallel.mesh_config import MeshConfig, parse_mesh
from jaxseeker.train.recipe import CONFIGS_DIR, RecipeError, find_config
from jaxseeker.world.build import SOURCES

if TYPE_CHECKING:
    from jax.sharding import Mesh

WORLD_HELP = (
    "a saved world directory (`jaxseeker world build --out`), or synthetic[:SIZE[:SEED]], "
    "pages:FILE.jsonl or atlas[:FR,DE,…] (built once, then read from the cache)"
)
MODEL_FORMS = "an HF model directory, a GGUF file or a registered name (smollm2-135m-instruct)"
CONTEXT = at_least(2)  # an engine's context holds at least a prompt token and a sampled one


def config_path(text: str) -> Path:
    """`--config`'s type: a shipped recipe's bare name (`demo`) becomes its file; anything else stays as given, and
    `read_recipe` names what is wrong with it, in one line, when the command runs."""
    try:
        return find_config(text)
    except RecipeError:
        return Path(text)


def config_name(path: str | Path) -> str:
    """How a message names a recipe: a shipped one by its name (`demo`), any other by its path as given."""
    path = Path(path)
    return path.stem if path.parent == CONFIGS_DIR else str(path)


def set_error(err: RecipeError, overrides: Sequence[str]) -> str | None:
    """`err` said of the `--set KEY=VALUE` override whose key it refuses (`--set optimizer.lrr: unknown keys ['lrr']
    (did you mean 'lr'?); known keys: …`), or None when it refuses no key an override names."""
    text = str(err)
    found = re.search(r"unknown (?:keys|sections) \[([^\]]*)\]", text)
    if found is None:
        return None
    unknown = {name.strip().strip("'\"") for name in found.group(1).split(",")}
    for item in overrides:
        key = item.partition("=")[0]
        if unknown & set(key.split(".")):
            return f"--set {key}: {text[found.start() :]}"
    return None


def add_config(
    p: Any,
    *,
    required: bool = True,
    default: str | None = None,
    what: str = "recipe",
    example: str = "optimizer.lr=1e-4",
    recipes: tuple[str, ...] = (),
) -> None:
    """`--config RECIPE` (a YAML file or a shipped recipe's name) and `--set KEY=VALUE` overrides (repeatable);
    `recipes` names shipped recipes the command runs (its help's examples, each run by the tests)."""
    p.add_argument(
        "--config",
        type=config_path,
        required=required,
        default=default,
        metavar="RECIPE",
        help=f"{what}: a YAML file, or the name of one shipped in jaxseeker/configs"
        + (f" (e.g. {', '.join(recipes)})" if recipes else ""),
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"override a key of the recipe, e.g. {example} (repeatable)",
    )


def read_config(args: argparse.Namespace, kind: str) -> dict:
    """The recipe `--config` names with the `--set` overrides; one of another kind than `kind` (sft, rl, pipeline) is
    an error naming the command that runs it."""
    from jaxseeker.train.recipe import read_recipe, recipe_kind, shipped_configs

    recipe = read_recipe(args.config, args.set)
    try:
        found = recipe_kind(recipe)
    except RecipeError:  # no section says: the command's own checks name what is missing
        return recipe
    if found != kind:
        fits = [n for n in shipped_configs() if n.endswith(f"_{kind}") or n.startswith(f"{kind}_")]
        shipped = f" (shipped: {', '.join(fits)})" if fits and kind != "pipeline" else ""
        name = config_name(args.config)
        raise RecipeError(
            f"{name}: a {found} recipe, for `jaxseeker {found} --config {name}`; this command reads {kind} "
            f"recipes{shipped}"
        )
    return recipe


def world_spec(text: str) -> str:
    """`--world`'s type: refuses, naming the closest kind, a spec whose kind is misspelled (`synthtic:200`); the
    world itself is opened, and any other problem named, when the command runs (`world.open_world`)."""
    kind = text.partition(":")[0]
    if kind in SOURCES or Path(text).exists():
        return text
    near = closest(kind, SOURCES)
    if near:
        raise argparse.ArgumentTypeError(
            f"unknown world kind {kind!r} in {text!r} (did you mean {near!r}?); a world is {WORLD_HELP}"
        )
    return text


def add_world(p: Any, *, required: bool = False, default: str | None = None, extra: str = "") -> None:
    """`--world WORLD`: the same kinds in every command (`world.open_world`)."""
    p.add_argument(
        "--world", type=world_spec, required=required, default=default, metavar="WORLD", help=WORLD_HELP + extra
    )


MESH_HELP = (
    "shard the model and the KV cache over all devices, e.g. tensor=8 (axes data, fsdp, tensor, expert, "
    "context; fsdp takes the devices the others leave; default: one device)"
)


def mesh_argument(text: str) -> Mesh:
    """`parse_mesh` as an argparse `type=`, laid over this process's devices (`make_mesh`): a bad mesh, or one the
    devices do not fill, is a usage error that quotes it."""
    from jaxseeker.parallel.mesh import make_mesh

    try:
        return make_mesh(parse_mesh(text))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e) if str(e).startswith(repr(text)) else f"{text!r}: {e}") from None


def mesh_config(text: str) -> MeshConfig:
    """`--mesh`'s type where only the mesh's shape matters (`plan`): a bad mesh is a usage error quoting it."""
    try:
        return parse_mesh(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_mesh(p: Any, *, devices: bool = True) -> None:
    """`--mesh AXES`; with `devices`, laid over this process's devices when parsed (a jax Mesh), else a
    MeshConfig (axis sizes, -1 for the rest)."""
    if devices:
        p.add_argument("--mesh", type=mesh_argument, metavar="AXES", help=MESH_HELP)
    else:
        p.add_argument(
            "--mesh",
            type=mesh_config,
            metavar="AXES",
            help="e.g. data=1,fsdp=64,tensor=1,expert=1; -1 takes the chips the others leave "
            "(default: the recipe's mesh)",
        )


def add_k(p: Any, *, default: int | None = None, help: str = "rollouts per question") -> None:
    """`--k K`: rollouts (episodes) per question."""
    p.add_argument("--k", type=at_least(1), default=default, metavar="K", help=help)


def add_max_context(
    p: Any,
    *,
    default: int | None = None,
    dest: str = "max_context",
    help: str = "context tokens of an episode: prompt, turns and tool results",
) -> None:
    """`--max-context TOKENS`: the context length of an episode (the engine's `max_len`)."""
    p.add_argument("--max-context", dest=dest, type=CONTEXT, default=default, metavar="TOKENS", help=help)


def model_context(tokens: int | None, limit: int, *, default: int, what: str = "--max-context") -> int:
    """An episode's context: `tokens` when given, else `default` cut to the model's `limit` (its
    max_position_embeddings); an InputError naming `what` (the flag or recipe key) when `tokens` is beyond it."""
    if tokens is None:
        return min(default, limit)
    if tokens > limit:
        raise InputError(f"{what} {tokens} exceeds the model's max_position_embeddings ({limit})")
    return tokens


def add_llm(p: Any, purpose: str) -> None:
    """`--llm-url`, `--llm-model` and `--llm-key-env`: the OpenAI-compatible server of `purpose` (what the command
    asks it); an LLM is used where `--llm-model` is given or an option needs one."""
    from jaxseeker.tools.llm_client import LLMConfig

    p.add_argument(
        "--llm-url", default=LLMConfig.base_url, metavar="URL", help=f"OpenAI-compatible server (…/v1) of {purpose}"
    )
    p.add_argument("--llm-model", metavar="NAME", help="the model's name on that server")
    p.add_argument(
        "--llm-key-env",
        default=LLMConfig.api_key_env,
        metavar="VAR",
        help="environment variable holding the server's API key (unset or empty: none is sent)",
    )
