"""Rows longer than the positions a model serves are noted by the planner; a recipe's rope scaling (YaRN) lifts the
limit to the original length times its factor."""

from jaxseeker.model import ModelConfig
from jaxseeker.planning.memory import StageShape
from jaxseeker.planning.recipe import position_notes

YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}


def stage(seq: int) -> StageShape:
    return StageShape("sft", "sft", rows=1, seq=seq)


def test_rows_past_the_models_positions_are_noted():
    cfg = ModelConfig(max_position_embeddings=40960)
    (note,) = position_notes(cfg, [stage(65536)])
    assert "65,536" in note and "40,960" in note and "model.rope_scaling" in note
    assert position_notes(cfg, [stage(40960)]) == []


def test_a_recipes_yarn_serves_the_original_length_times_its_factor():
    cfg = ModelConfig(max_position_embeddings=40960, rope_scaling=YARN)  # as a recipe's model section gives it
    assert cfg.rope_type == "yarn" and cfg.context_reach == 4 * 32768
    assert cfg.rope_scaling == tuple(sorted(YARN.items())) and hash(cfg)  # hashable: a static argument of jit
    assert position_notes(cfg, [stage(131072)]) == []
    assert len(position_notes(cfg, [stage(131073)])) == 1


def test_yarn_without_an_original_length_takes_the_checkpoints():
    cfg = ModelConfig(max_position_embeddings=40960, rope_scaling={"rope_type": "yarn", "factor": 2.0})
    assert dict(cfg.rope_scaling)["original_max_position_embeddings"] == 40960  # as transformers reads it
    assert cfg.context_reach == 81920
