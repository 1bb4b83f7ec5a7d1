"""Variants of `jaxseeker pipeline --quick`, each going on from the quick run stopped before RL (conftest.py):
rejection-sampling fine-tuning rounds, SFT seeds averaged (RL adapters with the WiSE-FT average: the run of
test_pipeline_quick.py)."""

import dataclasses
import json

import numpy as np
import pytest
from quick_support import RECIPE, RFT_LR, go_on_from
from safetensors.numpy import load_file

from jaxseeker.pipeline import pipeline_config, run_pipeline
from jaxseeker.pipeline.quick import quick_recipe
from jaxseeker.train.recipe import RecipeError, merged, read_recipe

pytestmark = pytest.mark.heavy  # a minute or more of CPU: runs first (tests/conftest.py)


def stand_in_for_the_expert(rollouts, expert, round_):
    """Make the `round_` rollout of each training question in the pool answer as the expert did; returns those."""
    records = [json.loads(line) for line in rollouts.open()]
    right = [r for r in records if r["round"] == round_ and r["question"] in expert]
    for r in right:
        r.update(messages=expert[r["question"]]["messages"], correct=True, format_ok=True, termination="answer")
    rollouts.write_text("".join(json.dumps(r) + "\n" for r in records))
    return right


def test_rft_rounds_resume_from_their_rollouts_and_fine_tune_on_the_right_ones(before_rl, tmp_path):
    rft = {  # laid over the quick recipe (`--quick` itself runs the policy gradient: its policy answers nothing)
        "name": "t-quick",
        "rl": {"method": "rft", "rft_rounds": 2, "rft_seeds": 2, "rft_replay": 3},
        "rft": {
            "data": {"unlikelihood_weight": 0.5, "seq_len": 2048, "batch_size": 1},
            "train": {"steps": 2},
            **RFT_LR,
        },
    }
    cfg = pipeline_config(merged(quick_recipe(RECIPE), rft, 1))
    go_on_from(before_rl, tmp_path)  # the RL keys are not the upstream stages' inputs
    pool = cfg.qa.n_rl + cfg.rl.train_questions + cfg.rl.fresh_questions
    episodes = pool * cfg.rl.rl["group_size"]
    with pytest.raises(
        RuntimeError, match=f"round 1\\): none of the {episodes} rollouts of {pool} questions was right"
    ):
        run_pipeline(cfg, tmp_path, progress=False)  # the 4-step quick policy answers nothing
    rollouts = tmp_path / "rl" / "rollouts" / "results.jsonl"
    assert {json.loads(line)["round"] for line in rollouts.open()} == {0, 1} and len(
        rollouts.read_text().splitlines()
    ) == episodes
    # A better policy stands in: the first rollout of each training question of the pool answers as the expert did.
    expert = {t["question"]: t for t in map(json.loads, (tmp_path / "expert" / "trajectories.jsonl").open())}
    right = stand_in_for_the_expert(rollouts, expert, 0)
    with pytest.raises(RuntimeError, match="round 2\\): none of"):  # round 1 fine-tunes, its policy answers nothing
        run_pipeline(cfg, tmp_path, progress=False)
    kept = [json.loads(line) for line in (tmp_path / "rl" / "trajectories.jsonl").open()]
    assert right and [t["messages"] for t in kept] == [r["messages"] for r in right]
    # The other rollouts' malformed turns (the quick policy breaks the format) are trained to be unlikely.
    rejected = [json.loads(line) for line in (tmp_path / "rl" / "rejected.jsonl").open()]
    assert rejected and all(-1 in [m.get("weight") for m in t["messages"]] for t in rejected)
    # Three of the expert's SFT trajectories are replayed with them, a sample seeded by the round.
    replay = [json.loads(line) for line in (tmp_path / "rl" / "replay.jsonl").open()]
    assert len(replay) == 3 and all(expert[t["question"]] == t for t in replay)
    recipe = json.loads(next((tmp_path / "rl" / "checkpoints").glob("*/config/metadata")).read_text())
    assert recipe["train"]["train_files"] == [
        str(tmp_path / "rl" / name) for name in ("trajectories.jsonl", "rejected.jsonl", "replay.jsonl")
    ]
    assert recipe["data"]["unlikelihood_weight"] == 0.5
    assert recipe["model"]["hf_path"] == str(tmp_path / "extend" / "hf") and recipe["train"]["steps"] == 2
    assert recipe["data"]["seq_len"] == cfg.rft.data["seq_len"] == cfg.eval.max_context  # rows hold whole episodes
    assert recipe["data"]["copy_rate"] == cfg.sft.data["copy_rate"]  # the rest of the fine-tune is the SFT's recipe
    assert read_recipe(tmp_path / "rl" / "recipe.yaml") == recipe
    # rft_seeds 2: a second fine-tune on its own data order under seeds/2; the policy is the two's weight mean.
    second_seed = json.loads(
        next((tmp_path / "rl" / "seeds" / "2" / "checkpoints").glob("*/config/metadata")).read_text()
    )
    assert (recipe["data"]["seed"], second_seed["data"]["seed"]) == (2, 12)
    assert second_seed["train"]["train_files"] == recipe["train"]["train_files"]
    assert (recipe["name"], second_seed["name"]) == (f"{cfg.name}-rl", f"{cfg.name}-rl-seeds-2")
    one, two, mean = (
        load_file(tmp_path / "rl" / path / "model.safetensors") for path in ("seeds/1/hf", "seeds/2/hf", "hf")
    )
    assert not np.allclose(one["model.norm.weight"], two["model.norm.weight"])
    for key in one:
        np.testing.assert_allclose(mean[key], (one[key] + two[key]) / 2, atol=1e-6)
    # Round 2 rolled out round 1's policy on the same pool; its second rollouts now stand in.
    second = stand_in_for_the_expert(tmp_path / "rl_round2" / "rollouts" / "results.jsonl", expert, 1)
    report = run_pipeline(cfg, tmp_path, progress=False)  # resumes: round 1 reused, round 2 fine-tunes
    assert "rl" in report["reused_stages"] and "rl_round2" not in report["reused_stages"]
    for stage, stood_in in (("rl", right), ("rl_round2", second)):
        rft = report[stage]["rft"]
        assert (rft["episodes"], rft["questions"]) == (episodes, pool)
        assert rft["right"] == rft["kept"] == rft["kept_questions"] == len(stood_in)
    assert report["rl"]["rft"]["rejected"] == len(rejected) and report["rl"]["rft"]["rejected_turns"] >= len(rejected)
    assert report["rl"]["rft"]["replayed"] == report["rl_round2"]["rft"]["replayed"] == 3
    recipe = json.loads(next((tmp_path / "rl_round2" / "checkpoints").glob("*/config/metadata")).read_text())
    assert recipe["model"]["hf_path"] == str(tmp_path / "rl" / "hf") and recipe["data"]["seed"] == 3
    assert recipe["train"]["train_files"][0] == str(tmp_path / "rl_round2" / "trajectories.jsonl")
    second_replay = [json.loads(line) for line in (tmp_path / "rl_round2" / "replay.jsonl").open()]
    assert len(second_replay) == 3 and second_replay != replay  # round 2 draws its own sample
    assert (tmp_path / "rl_round2" / "hf" / "config.json").exists()
    rollouts = [json.loads(line) for line in (tmp_path / "eval_rl" / "results.jsonl").read_text().splitlines()]
    assert len(rollouts) == cfg.eval.k * report["eval_rl"]["questions"]  # k rounds a question
    assert report["eval_rl"]["pass_at_1"] == pytest.approx(np.mean([r["correct"] is True for r in rollouts]))
    assert "plots/rft_loss.png" in report["plots"] and "plots/rl_curves.png" not in report["plots"]
    md = (tmp_path / "report.md").read_text()
    assert f"RL by rejection-sampling fine-tuning: {len(right)} of {episodes} rollouts right" in md
    assert f"malformed turns of {len(rejected)} episodes made unlikely, with 3 expert trajectories replayed" in md
    assert report["rl"]["seeds"] == 2 and len(report["rl"]["seed_final_losses"]) == 2
    assert md.count("the policy is the weight mean of 2 fine-tunes on their own data orders") == 2  # both rounds
    assert f"fine-tuning, round 2 (from round 1's policy): {len(second)} of {episodes} rollouts right" in md


def test_sft_seeds_make_the_sft_policy_the_weight_mean_of_fine_tunes_on_their_own_data_orders(before_rl, tmp_path):
    cfg = pipeline_config(merged(RECIPE, {"policy": {"sft_seeds": 2}}, 2), quick=True)
    cfg = dataclasses.replace(cfg, sft=dataclasses.replace(cfg.sft, train={**cfg.sft.train, "steps": 2}))  # 2 a member
    go_on_from(before_rl, tmp_path)
    report = run_pipeline(cfg, tmp_path, progress=False, until="sft")
    assert "sft" not in report["reused_stages"]
    assert report["sft"]["seeds"] == 2 and len(report["sft"]["seed_final_losses"]) == 2
    first, second = (
        json.loads(next((tmp_path / "sft" / path / "checkpoints").glob("*/config/metadata")).read_text())
        for path in (".", "seeds/2")
    )
    assert (first["name"], second["name"]) == (f"{cfg.name}-sft", f"{cfg.name}-sft-seeds-2")
    assert second["data"]["seed"] == first["data"].get("seed", 0) + 1  # its own data order
    assert second["train"]["train_files"] == first["train"]["train_files"]
    one, two, mean = (
        load_file(tmp_path / "sft" / path / "model.safetensors") for path in ("seeds/1/hf", "seeds/2/hf", "hf")
    )
    assert not np.allclose(one["model.norm.weight"], two["model.norm.weight"])
    for key in one:
        np.testing.assert_allclose(mean[key], (one[key] + two[key]) / 2, atol=1e-6)
    md = (tmp_path / "report.md").read_text()
    assert "; the policy is the weight mean of 2 fine-tunes on their own data orders." in md
    with pytest.raises(RecipeError, match="policy.sft_seeds must be >= 1, got 0"):
        pipeline_config({"policy": {"sft_seeds": 0}})
