"""A shipped recipe's comments name only keys its loader accepts: a key that moved or was renamed is not left behind
in the prose a user copies from.

Key-looking words in a comment are dotted paths that start with a section's name (`tools.visit.goal_passages`,
`rl.rl.group_size`, `data.seq_len`), and back-quoted snake_case names (`permute_names`, `tokenizer_split: names`).
A dotted path must resolve from the recipe's top or from a section of that name; a back-quoted name must be a key of
some section of that kind of recipe, or a value the recipe writes (`answer_submit`, a tool's name)."""

import dataclasses
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml

from jaxseeker.agent import RolloutConfig
from jaxseeker.data import DataConfig
from jaxseeker.generation import SamplingConfig
from jaxseeker.model import LoraConfig, ModelConfig
from jaxseeker.parallel import MeshConfig
from jaxseeker.pipeline import config as pipeline
from jaxseeker.tools import LLMConfig, ToolsConfig
from jaxseeker.train.optimizer import OptimizerConfig
from jaxseeker.train.rl import config as rl_config
from jaxseeker.train.rl.scoring import RewardConfig
from jaxseeker.train.sft import loop as sft
from jaxseeker.world import WorldSpec

CONFIGS = sorted((Path(__file__).parent.parent / "configs").glob("*.yaml"))
ANY = "any key"  # a section whose keys are free: `rules` (axis names), a function's keyword arguments
# mapping-typed fields that hold a section of their own
SECTIONS_IN_MAPPINGS = {"context_stages": rl_config.ContextStage, "llm": LLMConfig}
FILE_ENDINGS = ("json", "jsonl", "yaml", "md", "py", "sh")


def keys_of(cls: type) -> dict:
    """The tree of keys a dataclass section reads: a nested section's keys under its name, None at a leaf."""
    hints = typing.get_type_hints(cls)
    out: dict = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        nested = next((o for o in options if dataclasses.is_dataclass(o)), None)
        if nested is not None or f.name in SECTIONS_IN_MAPPINGS:
            out[f.name] = keys_of(nested or SECTIONS_IN_MAPPINGS[f.name])
        elif any(o in (dict, Mapping) or typing.get_origin(o) in (dict, Mapping) for o in options):
            out[f.name] = ANY
        else:
            out[f.name] = None
    return out


MODEL = {"hf_path": None, "lora": keys_of(LoraConfig), **keys_of(ModelConfig)}
SHARED = {"name": None, "target": None, "model": MODEL, "optimizer": keys_of(OptimizerConfig)}
SHARED |= {"mesh": keys_of(MeshConfig), "rules": ANY}
SFT = SHARED | {"data": keys_of(DataConfig), "train": keys_of(sft.TrainConfig)}
RL = SHARED | {
    "rl": keys_of(rl_config.RLConfig),
    "rollout": keys_of(RolloutConfig),
    "sampling": keys_of(SamplingConfig),
    "engine": keys_of(rl_config.EngineConfig),
    "tools": keys_of(ToolsConfig),
    "world": keys_of(WorldSpec),
    "reward": keys_of(RewardConfig),
}
PIPELINE = {"name": None, "world": keys_of(WorldSpec), "tools": keys_of(ToolsConfig)}
PIPELINE |= {name: keys_of(cls) for name, cls in pipeline.STAGES.items()}
PIPELINE |= {stage: {k: SFT[k] for k in PIPELINE[stage]} for stage in ("sft", "extend", "rft")}
PIPELINE["rl"] |= {k: RL[k] for k in pipeline.RL_RECIPE_SECTIONS}
PIPELINE["rl"]["model"] = {"lora": keys_of(LoraConfig), "config": keys_of(ModelConfig)}


def test_the_key_trees_are_the_loaders_sections():
    assert set(SFT) == set(sft.SECTIONS) and set(RL) == set(rl_config.SECTIONS)
    assert set(PIPELINE) == {"name", *pipeline.SHARED, *pipeline.STAGES}


def resolves(tree: dict | str | None, parts: list[str]) -> bool:
    """Whether the dotted path `parts` names a key of `tree`."""
    for part in parts:
        if tree == ANY:
            return True
        if not isinstance(tree, dict) or part not in tree:
            return False
        tree = tree[part]
    return True


def scopes(tree: dict | str | None, name: str) -> list:
    """Every section named `name` anywhere in `tree` (the scopes a path starting with `name` may be read in)."""
    if not isinstance(tree, dict):
        return []
    found = [tree[name]] if isinstance(tree.get(name), dict | str) else []
    return found + [s for key, sub in tree.items() for s in scopes(sub, name)]


def field_names(tree: dict | str | None) -> set[str]:
    """Every key anywhere in `tree`."""
    if not isinstance(tree, dict):
        return set()
    return set(tree) | {n for sub in tree.values() for n in field_names(sub)}


def values_of(node) -> set[str]:
    """Every scalar the recipe writes, as text."""
    if isinstance(node, Mapping):
        return {v for x in node.values() for v in values_of(x)}
    if isinstance(node, list):
        return {v for x in node for v in values_of(x)}
    return {str(node)}


def unresolved(path: Path) -> list[str]:
    """The key-looking words of `path`'s comments that its kind of recipe does not accept."""
    text = path.read_text()
    recipe = yaml.safe_load(text)
    tree = PIPELINE if set(recipe) <= set(PIPELINE) else SFT if set(recipe) <= set(SFT) else RL
    comments = [m.group(1) for m in re.finditer(r"(?:^|\s)#(.*)$", text, re.M)]
    bad = []
    for comment in comments:
        for m in re.finditer(r"\b[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)+\b", comment):
            parts = m.group().split(".")
            if parts[-1] in FILE_ENDINGS or not scopes(tree, parts[0]):
                continue  # a file, a module, or a dotted word that starts with no section's name
            if not resolves(tree, parts) and not any(resolves(s, parts[1:]) for s in scopes(tree, parts[0])):
                bad.append(m.group())
        for m in re.finditer(r"`([a-z_][a-z0-9_]*)(:[^`]*)?`", comment):
            name, colon = m.groups()
            if ("_" in name or colon) and name not in field_names(tree) and name not in values_of(recipe):
                bad.append(name)
    return bad


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_a_recipes_comments_name_only_keys_it_accepts(path):
    assert unresolved(path) == []


def test_a_moved_or_renamed_key_in_a_comment_is_found(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "# focused visits (`tools.goal_passages`), copies (`copy_replay`) and `extend_steps`; sft.data.seq_len, "
        "`permute_names`, rl.rl.group_size and docs/results.md are fine\n"
        "tools: {title_first: true}  # tools.visit.max_links: 0 would drop the links; tools.max_links would not load\n"
    )
    assert unresolved(recipe) == ["tools.goal_passages", "copy_replay", "extend_steps", "tools.max_links"]
