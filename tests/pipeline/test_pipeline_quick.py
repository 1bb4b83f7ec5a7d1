"""`jaxseeker pipeline --quick` end to end on the synthetic world, then resumed with every stage reused."""

import dataclasses
import json
import shutil

import jax
import numpy as np
import pytest
from quick_support import RECIPE, RFT_LR, go_on_from
from safetensors.numpy import load_file

from jaxseeker.cli import main
from jaxseeker.pipeline import pipeline_config, run_pipeline
from jaxseeker.pipeline.data_config import tools_key
from jaxseeker.pipeline.plots import PLOTS, rl_metrics, write_plots
from jaxseeker.pipeline.report import markdown, rl_stages
from jaxseeker.pipeline.split import split_questions
from jaxseeker.planning.command import recipe_stages
from jaxseeker.planning.fit import plan_rl
from jaxseeker.train.metrics import read_metrics
from jaxseeker.train.recipe import RecipeError, read_recipe
from jaxseeker.world import build_world

pytestmark = pytest.mark.heavy  # a minute or more of CPU: runs first (tests/conftest.py)

# The run before RL's recipe with RL adapters and the average added: RL trains LoRA adapters of its own (the SFT
# was full fine-tuning; full-weight RL in the pipeline: the shipped recipes' quick runs), then the WiSE-FT average.
ADAPTED = {**RECIPE, "rl": {**RECIPE["rl"], "average": 0.25, "model": {"lora": {"rank": 4}}}}


def adapters_and_average_hold(cfg, report: dict, root) -> None:
    """RL trained adapters; the average is the float64 weight mean of the SFT and RL policies; the report gives its
    row, the pool's accuracy at its first and last pass, and the groups per step (the sampled evals beside greedy:
    test_pipeline_shipped_quick.py)."""
    rl_recipe = read_recipe(root / "rl" / "recipe.yaml")
    assert rl_recipe["model"]["lora"] == {"rank": 4} and not cfg.policy.lora
    assert json.loads((root / "rl" / "lora.json").read_text())["rank"] == 4  # the RL run trained adapters
    sft, rl, mean = (load_file(root / d / "hf" / "model.safetensors") for d in ("extend", "rl", "average"))
    assert any(not np.array_equal(sft[key], rl[key]) for key in sft)  # the merged adapters moved the policy
    for key in sft:
        exact = 0.75 * sft[key].astype(np.float64) + 0.25 * rl[key].astype(np.float64)
        np.testing.assert_array_equal(mean[key], exact.astype(mean[key].dtype), err_msg=key)
    assert report["average"] == {"ratio": 0.25, "start": "extend", "tuned": "rl"}
    assert report["average_change"]["questions"] == report["eval_sft"]["questions"]
    rows = read_metrics(root / "rl" / "metrics.jsonl")
    assert [r["pool_pass"] for r in rows] == [1, 1]  # 4 of the 16 pool questions a step: both in the first pass
    pool = report["rl_pool"]
    assert pool["passes"] == 1 and pool["groups"] == 4
    mean = (rows[0]["accuracy"] + rows[1]["accuracy"]) / 2  # 4 groups each
    assert pool["first_pass_accuracy"] == pool["last_pass_accuracy"] == pytest.approx(mean)
    assert pool["informative_groups"] == pytest.approx(sum(r["informative_groups"] for r in rows) / 2)
    text = (root / "report.md").read_text()
    averaged = "RL averaged with SFT (0.75·SFT + 0.25·RL)"
    assert f"| {averaged} | " in text and f"{averaged} (against the SFT policy) changed" in text
    assert "RL pool, sampled accuracy: " in text and "plots/rl_groups.png" in report["plots"]
    assert pool["decode_tokens"] == sum(r["decode_tokens"] for r in rows) > 0  # the engine's count of the two steps
    assert pool["rollout_roofline_s"] == pytest.approx(rows[0]["rollout_roofline_s"] + rows[1]["rollout_roofline_s"])
    rows_a_step = f"{pool['decode_steps']:.0f} decode steps of {pool['decode_tokens'] / pool['decode_steps']:.1f} rows"
    assert f"RL rollouts: {pool['rollout_s']:.1f} s, " in text and rows_a_step in text
    done, memory = json.loads((root / "rl" / "done.json").read_text()), report["rl_memory"]
    planned = plan_rl(rl_recipe)[1] * jax.local_device_count() / 2**30  # the written recipe planned again
    assert memory["plan_peak_gib"] == done["metrics"]["plan_peak_gib"] == pytest.approx(planned)
    assert planned > 0 and memory["of_plan"] == pytest.approx(done["peak_rss_gib"] / (planned + done["start_rss_gib"]))
    assert f"RL memory: peak {done['peak_rss_gib']:.2f} GiB resident, {memory['of_plan']:.2f}x the plan's" in text


def test_quick_pipeline_runs_every_stage_and_resumes(before_rl, tmp_path):
    cfg = pipeline_config(ADAPTED, quick=True)
    assert cfg.stages() == (
        "qa",
        "qa_fresh",
        "expert",
        "tokenizer",
        "warmup",
        "sft",
        "extend",
        "eval_sft",
        "rl",
        "eval_rl",
        "average",
        "eval_average",
    )
    with pytest.raises(ValueError, match="until: 'rl_round2' is not a stage of this config; one of"):
        run_pipeline(cfg, tmp_path, until="rl_round2")
    upstream, report_so_far = before_rl
    assert "eval_sft" in report_so_far and "rl" not in report_so_far and not (upstream / "rl").exists()
    assert "| after SFT |" in (upstream / "report.md").read_text() and "plots/sft_loss.png" in report_so_far["plots"]
    report = run_pipeline(cfg, go_on_from(before_rl, tmp_path), progress=False)  # goes on from there
    assert {"qa", "qa_fresh", "expert", "tokenizer", "warmup", "sft", "extend", "eval_sft"} == set(
        report["reused_stages"]
    )  # the RL keys are not the upstream stages' inputs
    adapters_and_average_hold(cfg, report, tmp_path)
    assert report["qa"]["test"] == cfg.qa.n_test and report["qa"]["train"] > 0
    assert report["expert"]["trajectories"] > 0.5 * report["qa"]["train"]
    assert report["expert"]["untrained_turns"] > 0  # slipped searches, kept in the context out of the loss
    sft_losses = [row["loss"] for row in read_metrics(tmp_path / "sft" / "metrics.jsonl") if "loss" in row]
    assert report["sft"]["final_loss"] == pytest.approx(sft_losses[-1])  # the loss of the last step logged
    warmup = report["warmup"]  # 4 steps: its first and last 50-step means are both the mean of all 4
    assert warmup["steps"] == cfg.policy.copy_warmup_steps == 4 and warmup["first_loss"] == warmup["final_loss"] > 0
    pool = {line.split("\t")[1] for line in (tmp_path / "sft" / "name_pool.tsv").read_text().splitlines()}
    world = build_world(cfg.world.source, size=cfg.world.size, seed=cfg.world.seed)
    held_out = {
        world.entities[i].name
        for f in ("test", "rl")
        for line in (tmp_path / "qa" / f"{f}.jsonl").open()
        for i in json.loads(line)["meta"]["entities"]
    }
    first_calls = [
        json.loads(line)["messages"][2]["content"] for line in (tmp_path / "expert" / "trajectories.jsonl").open()
    ]
    assert len(pool) > 100 and held_out and not held_out & pool  # SFT renames with names no test question is about
    # the first call searches the question's first name unless the expert detours or slips (rates 0.2 and 0.2:
    # about two thirds of the trajectories); over ~100 of them the share lies well above one half
    searched = sum(any(f'"query": ["{name}"]' in call for name in pool) for call in first_calls)
    assert searched > 0.5 * len(first_calls)
    recipe = json.loads(next((tmp_path / "sft" / "checkpoints").glob("*/config/metadata")).read_text())
    assert read_recipe(tmp_path / "sft" / "recipe.yaml") == recipe  # the stage wrote the recipe it ran
    assert (recipe["data"]["copy_rate"], recipe["data"]["copy_gap"]) == (0.5, 16)  # copy replay, shaped as the warm-up
    assert recipe["train"]["steps"] == cfg.sft.train["steps"] == 4 and "lr" not in recipe["optimizer"]  # the default
    rl_recipe = json.loads(next((tmp_path / "rl" / "checkpoints").glob("*/config/metadata")).read_text())
    assert read_recipe(tmp_path / "rl" / "recipe.yaml") == rl_recipe
    assert recipe_stages(rl_recipe).kind == "rl"  # it validates as `jaxseeker rl --config` reads it
    assert rl_recipe["optimizer"] == cfg.rl.optimizer == {"eps": 1e-4} and rl_recipe["rl"]["pack"]  # packed RL rows
    assert rl_recipe["rl"]["epochs"] == cfg.rl.rl["epochs"] == 2
    assert rl_recipe["rl"]["kl_coef"] == cfg.rl.rl["kl_coef"] == 0.01  # a KL penalty to the SFT policy
    assert "advantage" not in rl_recipe["rl"]  # not set: the RL recipe's default (grpo)
    assert rl_recipe["rollout"]["max_context_tokens"] == cfg.eval.max_context  # the eval's limits
    assert rl_recipe["world"] == cfg.world.spec() and rl_recipe["tools"]["enabled"] == ["search", "visit"]
    train = (tmp_path / "qa" / "train.jsonl").read_text().splitlines()
    drawn = (tmp_path / "rl" / "train_questions.jsonl").read_text().splitlines()
    assert len(drawn) == cfg.rl.train_questions == 4 and set(drawn) <= set(train)  # RL pool: RL split + these
    fresh = [json.loads(line) for line in (tmp_path / "rl" / "fresh_questions.jsonl").open()]
    hubs = set(world.ids_of_type("country"))
    seen = {
        i
        for f in ("train", "rl", "test")
        for line in (tmp_path / "qa" / f"{f}.jsonl").open()
        for i in json.loads(line)["meta"]["entities"]
    } - hubs
    assert len(fresh) == cfg.rl.fresh_questions == 4 and not any(set(r["meta"]["entities"]) & seen for r in fresh)
    assert all(r["id"].startswith("fresh-") for r in fresh)  # questions on entities no split holds
    held_out = [json.loads(line) for line in (tmp_path / "qa_fresh" / "test.jsonl").open()]
    pool_entities = {i for r in fresh for i in r["meta"]["entities"]} - hubs
    assert len(held_out) == cfg.eval.fresh_questions == 4 and all(r["id"].startswith("heldout-") for r in held_out)
    assert not any(set(r["meta"]["entities"]) & (seen | pool_entities) for r in held_out)  # apart from RL's pool too
    exported = json.loads((tmp_path / "rl" / "hf" / "config.json").read_text())
    assert exported["rope_theta"] == cfg.policy.rope_theta == 10_000.0  # the policy's shape reaches the export
    assert report["extend"]["seq_len"] == cfg.extend.data["seq_len"] == 4096  # context extension after the SFT
    extended = json.loads(next((tmp_path / "extend" / "checkpoints").glob("*/config/metadata")).read_text())
    assert extended["model"]["hf_path"] == str(upstream / "sft" / "hf") and extended["data"]["batch_size"] == 1
    assert (extended["data"]["copy_rate"], extended["data"]["seed"]) == (0.5, 1)  # the SFT's keys; its own order
    assert rl_recipe["model"]["hf_path"] == str(tmp_path / "extend" / "hf")  # RL (and the evals) start from it
    held_out_n = cfg.qa.n_test + cfg.eval.fresh_questions  # every eval asks the test split and the fresh set
    assert report["eval_sft"]["questions"] == held_out_n
    assert {name: s["questions"] for name, s in report["eval_sft"]["by_set"].items()} == {
        "test": cfg.qa.n_test,
        "fresh": cfg.eval.fresh_questions,
    }
    change = report["rl_change"]  # RL's effect question by question, with a sign test
    assert change["questions"] == held_out_n == sum(lvl["questions"] for lvl in change["by_level"].values())
    assert change["delta_pass_at_1"] == pytest.approx(report["eval_rl"]["pass_at_1"] - report["eval_sft"]["pass_at_1"])
    assert 0.0 < change["p_value"] <= 1.0 and 0.0 < change["p_permutation"] <= 1.0
    assert change["ci95"][0] <= change["delta_pass_at_1"] <= change["ci95"][1]
    saved = json.loads((tmp_path / "report.json").read_text())
    assert saved["eval_sft"] == report["eval_sft"]
    markdown = (tmp_path / "report.md").read_text()
    assert (
        markdown.startswith("# jaxseeker pipeline") and f"{change['gained']} gained, {change['lost']} lost" in markdown
    )
    assert f"95% CI {100 * change['ci95'][0]:+.1f} to {100 * change['ci95'][1]:+.1f}" in markdown
    assert (
        f"RL (against the SFT policy) changed {change['gained'] + change['lost']} of {held_out_n} held-out" in markdown
    )
    assert "| policy | pass@1 | pass@k | invalid | test pass@1 | fresh pass@1 |" in markdown
    assert set(report["plots"]) == {
        "plots/sft_loss.png",
        "plots/extend_loss.png",
        "plots/rl_curves.png",
        "plots/rl_groups.png",
        "plots/tool_calls_sft.png",
        "plots/tool_calls_rl.png",
    }
    for png in report["plots"]:
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"]({png})" in markdown
    again = run_pipeline(cfg, tmp_path, progress=False)
    assert set(again["reused_stages"]) >= {"qa", "tokenizer", "expert", "warmup", "sft", "extend", "eval_sft"}
    same_rows = dataclasses.replace(
        cfg, policy=dataclasses.replace(cfg.policy, copy_warmup_rows=cfg.sft.data["batch_size"])
    )
    assert set(run_pipeline(same_rows, tmp_path, progress=False)["reused_stages"]) >= {"warmup", "sft", "rl", "eval_rl"}
    rloo = dataclasses.replace(cfg, rl=dataclasses.replace(cfg.rl, rl={**cfg.rl.rl, "advantage": "rloo"}))
    done = (tmp_path / "rl" / "done.json").read_text()
    planned = run_pipeline(rloo, tmp_path, dry_run=True)  # another advantage: RL and the stages after it run anew
    after_rl = ["rl", "eval_rl", "average", "eval_average"]
    assert planned["stages_to_run"] == after_rl and len(planned["reused_stages"]) == len(cfg.stages()) - 4
    assert run_pipeline(rloo, tmp_path, dry_run=True, until="rl")["stages_to_run"] == ["rl"]
    assert (tmp_path / "rl" / "done.json").read_text() == done  # a dry run touches nothing
    # The evals depend on their sampling, k and slots (each alone: slots here); RL, the stage after the SFT's evals,
    # does not. The sampled evals keep the slots: their prefill programs are the greedy evals'.
    evals = ["eval_sft", "eval_rl", "eval_average"]
    slots = dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, slots=4))
    assert run_pipeline(slots, tmp_path, dry_run=True)["stages_to_run"] == evals
    sampled = dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, temperature=0.7, top_p=0.9, k=2))
    assert run_pipeline(sampled, tmp_path, dry_run=True)["stages_to_run"] == evals
    resampled = run_pipeline(sampled, tmp_path, progress=False, until="rl")
    assert set(resampled["reused_stages"]) == {"qa", "qa_fresh", "expert", "tokenizer", "warmup", "sft", "extend", "rl"}
    rounds = [json.loads(line)["round"] for line in (tmp_path / "eval_sft" / "results.jsonl").read_text().splitlines()]
    assert sorted(rounds) == sorted([0, 1] * held_out_n)  # k sampled rounds of every held-out question


def test_a_dry_run_lists_the_stages_it_would_run_and_writes_nothing(tmp_path, capsys):
    recipe, out = tmp_path / "t.yaml", tmp_path / "run"
    recipe.write_text("name: t\n")
    assert main(["pipeline", "--config", str(recipe), "--quick", "--out", str(out), "--dry-run"]) == 0
    stages = ", ".join(pipeline_config({"name": "t"}, quick=True).stages())
    assert capsys.readouterr().out.splitlines()[-2:] == [f"would run: {stages}", "reused: nothing"]
    assert not out.exists()


def test_a_stage_recipe_runs_alone(before_rl, tmp_path, capsys):
    """`runs/X/sft/recipe.yaml` is a whole `jaxseeker sft` recipe: it trains with nothing of the pipeline."""
    root, _ = before_rl
    path = root / "sft" / "recipe.yaml"
    assert recipe_stages(read_recipe(path)).kind == "sft"
    out = tmp_path / "alone"
    assert main(["sft", "--config", str(path), "--set", f"train.out_dir={out}", "--set", "train.steps=2"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["final_loss"] > 0 and summary["trained_tokens"] > 0
    assert read_recipe(root / "extend" / "recipe.yaml")["train"]["steps"] == 2  # the extension's is one too


def test_an_eval_stage_stopped_part_way_goes_on_from_its_results(before_rl, tmp_path, capsys):
    root = go_on_from(before_rl, tmp_path)
    _, report_so_far = before_rl
    results = root / "eval_sft" / "results.jsonl"
    whole = results.read_text().splitlines(keepends=True)
    (root / "eval_sft" / "done.json").unlink()
    results.write_text("".join(whole[:2]) + whole[2][:30])  # killed while writing the third record
    capsys.readouterr()
    report = run_pipeline(pipeline_config(RECIPE, quick=True), root, progress=False, until="eval_sft")
    assert "[eval_sft] resuming" in capsys.readouterr().out
    resumed = results.read_text().splitlines(keepends=True)
    assert resumed[:2] == whole[:2] and len(resumed) == len(whole)  # the two finished records stay, once each
    assert report["eval_sft"] == report_so_far["eval_sft"]  # greedy: the same rollouts as the whole run's


def test_a_warmup_stage_stopped_part_way_goes_on_from_its_checkpoint(before_rl, tmp_path, capsys):
    root = go_on_from(before_rl, tmp_path)
    _, report_so_far = before_rl
    whole = load_file(root / "warmup" / "hf" / "model.safetensors")
    (root / "warmup" / "done.json").unlink()
    shutil.rmtree(root / "warmup" / "hf")  # stopped before the grown model was saved
    capsys.readouterr()
    report = run_pipeline(pipeline_config(RECIPE, quick=True), root, progress=False, until="warmup")
    assert "[warmup] resuming" in capsys.readouterr().out
    assert report["warmup"] == report_so_far["warmup"] | {"resumed_from": 4}  # its last checkpoint: all 4 steps
    again = load_file(root / "warmup" / "hf" / "model.safetensors")
    assert again.keys() == whole.keys() and all(np.array_equal(again[k], whole[k]) for k in whole)


def test_the_report_says_how_many_trajectory_draws_sft_cut():
    report = {"name": "x", "sft": {"final_loss": 0.4, "eval_loss": 0.3, "truncated": 650, "seq_len": 1024}}
    assert "eval loss 0.3000; 650 trajectory draws cut at 1024 tokens (their ends never trained)." in markdown(report)
    assert "SFT: final loss 2.5797, eval loss 0.3000." in markdown(
        {"name": "x", "sft": {"final_loss": 2.5796661376953125, "eval_loss": 0.3, "truncated": 0}}
    )
    extended = {**report, "extend": {"final_loss": 0.2, "eval_loss": None, "truncated": 0, "seq_len": 2048}}
    assert "Context extension (rows of 2048 tokens): final loss 0.2000, eval loss —." in markdown(extended)


def test_rft_rounds_are_reported_and_plotted_end_to_end(tmp_path):
    for stage, losses in (("rl", [0.5, 0.4]), ("rl_round2", [0.3, 0.2])):
        (tmp_path / stage).mkdir()
        (tmp_path / stage / "metrics.jsonl").write_text(
            "".join(json.dumps({"step": 3 * (i + 1), "loss": x}) + "\n" for i, x in enumerate(losses))
        )
    assert [(r["step"], r["loss"]) for r in rl_metrics(tmp_path, ["rl", "rl_round2"])] == [
        (3, 0.5),
        (6, 0.4),
        (9, 0.3),
        (12, 0.2),
    ]  # round 2's steps follow round 1's
    assert rl_stages({"rl_round10": {}, "rl": {}, "rl_round2": {}, "rl_change": {}}) == [
        "rl",
        "rl_round2",
        "rl_round10",
    ]
    assert ("rft_loss.png", dict(PLOTS)["rft_loss.png"]) in write_plots(tmp_path, ["rl", "rl_round2"])


def test_split_keeps_test_entities_out_of_training():
    records = [{"id": i, "meta": {"entities": [f"e{i}", f"e{i + 1}", "hub"]}} for i in range(40)]
    parts = split_questions(records, n_test=5, n_rl=5, hub_ids={"hub"}, seed=0)
    test = {e for r in parts["test"] for e in r["meta"]["entities"]} - {"hub"}
    rl = {e for r in parts["rl"] for e in r["meta"]["entities"]} - {"hub"}
    for r in parts["train"]:
        assert not set(r["meta"]["entities"]) & (test | rl)
    for r in parts["rl"]:
        assert not set(r["meta"]["entities"]) & test
    assert len(parts["train"]) + len(parts["rl"]) + len(parts["test"]) + parts["dropped"] == 40


def test_recipe_sections_are_checked_and_the_world_spec_reopens_it():
    cfg = pipeline_config({"world": {"source": "atlas", "countries": ["FR", "DE"]}, "qa": {"e2hqa_rounds": [0, 1]}})
    assert cfg.world.spec() == "atlas:FR,DE" and cfg.qa.e2hqa_rounds == (0, 1)
    assert pipeline_config({"world": {"source": "atlas"}}, quick=True).world.spec() == "synthetic:600:0"
    with pytest.raises(RecipeError, match=r"^qa.e2hqa_rounds must be \[min, max\]"):
        pipeline_config({"qa": {"e2hqa_rounds": [2, 1]}})
    with pytest.raises(RecipeError, match="^eval.prompt must be 'full' or 'compact', got 'short'"):
        pipeline_config({"eval": {"prompt": "short"}})
    with pytest.raises(RecipeError, match=r"eval.temperature must be >= 0 and eval.top_p in \(0, 1\], got 0.5 and 0.0"):
        pipeline_config({"eval": {"temperature": 0.5, "top_p": 0.0}})
    with pytest.raises(
        RecipeError, match="eval.k is 4 with eval.temperature 0: greedy decoding .* repeats one rollout 4"
    ):
        pipeline_config({"eval": {"k": 4}})
    with pytest.raises(
        RecipeError, match=r"policy.tokenizer_split must be one of \['names', 'numbers', 'qwen2'\], got 'bpe'"
    ):
        pipeline_config({"policy": {"tokenizer_split": "bpe"}})
    with pytest.raises(RecipeError, match=r"policy.copy_warmup_layers must lie in \[0, num_layers=4\], got 6"):
        pipeline_config({"policy": {"copy_warmup_layers": 6}})
    with pytest.raises(RecipeError, match=r"policy.copy_warmup_digit_rate must lie in \[0, 1\], got 1.5"):
        pipeline_config({"policy": {"copy_warmup_digit_rate": 1.5}})
    with pytest.raises(RecipeError, match="policy.copy_warmup_gap must be >= 0, got -1"):
        pipeline_config({"policy": {"copy_warmup_gap": -1}})
    with pytest.raises(RecipeError, match="policy.copy_warmup_rows must be >= 0, got -4"):
        pipeline_config({"policy": {"copy_warmup_rows": -4}})
    with pytest.raises(RecipeError, match="rl.train_questions must be >= 0, got -2"):
        pipeline_config({"rl": {"train_questions": -2}})
    with pytest.raises(RecipeError, match="rl.fresh_questions must be >= 0, got -1"):
        pipeline_config({"rl": {"fresh_questions": -1}})
    with pytest.raises(RecipeError, match=r"rl.method must be one of \['pg', 'rft'\], got 'ppo'"):
        pipeline_config({"rl": {"method": "ppo"}})
    with pytest.raises(RecipeError, match="rl.rft_per_question must be >= 1, got 0"):
        pipeline_config({"rl": {"method": "rft", "rft_per_question": 0}, "rft": RFT_LR})
    with pytest.raises(
        RecipeError, match="rl.rft_rounds must be >= 1, and above 1 only with rl.method rft; got 2 with 'pg'"
    ):
        pipeline_config({"rl": {"rft_rounds": 2}})
    rounds = pipeline_config({"rl": {"method": "rft", "rft_rounds": 3}, "rft": RFT_LR})
    assert rounds.rl.stages() == ("rl", "rl_round2", "rl_round3")
    with pytest.raises(
        RecipeError, match="rl.rft_seeds must be >= 1, and above 1 only with rl.method rft; got 4 with 'pg'"
    ):
        pipeline_config({"rl": {"rft_seeds": 4}})
    with pytest.raises(
        RecipeError, match="rl.rft_replay must be >= 0, and above 0 only with rl.method rft; got 8 with 'pg'"
    ):
        pipeline_config({"rl": {"rft_replay": 8}})


def test_the_expert_switches_enter_the_expert_fingerprint_only_when_set():
    plain = pipeline_config({}).expert.key()
    assert "hop_snippets" not in plain and "restate_goal" not in plain  # old runs keep their expert stage
    switched = pipeline_config({"expert": {"hop_snippets": True, "restate_goal": True}}).expert.key()
    assert switched == {**plain, "hop_snippets": True, "restate_goal": True}


def test_the_tools_section_sets_every_rollouts_search_and_visit():
    tools = pipeline_config({"tools": {"visit": {"goal_passages": 2, "max_links": 0}}}).tools
    assert tools.enabled == ("search", "visit") and tools.top_k == 3
    assert (tools.visit.goal_passages, tools.visit.max_links, tools.visit.page_chars) == (2, 0, 400)
    assert not tools.title_first and "title_first" not in tools_key(pipeline_config({}).tools)  # old runs keep keys
    titled = pipeline_config({"tools": {"title_first": True}}).tools
    assert titled.title_first and tools_key(titled)["title_first"] is True
    with pytest.raises(RecipeError, match="tools.visit.goal_passages must be >= 0, got -1"):
        pipeline_config({"tools": {"visit": {"goal_passages": -1}}})
    with pytest.raises(RecipeError, match="tools.passages: unknown key"):
        pipeline_config({"tools": {"passages": 1}})
