"""`jaxseeker rollout` on a saved HF model with a pages corpus, and `jaxseeker bench rollout`."""

import argparse
import json

import pytest
from agent_support import MAX_LEN, PAGES, QUESTION, SLOTS
from cli_support import usage_error

from jaxseeker import model
from jaxseeker.agent import prompts, read_episodes, tool_calling_model
from jaxseeker.agent.command import add_bench_parser, add_parser
from jaxseeker.agent.rollout_bench import bench_rollout
from jaxseeker.cli import build_parser, main
from jaxseeker.train import RewardConfig


def cli(argv):
    parser = argparse.ArgumentParser(prog="jaxseeker")
    commands = parser.add_subparsers(required=True)
    add_parser(commands)
    add_bench_parser(commands.add_parser("bench").add_subparsers(required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_rollout_command_writes_episodes_and_a_summary(tmp_path, call_model, capsys):
    tokenizer, cfg, params = call_model
    model_dir = tmp_path / "model"
    model.save_hf(params, cfg, model_dir)
    tokenizer.save_pretrained(str(model_dir))
    pages = tmp_path / "pages.jsonl"
    pages.write_text(
        "".join(
            json.dumps({"url": p.url, "title": p.title, "text": p.text, "links": list(p.links)}) + "\n" for p in PAGES
        )
    )
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"question": QUESTION, "answer": "nine"}) + "\n")
    out = tmp_path / "episodes.jsonl"

    code = cli(
        [
            "rollout",
            "--model",
            str(model_dir),
            "--questions",
            str(questions),
            "--k",
            "2",
            "--out",
            str(out),
            "--corpus",
            str(pages),
            "--slots",
            str(SLOTS),
            "--max-context",
            str(MAX_LEN),
            "--max-tool-calls",
            "1",
            "--temperature",
            "1.0",
            "--top-p",
            "1.0",
            "--mesh",
            "tensor=1",
            "--no-progress",
        ]
    )

    assert code == 0
    episodes = read_episodes(out)
    assert [(e.termination, len(e.tool_calls), e.answer) for e in episodes] == [("max_tool_calls", 1, "nine")] * 2
    summary = capsys.readouterr().out
    assert "2 episodes" in summary and "terminations: max_tool_calls 2 (100%)" in summary
    assert "tool calls per episode: mean 1.00" in summary and "exact match: 0/2" in summary and "tokens/s" in summary
    assert "(generated on a data=1,fsdp=1,tensor=1,expert=1 mesh of 1 device)" in summary


SUBMIT_CALL = '{"name": "answer_submit", "arguments": {"answer": "nine arches"}}'


def save_model(path, tokenizer, cfg, params):
    """An HF model directory of (tokenizer, cfg, params)."""
    model.save_hf(params, cfg, path)
    tokenizer.save_pretrained(str(path))
    return path


def test_rollout_with_answer_submit_gives_each_episode_the_feedback_of_its_own_answer(tmp_path, capsys):
    """A model that submits "nine arches" every turn: its token F1 is 0.67 against "nine", 1.0 against "nine arches"
    (Correct!, which ends the episode) and 0 against the aliases of the third question."""
    model_dir = save_model(tmp_path / "model", *tool_calling_model(SUBMIT_CALL, mean_think_tokens=4.0))
    pages = tmp_path / "pages.jsonl"
    pages.write_text("".join(json.dumps({"url": p.url, "title": p.title, "text": p.text}) + "\n" for p in PAGES))
    questions = tmp_path / "questions.jsonl"
    questions.write_text(
        "".join(
            json.dumps(q) + "\n"
            for q in [
                {"question": QUESTION, "answer": "nine"},
                {"question": "What is the bridge of Velmora known for?", "answer": "nine arches"},
                {"question": "Who founded Velmora?", "answer": ["Ida Konst", "Konst"]},
            ]
        )
    )
    out = tmp_path / "episodes.jsonl"

    code = cli(
        [
            "rollout",
            "--model",
            str(model_dir),
            "--questions",
            str(questions),
            "--out",
            str(out),
            "--corpus",
            str(pages),
            "--tools",
            "search,answer_submit",
            "--slots",
            str(SLOTS),
            "--max-context",
            str(MAX_LEN),
            "--max-tool-calls",
            "2",
            "--temperature",
            "1.0",
            "--top-p",
            "1.0",
            "--no-progress",
        ]
    )

    assert code == 0
    episodes = sorted(read_episodes(out), key=lambda e: e.group)
    assert [(e.termination, [(s.answer, s.feedback) for s in e.submissions], e.prediction) for e in episodes] == [
        ("max_tool_calls", [("nine arches", "Incorrect! The F1 score is 0.67.")] * 2, "nine arches"),
        ("answer", [("nine arches", "Correct! The F1 score is 1.00.")], "nine arches"),
        ("max_tool_calls", [("nine arches", "Incorrect! The F1 score is 0.00.")] * 2, "nine arches"),
    ]
    system = episodes[0].messages[0]["content"]
    assert system.index('"name": "search"') < system.index('"name": "answer_submit"') and prompts.SUBMIT_NOTE in system
    summary = capsys.readouterr().out
    assert "answer submissions per episode: mean 1.67, max 2" in summary and "exact match: 1/3" in summary


def test_rollout_with_answer_submit_names_a_question_without_an_answer_before_loading_the_model(tmp_path):
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        json.dumps({"question": QUESTION, "answer": "nine"})
        + "\n"
        + json.dumps({"question": "Who founded Velmora?"})
        + "\n"
    )
    argv = [
        "rollout",
        "--model",
        str(tmp_path / "no-model"),
        "--questions",
        str(questions),
        "--out",
        str(tmp_path / "e.jsonl"),
        "--tools",
        "search,answer_submit",
    ]
    with pytest.raises(
        SystemExit,
        match=f"^jaxseeker rollout: {questions}:2: question 'Who founded Velmora\\?' has "
        "no 'answer'; the answer_submit tool scores each submission against it$",
    ):
        main(argv)
    with pytest.raises(SystemExit, match="no-model': neither a registered name"):  # without answer_submit, it goes on
        main(argv[:-2])


def test_rollout_submit_threshold_defaults_to_the_rl_reward_config():
    args = build_parser().parse_args(["rollout", "--model", "m", "--questions", "q.jsonl", "--out", "e.jsonl"])
    assert args.submit_threshold == RewardConfig().submit_threshold and args.tools == ("search", "visit")


def test_a_model_directory_without_a_tokenizer_ends_rollout_in_one_line(tmp_path, call_model):
    _, cfg, params = call_model
    model.save_hf(params, cfg, tmp_path / "model")
    (tmp_path / "q.jsonl").write_text(json.dumps({"question": QUESTION, "answer": "nine"}) + "\n")
    with pytest.raises(SystemExit, match=f"^jaxseeker rollout: {tmp_path / 'model'}: no tokenizer in this directory"):
        main(
            [
                "rollout",
                "--model",
                str(tmp_path / "model"),
                "--questions",
                str(tmp_path / "q.jsonl"),
                "--out",
                str(tmp_path / "e.jsonl"),
            ]
        )


def test_bench_rollout_counts_idle_time():
    stats, _ = bench_rollout(
        slots=SLOTS,
        episodes=3,
        tool_calls=2,
        tool_latency_s=0.05,
        think_tokens=4.0,
        max_len=MAX_LEN,
    )
    assert stats.episodes == 3 and stats.terminations == {"max_tool_calls": 3} and stats.tool_calls == 6
    assert stats.steps > 0 and 0.0 <= stats.idle_fraction < 1.0
    assert stats.step_s + stats.idle_s <= stats.wall_s


def test_a_group_of_rollouts_prefills_its_prompt_once_and_shares_it_with_the_others():
    stats, prompts = bench_rollout(
        slots=8, episodes=16, group_size=8, tool_calls=1, tool_latency_s=0.0, think_tokens=4.0, max_len=MAX_LEN
    )
    assert stats.episodes == 16
    assert prompts.distinct > 0 and prompts.tokens == 8 * prompts.distinct  # two prompts, eight rows each
    # Each group's prompt is computed at most once (less where the two share their leading tokens) and the seven
    # other rows of its group share its pages.
    assert prompts.prefilled <= prompts.distinct
    assert prompts.shared >= 7 * prompts.distinct


def test_bench_rollout_group_size_is_not_for_a_real_model():
    with pytest.raises(SystemExit) as exit_:
        cli(["bench", "rollout", "--model", "smollm2-135m-instruct", "--group-size", "8"])
    assert "--group-size is the scripted model's" in str(exit_.value.code)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--slots", "0"], "--slots: must be an integer >= 1, got 0"),
        (["--group-size", "0"], "--group-size: must be an integer >= 1, got 0"),
        (["--episodes", "0"], "--episodes: must be an integer >= 1, got 0"),
        (["--tool-calls", "0"], "--tool-calls: must be an integer >= 1, got 0"),
        (["--tool-latency", "-0.5"], "--tool-latency: must be a number >= 0, got -0.5"),
        (["--tool-latency", "inf"], "--tool-latency: must be a number >= 0, got inf"),
        (["--think-tokens", "0.5"], "--think-tokens: must be a number >= 1, got 0.5"),
        (["--steps-per-call", "0"], "--steps-per-call: must be an integer >= 1, got 0"),
        (["--max-context", "1"], "--max-context: must be an integer >= 2, got 1"),
    ],
)
def test_bench_rollout_flags_out_of_range_are_usage_errors(argv, message, capsys):
    assert usage_error(["bench", "rollout", *argv], capsys) == f"jaxseeker bench rollout: error: argument {message}"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--k", "0"], "--k: must be an integer >= 1, got 0"),
        (["--slots", "0"], "--slots: must be an integer >= 1, got 0"),
        (["--max-context", "1"], "--max-context: must be an integer >= 2, got 1"),
        (["--max-turn-tokens", "0"], "--max-turn-tokens: must be an integer >= 1, got 0"),
        (["--max-tool-calls", "0"], "--max-tool-calls: must be an integer >= 1, got 0"),
        (["--timeout", "0"], "--timeout: must be a number > 0, got 0"),
        (["--timeout", "nan"], "--timeout: must be a number > 0, got nan"),
        (["--temperature", "-0.1"], "--temperature: must be a number >= 0, got -0.1"),
        (["--top-p", "0"], "--top-p: must be a number > 0 and <= 1, got 0"),
        (["--top-p", "1.5"], "--top-p: must be a number > 0 and <= 1, got 1.5"),
        (["--top-k", "-1"], "--top-k: must be an integer >= 0, got -1"),
        (["--seed", "-1"], "--seed: must be an integer >= 0 and <= 2147483647, got -1"),
        (["--seed", "2147483648"], "--seed: must be an integer >= 0 and <= 2147483647, got 2147483648"),
        (["--steps-per-call", "0"], "--steps-per-call: must be an integer >= 1, got 0"),
        (["--submit-threshold", "0"], "--submit-threshold: must be a number > 0 and <= 1, got 0"),
        (["--submit-threshold", "1.2"], "--submit-threshold: must be a number > 0 and <= 1, got 1.2"),
        (["--submit-threshold", "nan"], "--submit-threshold: must be a number > 0 and <= 1, got nan"),
        (
            ["--tools", "search,submit"],
            ("--tools: unknown 'submit' in 'search,submit'; known: search, visit, python, answer_submit"),
        ),
    ],
)
def test_rollout_flags_out_of_range_are_usage_errors(argv, message, capsys):
    err = usage_error(["rollout", "--model", "m", "--questions", "q.jsonl", "--out", "e.jsonl", *argv], capsys)
    assert err == f"jaxseeker rollout: error: argument {message}"


def test_bench_rollout_too_short_a_context_ends_before_the_run():
    with pytest.raises(SystemExit) as exit_:
        cli(["bench", "rollout", "--max-context", "300"])
    assert str(exit_.value.code) == (
        "jaxseeker bench rollout: --max-context 300 is too small for --tool-calls 4 of "
        "--think-tokens 32 (needs about 1720)"
    )
