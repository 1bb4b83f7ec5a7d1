"""The pipeline from a pretrained policy (`policy.init`): no tokenizer stage, a zero-shot eval, SFT from its weights."""

import dataclasses
import json

import jax
import pytest

from jaxseeker import model
from jaxseeker.data import train_tokenizer
from jaxseeker.pipeline import pipeline_config, run_pipeline
from jaxseeker.train.recipe import RecipeError
from jaxseeker.world import build_world

pytestmark = pytest.mark.heavy  # a minute or more of CPU: runs first (tests/conftest.py)

WORLD = {"source": "synthetic", "size": 600}


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """A tiny Llama-shaped 'pretrained' model directory with its own tokenizer and chat template."""
    out = tmp_path_factory.mktemp("init")
    world = build_world("synthetic", size=600, seed=0)
    tok = train_tokenizer([f"{p.title}\n{p.text}" for p in world.corpus.pages], 700, out)
    cfg = model.ModelConfig.tiny("llama", vocab_size=len(tok), max_position_embeddings=4096)
    model.save_hf(model.init_params(cfg, jax.random.key(0)), cfg, out)
    return out


@pytest.fixture(scope="module")
def run(pretrained, tmp_path_factory):
    """The pipeline from that model up to the eval after SFT (RL from there is the quick pipeline's)."""
    recipe = {
        "name": "p",
        "world": WORLD,
        "qa": {"recipes": {"e2hqa": 60}, "n_test": 4, "n_rl": 4},
        "expert": {"tries": 1},
        "policy": {"init": str(pretrained)},
        "sft": {"data": {"seq_len": 2048, "batch_size": 1}, "optimizer": {"warmup_steps": 1}, "train": {"steps": 2}},
        # the tokenizer knows only the pages: tool calls and thoughts take many tokens
        "eval": {
            "slots": 6,  # the 6 questions in one wave
            "max_context": 6144,
            "max_tool_calls": 8,
            "max_tokens_per_turn": 256,
            "fresh_questions": 2,
        },
    }
    cfg = pipeline_config(recipe)
    root = tmp_path_factory.mktemp("run")
    return cfg, root, run_pipeline(cfg, root, progress=False, until="eval_sft")


def test_a_pretrained_policy_brings_its_tokenizer_and_is_measured_before_sft(pretrained, run):
    cfg, root, _ = run
    assert cfg.stages() == ("qa", "qa_fresh", "expert", "eval_base", "sft", "eval_sft", "rl", "eval_rl")
    assert not (root / "tokenizer").exists()
    recipe = json.loads(next((root / "sft" / "checkpoints").glob("*/config/metadata")).read_text())
    assert recipe["model"] == {"hf_path": str(pretrained), "attention_impl": "blocked"}
    assert recipe["train"]["tokenizer"] == str(pretrained)
    base = [json.loads(line) for line in (root / "eval_base" / "results.jsonl").open()]
    assert sorted(r["question_id"] for r in base) == sorted(
        [json.loads(line)["id"] for line in (root / "qa" / "test.jsonl").open()]
        + [json.loads(line)["id"] for line in (root / "qa_fresh" / "test.jsonl").open()]
    )
    done = json.loads((root / "eval_base" / "done.json").read_text())["metrics"]
    assert done["questions"] == cfg.qa.n_test + cfg.eval.fresh_questions == 6
    sft = json.loads((root / "eval_sft" / "done.json").read_text())["metrics"]
    assert {name: s["questions"] for name, s in sft["by_set"].items()} == {"test": 4, "fresh": 2}


def test_other_tools_rerun_every_rollout_stage_the_zero_shot_eval_included(run):
    cfg, root, _ = run
    tools = dataclasses.replace(cfg.tools, top_k=cfg.tools.top_k + 1)
    planned = run_pipeline(dataclasses.replace(cfg, tools=tools), root, dry_run=True, until="eval_sft")
    assert (planned["reused_stages"], planned["stages_to_run"]) == (
        ["qa", "qa_fresh"],
        ["expert", "eval_base", "sft", "eval_sft"],
    )


def test_the_expert_counts_context_with_the_policys_own_tokenizer(pretrained, run):
    cfg, root, _ = run
    from jaxseeker.data import load_tokenizer
    from jaxseeker.data.chat import tokenize_chat

    tok = load_tokenizer(pretrained)
    lengths = [
        len(tokenize_chat(json.loads(line)["messages"], tok)[0])
        for line in (root / "expert" / "trajectories.jsonl").open()
    ]
    assert lengths and max(lengths) <= cfg.eval.max_context  # the eval's own limit, in the policy's tokens


def test_the_report_sets_sft_against_the_zero_shot_policy(run):
    cfg, root, report = run
    change = report["sft_change"]
    assert change["questions"] == 6
    assert change["delta_pass_at_1"] == pytest.approx(
        report["eval_sft"]["pass_at_1"] - report["eval_base"]["pass_at_1"]
    )
    md = (root / "report.md").read_text()
    assert "| zero-shot |" in md and "| after SFT |" in md
    assert "SFT (against the zero-shot policy) changed" in md
    assert "rl_change" not in report and not (root / "rl").exists()  # the run stopped after eval_sft


def test_a_warm_up_makes_no_sense_for_a_pretrained_policy():
    with pytest.raises(RecipeError, match="policy.copy_warmup_steps trains a from-scratch policy's copying heads"):
        pipeline_config({"policy": {"init": "smollm2-135m-instruct", "copy_warmup_steps": 10}})
    with pytest.raises(RecipeError, match=r"sft.data.copy_rate \(0.5\) replays a from-scratch policy's copy warm-up"):
        pipeline_config({"policy": {"init": "smollm2-135m-instruct"}, "sft": {"data": {"copy_rate": 0.5}}})
