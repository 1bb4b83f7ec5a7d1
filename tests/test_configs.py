"""Every recipe in configs/ validates and plans (`jaxseeker plan`) from a fresh clone, by path or by its name (the
recipes ship inside the package); the paper-scale ones have the published model shapes and recipe
hyper-parameters, and fit the slice their mesh names."""

import json
from pathlib import Path

import pytest
import yaml

from jaxseeker.cli import main

CONFIGS = sorted((Path(__file__).parent.parent / "configs").glob("*.yaml"))
PAPERS = ("webdancer", "websailor", "webexplorer", "webseer", "openseeker")
PAPER_CONFIGS = [p for p in CONFIGS if p.name.startswith(PAPERS)]
# Parameters of the checkpoints (HF model cards; embeddings untied), in billions.
PARAMETERS = {
    "Qwen2.5-7B-Instruct": 7.62,
    "Qwen2.5-14B-Instruct": 14.77,
    "Qwen2.5-32B-Instruct": 32.76,
    "QwQ-32B": 32.76,
    "Qwen2.5-72B-Instruct": 72.71,
    "Qwen3-8B": 8.19,
    "Qwen3-30B-A3B-Thinking-2507": 30.53,
}


def plan_json(capsys, *argv: str) -> dict:
    assert main(["plan", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_config_plans_by_name_from_any_directory(path, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # a fresh directory: no runs/, no configs/
    plan = plan_json(capsys, "--config", path.stem)
    assert plan["stages"] and all(s["memory"]["peak"] > s["memory"]["params"] > 0 for s in plan["stages"])
    assert all(s["flops"]["device"] >= s["flops"]["model"] > 0 for s in plan["stages"])


def test_the_shipped_recipes_are_the_repository_configs():
    from jaxseeker.train.recipe import CONFIGS_DIR, shipped_configs

    assert CONFIGS and shipped_configs() == [p.stem for p in CONFIGS]
    assert all((CONFIGS_DIR / p.name).read_bytes() == p.read_bytes() for p in CONFIGS)


def test_rl_tiny_states_the_shape_of_the_toy_policy_it_trains(tmp_path):
    from jaxseeker.model import load_config
    from jaxseeker.planning.recipe import SHAPE_FIELDS
    from jaxseeker.train.rl.bench import write_toy

    toy = load_config(write_toy(tmp_path)["policy"])
    stated = recipe("rl_tiny")["model"]
    assert {k: stated[k] for k in SHAPE_FIELDS} == {k: getattr(toy, k) for k in SHAPE_FIELDS}


@pytest.mark.parametrize("path", PAPER_CONFIGS, ids=lambda p: p.name)
def test_paper_configs_have_the_checkpoint_shape_and_fit_their_slice(path, capsys):
    where = [] if "target" in yaml.safe_load(path.read_text()) else ["--chip", "v5p"]  # the target's chips
    plan = plan_json(capsys, "--config", str(path), *where)
    checkpoint = Path(yaml.safe_load(path.read_text())["model"]["hf_path"]).name
    assert plan["model"]["parameters"] / 1e9 == pytest.approx(PARAMETERS[checkpoint], rel=0.005)
    assert plan["fits"], [(s["stage"], s["memory"]["peak"] / 2**30) for s in plan["stages"]]
    assert not [note for note in plan["notes"] if "positions the model serves" in note]  # rows within the positions


def recipe(name: str) -> dict:
    return yaml.safe_load((Path(__file__).parent.parent / "configs" / f"{name}.yaml").read_text())


def test_paper_hyperparameters():
    dancer = recipe("webdancer_qwen2.5-7b_dapo")["rl"]
    assert (dancer["selection"], dancer["group_size"]) == ("dapo", 16)
    for size in ("7b", "32b", "72b"):
        sailor = recipe(f"websailor_qwen2.5-{size}_dupo")
        rl = sailor["rl"]
        assert (
            rl["selection"],
            rl["group_size"],
            rl["batch_questions"],
            rl["batch_questions"] // rl["mini_batches"],
            sailor["optimizer"]["lr"],
        ) == ("dupo", 8, 128, 32, 1e-6)
        assert recipe(f"websailor_qwen2.5-{size}_rft")["optimizer"]["lr"] == 5e-6
    explorer = recipe("webexplorer_qwen3-8b_grpo")
    rl = explorer["rl"]
    assert (rl["selection"], rl["group_size"], rl["batch_questions"], explorer["optimizer"]["lr"]) == (
        "grpo",
        8,
        64,
        1e-6,
    )
    assert [(s["max_context"], s["max_turns"]) for s in rl["context_stages"]] == [
        (65536, 50),
        (98304, 75),
        (131072, 100),
    ]
    seer = recipe("webseer_qwen2.5-14b_srrl")
    assert (seer["rl"]["batch_questions"], seer["rl"]["group_size"], seer["rollout"]["max_tool_calls"]) == (12, 8, 30)
    assert "answer_submit" in seer["tools"]["enabled"] and seer["reward"]["fn"] == "webseer"
    seeker = recipe("openseeker_qwen3-30b-a3b_sft")
    assert seeker["data"]["seq_len"] == 262144 and seeker["model"]["model_type"] == "qwen3_moe"
    assert (seeker["model"]["num_experts"], seeker["model"]["num_experts_per_tok"]) == (128, 8)


def test_paper_rl_configs_pack_their_token_mean_updates():
    recipes = {path.name: yaml.safe_load(path.read_text()) for path in PAPER_CONFIGS}
    rl_sections = {name: r["rl"] for name, r in recipes.items() if "rl" in r}
    assert len(rl_sections) == 8
    for name, rl in rl_sections.items():
        assert rl["objective_kwargs"]["agg"] == "token-mean" and rl["pack"] is True, name
