"""Rejection-sampling fine-tuning keeps the policy's right, well-formed, distinct episodes, a few a question."""

import pytest

from jaxseeker.agent.prompts import NO_ACTION_ERROR, format_error_text, format_observation
from jaxseeker.train.rl.rejection import is_kept, kept_trajectories, malformed_turns, rejected_trajectories, rft_counts

OBSERVATION = "<tool_response>…</tool_response>"
LOOP = "<think>Hinckley (linked Hinckley (linked Hinckley (linked Hinckley (linked Hinckley (linked"


def episode(qid, turns, *, correct=True, format_ok=True, termination="answer", level=1, round_=0, observations=()):
    """An `eval.run_eval` record with `turns` as the assistant's turns between tool responses (`observations`, one a
    turn, default `OBSERVATION`)."""
    messages = [{"role": "system", "content": "You are a deep-search agent."}, {"role": "user", "content": f"Q{qid}?"}]
    for turn, seen in zip(turns, [*observations, *[OBSERVATION] * len(turns)][: len(turns)]):
        messages += [{"role": "assistant", "content": turn}, {"role": "user", "content": seen}]
    return {
        "question_id": qid,
        "round": round_,
        "correct": correct,
        "format_ok": format_ok,
        "termination": termination,
        "level": level,
        "question": f"Q{qid}?",
        "answer": "42",
        "messages": messages[:-1],
    }


def test_only_right_well_formed_answered_episodes_are_kept():
    assert is_kept(episode("a", ["<answer>42</answer>"]))
    assert not is_kept(episode("a", ["<answer>41</answer>"], correct=False))
    assert not is_kept(episode("a", ["<answer>42</answer>"], correct=None))  # the judge could not parse it
    assert not is_kept(episode("a", ["<think>x", "<answer>42</answer>"], format_ok=False))  # a broken turn inside
    assert not is_kept(episode("a", ["<answer>42</answer>"], termination="max_tool_calls"))


def test_a_question_gives_at_most_per_question_distinct_trajectories():
    search, answer = '<tool_call>{"name": "search"}</tool_call>', "<answer>42</answer>"
    records = [episode("easy", [search, answer], round_=r) for r in range(4)]  # four identical right rollouts
    records += [
        episode("easy2", [search, search, answer]),
        episode("easy2", [search, answer], round_=1),
        episode("easy2", [answer], round_=2),
    ]
    records += [episode("hard", [answer], correct=False, level=2), episode("hard", [search, answer], level=2, round_=1)]
    kept = kept_trajectories(records, per_question=2)
    assert [(t["provenance"]["question_id"], t["provenance"]["round"]) for t in kept] == [
        ("easy", 0),
        ("easy2", 0),
        ("easy2", 1),
        ("hard", 1),
    ]
    assert kept[0]["messages"] == records[0]["messages"] and kept[0]["answer"] == "42"
    assert kept[0]["provenance"]["source"] == "rft"
    counts = rft_counts(records, kept)
    assert counts == {
        "episodes": 9,
        "right": 8,
        "questions": 3,
        "kept": 4,
        "kept_questions": 3,
        "rejected": 0,
        "rejected_turns": 0,
        "questions_by_level": {"1": 2, "2": 1},
        "kept_questions_by_level": {"1": 2, "2": 1},
    }
    with pytest.raises(ValueError, match="per_question must be >= 1, got 0"):
        kept_trajectories(records, per_question=0)


def test_kept_trajectories_are_records_the_sft_reads():
    from jaxseeker.data.records import parse_record

    kept = kept_trajectories([episode("a", ['<tool_call>{"name": "search"}</tool_call>', "<answer>42</answer>"])], 1)
    trajectory = parse_record(kept[0], "rft.jsonl:1")
    assert [m["role"] for m in trajectory.messages] == ["system", "user", "assistant", "user", "assistant"]


def test_malformed_turns_are_those_a_format_error_answered_and_the_last_of_a_broken_episode():
    search = '<tool_call>{"name": "search", "arguments": {"query": "Hinckley"}}</tool_call>'
    cut = format_observation([NO_ACTION_ERROR, format_error_text("your turn was cut after 128 tokens")])
    recovered = episode("a", [LOOP, search, "<answer>42</answer>"], format_ok=False, observations=[cut])
    assert malformed_turns(recovered) == [2]
    broken = episode(
        "b",
        [search, LOOP, LOOP],
        correct=False,
        format_ok=False,
        termination="format_error",
        observations=[OBSERVATION, cut],
    )
    assert malformed_turns(broken) == [4, 6]  # the last turn ended the episode, no observation after it
    assert malformed_turns(episode("c", [search, "<answer>42</answer>"])) == []


def test_rejected_trajectories_mark_the_malformed_turns_for_the_unlikelihood_loss():
    from jaxseeker.data.records import parse_record

    search = '<tool_call>{"name": "search", "arguments": {"query": "Hinckley"}}</tool_call>'
    cut = format_observation([NO_ACTION_ERROR])
    broken = episode("b", [search, LOOP], correct=False, format_ok=False, termination="format_error", level=2)
    records = [broken, dict(broken, round=1), episode("a", [LOOP, "<answer>42</answer>"], observations=[cut])]
    rejected = rejected_trajectories(records)  # the second rollout repeats the first: dropped
    assert [(t["provenance"]["question_id"], t["provenance"]["turns"]) for t in rejected] == [("b", [4]), ("a", [2])]
    assert [m.get("weight") for m in rejected[0]["messages"] if m["role"] == "assistant"] == [0, -1]
    assert [m.get("weight") for m in rejected[1]["messages"] if m["role"] == "assistant"] == [-1, 0]
    assert rejected[0]["provenance"]["source"] == "rft-rejected"
    assert parse_record(rejected[0], "rejected.jsonl:1").messages[4]["weight"] == -1  # what the SFT reads
    counts = rft_counts(records, kept_trajectories(records, 2), rejected)
    assert (counts["kept"], counts["rejected"], counts["rejected_turns"]) == (1, 2, 2)
