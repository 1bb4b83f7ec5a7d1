"""The pipeline's questions: a QA recipe at a seed, fresh questions kept apart from others, and the names no
held-out question is about."""

from __future__ import annotations

from pathlib import Path

from jaxseeker.jsonl import json_lines
from jaxseeker.pipeline.data_config import QAStage
from jaxseeker.synthesis.qa import get_recipe
from jaxseeker.synthesis.qa.apart import synthesize_apart
from jaxseeker.synthesis.qa.driver import SynthResult
from jaxseeker.synthesis.qa.e2hqa import E2HQAConfig
from jaxseeker.synthesis.qa.recipes import RECIPE_CONFIGS
from jaxseeker.world import World

SPLITS = ("train", "rl", "test")


def read_jsonl(path: Path) -> list[dict]:
    """The JSON objects of a JSONL file, blank lines skipped (`data.records.json_lines`: a bad line is named)."""
    return [obj for _, obj in json_lines(path)]


def read_splits(qa_dir: Path) -> list[dict]:
    """Every question of the QA stage's splits (`train`, `rl`, `test` JSONL under `qa_dir`)."""
    return [q for split in SPLITS for q in read_jsonl(qa_dir / f"{split}.jsonl")]


def write_name_pool(world: World, held_out: list[Path], path: Path) -> str:
    """Writes `type<TAB>name` for every entity of `world` that no question of the `held_out` files is about."""
    kept_apart = {i for f in held_out for r in read_jsonl(f) for i in r.get("meta", {}).get("entities", ())}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{e.type}\t{e.name}\n" for i, e in world.entities.items() if i not in kept_apart))
    return str(path)


def draft(world: World, qa: QAStage, recipe: str, n: int, seed: int, progress: bool) -> SynthResult:
    """`n` questions of one of the QA stage's recipes (E2HQA with the stage's rounds), natural or not as the stage
    says."""
    if recipe == "e2hqa":
        config = E2HQAConfig(min_rounds=qa.e2hqa_rounds[0], max_rounds=qa.e2hqa_rounds[1], natural=qa.natural)
    else:
        config = RECIPE_CONFIGS[recipe](natural=qa.natural)
    return get_recipe(recipe)(world, n, seed=seed, progress=progress, config=config)


def fresh_questions(
    world: World, qa: QAStage, n: int, others: list[dict], progress: bool, *, draw: int = 1, prefix: str = "fresh"
) -> list[dict]:
    """`n` new questions of the QA stage's recipes, in its proportions and at seeds it did not use (`draw` 1: the RL
    pool's, 2: the fresh held-out set's), that share no evidence entity but countries with `others`: entities a
    policy trained on those never saw. Their ids are `{prefix}-{tag}-{i}`."""
    total = sum(count for _, count in qa.recipes)
    shares = [n * count // total for _, count in qa.recipes]
    shares[-1] += n - sum(shares)
    hubs, records = set(world.ids_of_type("country")), []
    for i, ((recipe, _), share) in enumerate(zip(qa.recipes, shares)):
        seed = qa.seed + draw * len(qa.recipes) + i
        result = synthesize_apart(
            lambda count, recipe=recipe, seed=seed: draft(world, qa, recipe, count, seed, progress), share, others, hubs
        )
        records += [r.to_json() for r in result.records]
    return [r | {"id": f"{prefix}-{r['tag']}-{i}"} for i, r in enumerate(records)]
