"""SRRL (WebSeer) episodes through the real rollout loop and RL scoring, with a scripted policy; DUPO pre-filter."""

import dataclasses
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from jaxseeker.agent import ScriptedEngine, prompts
from jaxseeker.data import load_tokenizer
from jaxseeker.train.recipe import read_recipe
from jaxseeker.train.rl.bench import write_toy
from jaxseeker.train.rl.collect import collect, dupo_pool, stage_rollout_config
from jaxseeker.train.rl.loop import prepare
from jaxseeker.train.rl.scoring import QuestionSampler

CONFIG = Path(__file__).parents[3] / "configs" / "rl_tiny.yaml"
QUESTIONS = [
    {"question": "Who founded Velmora?", "answer": "Ida Konst"},
    {"question": "Name the founder of Velmora.", "answer": "Ida Konst"},
    {"question": "Which river flows through Velmora?", "answer": "Ostra"},
]


def submit(answer: str) -> str:
    return (
        f'<think>Try {answer}.</think>\n<tool_call>\n{{"name": "answer_submit", "arguments": '
        f'{{"answer": "{answer}"}}}}\n</tool_call>'
    )


def scripted_policy():
    """Episodes of the founder questions alternate between two paths; the river question is always right.

    path A: "Ida" (F1 0.67), then "Ida Konst" (correct: the episode ends after 2 submissions).
    path B: "Velmora" (F1 0), "Konst" (0.67), "Ida" (0.67): the third submission is the last allowed.
    """
    episode = itertools.count()

    def script(context: str, turn: int) -> str:
        if "Which river" in context:
            return submit("Ostra")
        if turn == 0:
            return submit("Ida" if next(episode) % 2 == 0 else "Velmora")
        return submit("Ida Konst") if "Try Ida." in context else submit(["Konst", "Ida"][turn - 1])

    return script


@pytest.fixture(scope="module")
def srrl_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("srrl")
    paths = write_toy(root / "toy")
    paths["questions"] = str(root / "questions.jsonl")
    (root / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    recipe = read_recipe(
        CONFIG,
        [
            f"model.hf_path={paths['policy']}",
            f"rl.questions=[{paths['questions']}]",
            f"rl.out_dir={root / 'run'}",
            "tools.enabled=[answer_submit]",
            "rollout.max_submissions=3",
            "rollout.max_tokens_per_turn=256",
            "rl.selection=dupo",
            "rl.dupo_filter_rollouts=2",
            "rl.batch_questions=2",
            "rl.group_size=2",
            "rl.mini_batches=1",
            "rl.context_stages=[{step: 0, max_context: 1024, max_turns: 8}]",
            "reward.fn=webseer",
            "reward.judge=f1",
            "reward.kwargs={l_expect: 400, l_max: 800, alpha: 0.9}",
        ],
    )
    tokenizer = load_tokenizer(paths["policy"])
    eos_ids, stops = prompts.engine_stops(tokenizer)
    engine = ScriptedEngine(tokenizer, scripted_policy(), slots=4, max_len=1024, eos_ids=eos_ids, stop_strings=stops)
    run = prepare(recipe, engine=engine)
    yield run, root
    run.checkpointer.close()


def test_dupo_prefilter_drops_the_question_the_starting_policy_always_solves(srrl_run):
    run, root = srrl_run
    pool = dupo_pool(run)
    assert pool == [0, 1]
    report = json.loads((root / "run" / "dupo_filter.json").read_text())
    assert report == {"rollouts_per_question": 2, "questions": 3, "kept": 2, "kept_indices": [0, 1], "resumed_after": 0}
    run.sampler = QuestionSampler(pool, run.rl.seed)


def test_srrl_transcript_feedback_and_webseer_reward(srrl_run):
    run, _ = srrl_run
    if run.sampler is None:
        run.sampler = QuestionSampler([0, 1], run.rl.seed)
    groups, scores, selection, times = collect(run, 0, stage_rollout_config(run, run.stages[0]))
    assert len(groups) == 2 and all(len(g) == 2 for g in groups)
    assert selection.groups == (0, 1) and selection.n_duplicated == 0  # both groups have reward variance
    by_path = {}
    for episode, score in zip([e for g in groups for e in g], [s for g in scores for s in g]):
        path = "A" if episode.submissions[0].answer == "Ida" else "B"
        by_path[path] = (episode, score)
        assert episode.termination == "answer" and score.outcome.format_ok
    a, score_a = by_path["A"]
    assert [(s.answer, s.feedback) for s in a.submissions] == [
        ("Ida", "Incorrect! The F1 score is 0.67."),
        ("Ida Konst", "Correct! The F1 score is 1.00."),
    ]
    assert [m["role"] for m in a.messages] == ["system", "user", "assistant", "user", "assistant"]
    assert a.messages[3]["content"] == "<tool_response>\nIncorrect! The F1 score is 0.67.\n</tool_response>"
    assert "answer_submit" in a.messages[0]["content"] and prompts.SUBMIT_NOTE in a.messages[0]["content"]
    assert score_a.outcome.n_submissions == 2 and score_a.outcome.f1 == 1.0
    assert score_a.reward == pytest.approx(0.9**2)  # no length penalty below l_expect; F1 · alpha^T

    b, score_b = by_path["B"]
    assert [s.feedback for s in b.submissions] == [
        "Incorrect! The F1 score is 0.00.",
        "Incorrect! The F1 score is 0.67.",
        "Incorrect! The F1 score is 0.67.",
    ]
    assert b.prediction == "Ida" and len(b.tool_calls) == 3  # max_submissions ends the episode
    assert score_b.reward == pytest.approx((2 / 3) * 0.9**3)
    assert times["rollout_s"] > 0 and times["rounds"] == 1
    tokens = np.asarray(a.token_ids)[np.asarray(a.loss_mask) == 1]
    assert "Try Ida Konst." in run.tokenizer.decode(tokens.tolist())  # the policy's own tokens are the trained ones


def test_dapo_rolls_out_more_questions_until_the_batch_holds_only_informative_groups(srrl_run):
    run, _ = srrl_run
    # A seed whose first two questions include the river question (both its rollouts are right: no variance).
    seed = next(s for s in range(100) if 2 in QuestionSampler([0, 1, 2], s).take(2))
    dapo = dataclasses.replace(
        run, rl=dataclasses.replace(run.rl, selection="dapo", seed=seed), sampler=QuestionSampler([0, 1, 2], seed)
    )
    groups, scores, selection, times = collect(dapo, 0, stage_rollout_config(run, run.stages[0]))
    assert times["rounds"] == 2 and len(groups) == 3  # one more question was rolled out in a second round
    assert len(selection.groups) == 2 and selection.n_duplicated == 0
    assert sorted(groups[i][0].question for i in selection.groups) == sorted(q["question"] for q in QUESTIONS[:2])
    river = next(i for i, g in enumerate(groups) if "river" in g[0].question)
    assert [s.reward for s in scores[river]] == [pytest.approx(0.9)] * 2  # right at the first submission
