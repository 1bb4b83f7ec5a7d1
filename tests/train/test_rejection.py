"""Rejection-sampling fine-tuning keeps the policy's right, well-formed, distinct episodes, a few a question."""

import pytest

from jaxseeker.train.rejection import is_kept, kept_trajectories, rft_counts


def episode(qid, turns, *, correct=True, format_ok=True, termination="answer", level=1, round_=0):
    """An `eval.run_eval` record with `turns` as the assistant's turns between tool responses."""
    messages = [{"role": "system", "content": "You are a deep-search agent."}, {"role": "user", "content": f"Q{qid}?"}]
    for turn in turns:
        messages += [{"role": "assistant", "content": turn},
                     {"role": "user", "content": "<tool_response>…</tool_response>"}]
    return {"question_id": qid, "round": round_, "correct": correct, "format_ok": format_ok, "termination": termination,
            "level": level, "question": f"Q{qid}?", "answer": "42", "messages": messages[:-1]}


def test_only_right_well_formed_answered_episodes_are_kept():
    assert is_kept(episode("a", ["<answer>42</answer>"]))
    assert not is_kept(episode("a", ["<answer>41</answer>"], correct=False))
    assert not is_kept(episode("a", ["<answer>42</answer>"], correct=None))  # the judge could not parse it
    assert not is_kept(episode("a", ["<think>x", "<answer>42</answer>"], format_ok=False))  # a broken turn inside
    assert not is_kept(episode("a", ["<answer>42</answer>"], termination="max_tool_calls"))


def test_a_question_gives_at_most_per_question_distinct_trajectories():
    search, answer = '<tool_call>{"name": "search"}</tool_call>', "<answer>42</answer>"
    records = [episode("easy", [search, answer], round_=r) for r in range(4)]  # four identical right rollouts
    records += [episode("easy2", [search, search, answer]), episode("easy2", [search, answer], round_=1),
                episode("easy2", [answer], round_=2)]
    records += [episode("hard", [answer], correct=False, level=2), episode("hard", [search, answer], level=2, round_=1)]
    kept = kept_trajectories(records, per_question=2)
    assert [(t["provenance"]["question_id"], t["provenance"]["round"]) for t in kept] == [
        ("easy", 0), ("easy2", 0), ("easy2", 1), ("hard", 1)]
    assert kept[0]["messages"] == records[0]["messages"] and kept[0]["answer"] == "42"
    assert kept[0]["provenance"]["source"] == "rft"
    counts = rft_counts(records, kept)
    assert counts == {"episodes": 9, "right": 8, "questions": 3, "kept": 4, "kept_questions": 3,
                      "questions_by_level": {"1": 2, "2": 1}, "kept_questions_by_level": {"1": 2, "2": 1}}
    with pytest.raises(ValueError, match="per_question must be >= 1, got 0"):
        kept_trajectories(records, per_question=0)


def test_kept_trajectories_are_records_the_sft_reads():
    from jaxseeker.data.records import parse_record

    kept = kept_trajectories([episode("a", ['<tool_call>{"name": "search"}</tool_call>', "<answer>42</answer>"])], 1)
    trajectory = parse_record(kept[0], "rft.jsonl:1")
    assert [m["role"] for m in trajectory.messages] == ["system", "user", "assistant", "user", "assistant"]
