"""The RL loop on the real engine, rollout loop, judge and update: a toy policy learns; an interrupted run resumes."""

import argparse
import os
import re
import shutil
import signal
from pathlib import Path

import numpy as np
import pytest
import transformers
from cli_support import usage_error

from jaxseeker.agent import Episode, RolloutConfig, read_episodes
from jaxseeker.train.interrupt import Interrupted
from jaxseeker.train.metrics import MetricsWriter, read_metrics
from jaxseeker.train.recipe import RecipeError, read_recipe
from jaxseeker.train.rl.bench import TOY_ANSWER, write_toy
from jaxseeker.train.rl.command import add_parser
from jaxseeker.train.rl.config import ROW_BUCKET
from jaxseeker.train.rl.loop import ContextStage, RLConfig, context_stages, run_rl, stage_at
from jaxseeker.train.rl.update import row_length

pytestmark = pytest.mark.heavy  # a minute or more of CPU: runs first (tests/conftest.py)

CONFIG = Path(__file__).parents[3] / "configs" / "rl_tiny.yaml"
STEPS = 5


def overrides(paths: dict, out_dir: Path, *extra: str) -> list[str]:
    """`--set` values that point the example recipe at a toy written under tmp."""
    return [f"model.hf_path={paths['policy']}", f"rl.questions=[{paths['questions']}]", f"rl.out_dir={out_dir}", *extra]


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    """The example recipe on the toy colour task for STEPS steps (checkpoints at 2, 4 and the end)."""
    root = tmp_path_factory.mktemp("rl")
    paths = write_toy(root / "toy")
    out = root / "run"
    summary = run_rl(
        read_recipe(CONFIG, overrides(paths, out, f"rl.steps={STEPS}", "rl.checkpoint_every=2", "rl.episodes_every=1")),
        progress=False,
    )
    return paths, out, summary, read_metrics(out / "metrics.jsonl")


def test_toy_policy_learns_the_answer_within_a_few_steps(toy_run):
    _, out, summary, rows = toy_run
    accuracy = [r["accuracy"] for r in rows]
    assert [r["step"] for r in rows] == list(range(1, STEPS + 1))
    assert np.mean(accuracy[:2]) < 0.5  # a quarter of the colours are right at the start
    assert np.mean(accuracy[-2:]) > np.mean(accuracy[:2]) + 0.3
    assert summary["final_reward"] > summary["first_reward"]
    first = rows[0]
    assert first["format_rate"] == 1.0 and first["term_answer"] == 1.0 and first["groups"] == 4
    assert "logp_mismatch" not in first  # the engine's log-probs are the old ones: no extra forward
    assert 0 <= first["approx_kl"] < 0.1  # mean over 2 mini-batches: the second trains after one update
    assert 0 < first["entropy"] and first["grad_norm"] > 0 and first["skipped_update"] == 0.0
    for key in ("rollout_s", "reward_s", "old_logp_s", "update_s", "step_s"):
        assert first[key] > 0, key
    assert (out / "rl_curves.png").exists() and list((out / "tensorboard").iterdir())

    first_step = read_episodes(out / "episodes" / "step_000001.jsonl")
    correct = np.array([e.meta["rl"]["correct"] for e in first_step], dtype=bool).reshape(int(first["groups"]), -1)
    assert (first["solved_groups"], first["unsolved_groups"]) == (correct.all(1).sum(), (~correct.any(1)).sum())
    assert max(r["solved_groups"] for r in rows[-2:]) > first["solved_groups"]  # groups all right as it learns

    episodes = read_episodes(out / "episodes" / f"step_{STEPS:06d}.jsonl")
    assert len(episodes) == 32
    right = [e for e in episodes if e.meta["rl"]["correct"]]
    assert right and all(e.prediction == TOY_ANSWER and e.meta["rl"]["reward"] == pytest.approx(1.0) for e in right)
    turn = episodes[0].messages[-1]["content"]
    assert turn.startswith("<think>") and turn.endswith("</answer>")


def test_a_standalone_rl_run_exports_to_transformers(toy_run, tmp_path):
    from jaxseeker.train.export import export_hf, restore_run

    _, out, _, _ = toy_run
    hf_dir = export_hf(out, tmp_path / "hf")  # the run directory alone: its config, tokenizer and checkpoints
    hf = transformers.AutoModelForCausalLM.from_pretrained(hf_dir)
    assert transformers.AutoTokenizer.from_pretrained(hf_dir).eos_token == "<|im_end|>"
    _, cfg, params = restore_run(out)
    embed = hf.get_input_embeddings().weight.detach().numpy()
    np.testing.assert_array_equal(embed, np.asarray(params["embed"]))  # the last step's weights, as trained
    assert hf.config.num_hidden_layers == cfg.num_layers


def test_resume_after_a_kill_then_a_sigterm_repeats_the_uninterrupted_steps(toy_run, capsys, monkeypatch):
    """Resumed from step 2 as if killed before checkpoints 4 and 5 were written, the run is sent SIGTERM during step
    3 (a preempted VM): it saves that step in flight and stops; resumed again, it trains steps 4 and 5."""
    paths, out, _, rows = toy_run
    killed = out.parent / "killed"
    shutil.copytree(out / "checkpoints" / "2", killed / "checkpoints" / "2")
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    args = parser.parse_args(
        [
            "rl",
            "--config",
            str(CONFIG),
            "--resume",
            "--no-progress",
            *[a for s in overrides(paths, killed, f"rl.steps={STEPS}") for a in ("--set", s)],
        ]
    )
    write = MetricsWriter.write

    def preempted_during_step_3(self, step, metrics, prefix=""):
        write(self, step, metrics, prefix)
        if step == 3:
            os.kill(os.getpid(), signal.SIGTERM)  # what a preempted cloud VM receives

    monkeypatch.setattr(MetricsWriter, "write", preempted_during_step_3)
    with pytest.raises(Interrupted, match="stopped by SIGTERM after step 3"):
        args.func(args)
    monkeypatch.undo()
    assert [r["step"] for r in read_metrics(killed / "metrics.jsonl")] == [3]  # resumed from 2, stopped in 3
    assert sorted(p.name for p in (killed / "checkpoints").iterdir()) == ["2", "3"]  # 3: saved every 5, forced
    capsys.readouterr()
    assert args.func(args) == 0
    assert re.search(r"resumed_from +3\n", capsys.readouterr().out)
    resumed = {r["step"]: r for r in read_metrics(killed / "metrics.jsonl")}
    assert sorted(resumed) == [3, 4, 5]
    for row in rows[2:]:
        for key in ("reward", "accuracy", "loss", "grad_norm", "entropy"):
            assert resumed[row["step"]][key] == pytest.approx(row[key], rel=1e-5, abs=1e-7), (row["step"], key)


def test_packed_update_rows_train_as_one_row_per_episode(toy_run, tmp_path):
    paths, _, _, rows = toy_run
    out = tmp_path / "packed"
    stage = "rl.context_stages=[{step: 0, max_context: 768, max_turns: 4}]"  # no toy episode reaches 160 tokens
    run_rl(read_recipe(CONFIG, overrides(paths, out, "rl.steps=1", "rl.pack=true", stage)), progress=False)
    packed, single = read_metrics(out / "metrics.jsonl")[0], rows[0]
    kept = round(32 * (1 - single["dropped_episodes"]))  # the step's 32 episodes but those of flat groups (A = 0)
    assert kept > 0 and single["update_rows"] == kept and packed["update_rows"] < kept  # one a row; 3 or 4 a row
    assert 0.5 < packed["row_fill"] < 1
    for key in ("reward", "loss", "grad_norm", "entropy", "approx_kl"):  # same rollouts, same update
        assert packed[key] == pytest.approx(single[key], rel=1e-4, abs=1e-6), key


def test_kl_penalty_measures_the_distance_from_the_starting_policy(toy_run, tmp_path):
    paths, _, _, rows = toy_run
    out = tmp_path / "kl"
    run_rl(read_recipe(CONFIG, overrides(paths, out, "rl.steps=1", "rl.kl_coef=0.5", "rl.epochs=2")), progress=False)
    row = read_metrics(out / "metrics.jsonl")[0]
    assert row["reward"] == pytest.approx(rows[0]["reward"])  # the same policy rolled out the same episodes
    assert row["kl"] > 0, "the second pass starts from updated weights, away from the reference"


def test_gspo_with_kl_in_the_reward_importance_weights_overlong_filter_and_accumulation(toy_run, tmp_path):
    """The built-in GSPO objective with every correction between rollouts and update on, on a context (118 tokens)
    that cuts about two thirds of the toy episodes (`max_context`): those train on no token, the KL coefficient
    adapts toward its target from the KL of step 1 (0: the policy is the reference), the engine's log-probs weigh
    the tokens by about 1, and two mini-batches make one optimizer update."""
    paths, _, _, _ = toy_run
    out = tmp_path / "corrections"
    recipe = read_recipe(
        CONFIG,
        overrides(
            paths,
            out,
            "rl.steps=2",
            "rl.episodes_every=1",
            "rl.context_stages=[{step: 0, max_context: 118, max_turns: 4}]",
            "rl.objective=gspo",
            "rl.objective_kwargs={eps_low: 0.2, eps_high: 0.28}",
            "rl.overlong_filter=true",
            "rl.kl_reward_coef=0.05",
            "rl.kl_reward_target=0.01",
            "rl.kl_reward_horizon=320",
            "rl.entropy_coef=0.01",
            "rl.tis_cap=2.0",
            "optimizer.grad_accum=2",
        ),
    )
    run_rl(recipe, progress=False)
    rows = read_metrics(out / "metrics.jsonl")
    assert rows[0]["kl_reward"] == 0.0 and rows[0]["kl_reward_coef"] == pytest.approx(0.05)
    assert rows[1]["kl_reward_coef"] == pytest.approx(0.05 * (1 - 0.2 * 32 / 320))  # KL 0 < target: β shrinks
    assert rows[1]["kl_reward"] != 0.0  # step 2's policy has moved from the reference
    for step, row in enumerate(rows, 1):
        episodes = read_episodes(out / "episodes" / f"step_{step:06d}.jsonl")
        cut = [e.termination == "max_context" for e in episodes]
        assert 0 < np.mean(cut) < 1 and row["overlong_filtered"] == pytest.approx(np.mean(cut))
        trained = sum(e.num_sampled for e, c in zip(episodes, cut) if not c)
        assert row["n_tokens"] * 2 == trained  # the cut episodes' tokens are out of both mini-batches
        assert abs(row["tis_weight_mean"] - 1) < 1e-3 and row["tis_clip_frac"] == 0.0
        assert np.isfinite(row["loss"]) and row["grad_norm"] > 0


ZERO_ADVANTAGE = '''
import jax.numpy as jnp

def nothing_to_learn(rewards, group_size):
    """Every rollout as good as its group: no policy gradient."""
    return jnp.zeros_like(rewards)
'''


def test_the_advantage_a_recipe_names_feeds_the_update(toy_run, tmp_path, monkeypatch):
    paths, _, _, rows = toy_run
    (tmp_path / "zero_advantage.py").write_text(ZERO_ADVANTAGE)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "zero"
    run_rl(
        read_recipe(CONFIG, overrides(paths, out, "rl.steps=1", "rl.advantage=zero_advantage:nothing_to_learn")),
        progress=False,
    )
    row = read_metrics(out / "metrics.jsonl")[0]
    assert row["reward"] == pytest.approx(rows[0]["reward"])  # the same rollouts as the GRPO run
    assert rows[0]["grad_norm"] > 0 and row["grad_norm"] == 0.0 and row["loss"] == 0.0


ROW_OBJECTIVE = '''
from jaxseeker import losses

def row_mean(logp, old_logp, advantages, mask):
    """-mean over rows of the row's mean A * logp: a packed row would be taken for one episode."""
    return -losses.masked_mean(losses.masked_mean(advantages * logp, mask, axis=-1), mask.any(axis=-1)), {}
'''


def test_bad_recipes_name_the_key(toy_run, tmp_path, monkeypatch):
    paths, out, _, _ = toy_run
    (tmp_path / "row_objective.py").write_text(ROW_OBJECTIVE)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RecipeError, match=r"rl: unknown keys \['stepz'\]"):
        run_rl(read_recipe(CONFIG, overrides(paths, out, "rl.stepz=3")), progress=False)
    with pytest.raises(RecipeError, match=r"selection 'ppo' is not one of"):
        run_rl(read_recipe(CONFIG, overrides(paths, out, "rl.selection=ppo")), progress=False)
    with pytest.raises(RecipeError, match="do not split into mini_batches=3"):
        run_rl(read_recipe(CONFIG, overrides(paths, out, "rl.mini_batches=3")), progress=False)
    with pytest.raises(RecipeError, match="rl.objective 'row_objective:row_mean' takes no `segment_ids`"):
        packed_row_mean = overrides(
            paths, out, "rl.pack=true", "rl.objective=row_objective:row_mean", "rl.objective_kwargs={}"
        )
        run_rl(read_recipe(CONFIG, packed_row_mean), progress=False)
    with pytest.raises(RecipeError, match="unknown advantage 'gae'; known names: dr_grpo, grpo, rloo"):
        run_rl(read_recipe(CONFIG, overrides(paths, out, "rl.advantage=gae")), progress=False)
    with pytest.raises(RecipeError, match=r"rl.advantage_kwargs: unknown keys \['std'\]; group_advantages takes"):
        run_rl(read_recipe(CONFIG, overrides(paths, out, "rl.advantage_kwargs.std=false")), progress=False)
    with pytest.raises(RecipeError, match="unknown reward function 'dancer'"):
        run_rl(read_recipe(CONFIG, overrides(paths, out, "reward.fn=dancer")), progress=False)


def test_progressive_context_stages_switch_at_their_steps():
    stages = [
        {"step": 0, "max_context": 65536, "max_turns": 50},
        {"step": 30, "max_context": 98304, "max_turns": 75},
        {"step": 60, "max_context": 131072, "max_turns": 100},
    ]
    ordered = context_stages(RLConfig(context_stages=stages[::-1]), RolloutConfig())
    assert [stage_at(ordered, s).max_context for s in (0, 29, 30, 59, 60, 500)] == [
        65536,
        65536,
        98304,
        98304,
        131072,
        131072,
    ]
    assert stage_at(ordered, 45).max_turns == 75
    default = context_stages(RLConfig(), RolloutConfig(max_context_tokens=4096, max_tool_calls=9))
    assert default == [ContextStage(0, 4096, 9)]
    with pytest.raises(RecipeError, match="first stage must start at step 0"):
        context_stages(RLConfig(context_stages=stages[1:]), RolloutConfig())


def test_update_rows_fit_the_longest_episode_not_the_whole_context():
    def episode(n):
        return Episode("q", [], list(range(n)), [0] * n, [0.0] * n, "answer")

    assert row_length([episode(10), episode(ROW_BUCKET + 1)], 8192) == ROW_BUCKET
    assert row_length([episode(10), episode(ROW_BUCKET + 2)], 8192) == 2 * ROW_BUCKET
    assert row_length([episode(5000)], 1024) == 1024


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--hidden-size", "13"], "--hidden-size: must be an integer >= 14, got 13"),
        (["--num-layers", "0"], "--num-layers: must be an integer >= 1, got 0"),
        (["--questions", "0"], "--questions: must be an integer >= 1, got 0"),
        (["--group-size", "0"], "--group-size: must be an integer >= 1, got 0"),
        (["--mini-batches", "0"], "--mini-batches: must be an integer >= 1, got 0"),
        (["--max-context", "1"], "--max-context: must be an integer >= 2, got 1"),
        (["--think-tokens", "0.9"], "--think-tokens: must be a number >= 1, got 0.9"),
        (["--tool-p", "1"], "--tool-p: must be a number >= 0 and < 1, got 1"),
        (["--tool-p", "-0.1"], "--tool-p: must be a number >= 0 and < 1, got -0.1"),
        (["--steps", "0"], "--steps: must be an integer >= 1, got 0"),
    ],
)
def test_bench_rl_flags_out_of_range_are_usage_errors(argv, message, capsys):
    assert usage_error(["bench", "rl", *argv], capsys) == f"jaxseeker bench rl: error: argument {message}"


def test_bench_rl_episodes_that_do_not_split_into_mini_batches_end_before_the_run():
    from jaxseeker.cli import build_parser

    args = build_parser().parse_args(["bench", "rl", "--questions", "3", "--group-size", "3", "--mini-batches", "2"])
    with pytest.raises(SystemExit) as exit_:
        args.func(args)
    assert str(exit_.value.code) == (
        "jaxseeker bench rl: --questions × --group-size = 9 episodes do not split into --mini-batches 2"
    )
