"""Each filter keeps and drops exactly what it should, on crafted episodes."""

from __future__ import annotations

import json

import pytest

from jaxseeker.agent import Episode, Submission, ToolCallRecord
from jaxseeker.agent.prompts import FINAL_ANSWER_REQUEST, format_observation
from jaxseeker.synthesis import (
    correctness,
    quality,
    reflection_funnel,
    rft,
    run_funnel,
    validity,
    webdancer_funnel,
    websailor_funnel,
)
from jaxseeker.synthesis.reflection import psi, resolved

QUESTION = "In what year was Ida Konst born?"


def call(name: str, **arguments) -> str:
    """One assistant turn with a thought and a tool call."""
    body = json.dumps({"name": name, "arguments": arguments})
    return f"<think>Look it up.</think>\n<tool_call>\n{body}\n</tool_call>"


def answer(text: str) -> str:
    """One answer turn."""
    return f"<think>The page says so.</think>\n<answer>{text}</answer>"


def episode(
    turns: list[str],
    observations: list[str] | None = None,
    *,
    prediction: str | None = "1380",
    gold: str | None = "1380",
    termination: str = "answer",
    tokens: int = 100,
    errors: dict | None = None,
    format_errors: int = 0,
    submissions: list[Submission] | None = None,
) -> Episode:
    """An Episode with these assistant turns; observations default to distinct texts; records from the calls."""
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": QUESTION}]
    records = []
    for i, turn in enumerate(turns):
        messages.append({"role": "assistant", "content": turn})
        if "<tool_call>" in turn:
            body = turn.split("<tool_call>\n")[1].split("\n</tool_call>")[0]
            if body.startswith('{"'):  # a call the loop could parse (and ran)
                parsed = json.loads(body)
                err = (errors or {}).get(i)
                records.append(ToolCallRecord(i + 1, parsed["name"], parsed["arguments"], err, 0.01))
            text = observations[i] if observations else f"result {i}"
            messages.append({"role": "user", "content": format_observation([text])})
    return Episode(
        QUESTION,
        messages,
        [1] * tokens,
        [0] * tokens,
        [0.0] * tokens,
        termination,
        prediction=prediction,
        answer=gold,
        tool_calls=records,
        format_errors=format_errors,
        turns=len(turns),
        submissions=submissions or [],
    )


GOOD = episode(
    [call("search", query=["Ida Konst"]), call("visit", url=["https://w/ida"], goal="birth"), answer("1380")]
)


def test_validity_keeps_a_well_formed_episode_and_drops_each_fault():
    assert validity(GOOD).ok
    assert "max_tool_calls" in validity(episode([call("search", query=["x"])], termination="max_tool_calls")).reason
    assert not validity(episode(["I think it is 1380.", answer("1380")], format_errors=1)).ok
    assert "format" in validity(episode(["<think>x</think><answer>1</answer> trailing"])).reason
    bad_json = "<think>x</think>\n<tool_call>\n{'name': 'search'}\n</tool_call>"
    assert "not valid JSON" in validity(episode([bad_json, answer("1380")])).reason
    malformed = episode(
        [call("search", q=["x"]), answer("1380")], errors={0: "unknown argument(s) ['q']; known: ['query']"}
    )
    assert "malformed search call" in validity(malformed).reason
    unreachable = episode(
        [call("visit", url=["https://w/x"], goal="g"), answer("1380")], errors={0: "no page at 'https://w/x'"}
    )
    assert validity(unreachable).ok  # a page that does not exist is the world's fault, not the format's
    cut = episode([call("search", query=["x"]), answer("1380")], observations=["r"])
    cut.messages[-2] = {"role": "user", "content": FINAL_ANSWER_REQUEST}
    assert "context ran out" in validity(cut).reason


def test_correctness_judges_the_prediction():
    assert correctness(GOOD).ok
    assert correctness(episode([answer("The year 1380.")], prediction="the 1380", gold="1380")).ok
    assert "wrong answer" in correctness(episode([answer("1381")], prediction="1381")).reason
    assert correctness(episode([answer("x")], prediction=None)).reason == "no prediction"
    assert correctness(episode([answer("x")], gold=None)).reason == "no reference answer"
    assert not correctness(GOOD, judge=lambda q, p, g: False).ok


def test_quality_drops_repeats_redundancy_and_long_episodes():
    assert quality(GOOD).ok
    repeat = episode([call("search", query=["Ida Konst"]), call("search", query=["Ida Konst"]), answer("1380")])
    assert "repeated identical call" in quality(repeat).reason
    same_result = episode(
        [call("search", query=["Ida"]), call("search", query=["Ida Konst"]), answer("1380")],
        observations=["the same page", "the same page"],
    )
    assert "redundant observation" in quality(same_result).reason
    many = episode([call("search", query=[f"q{i}"]) for i in range(4)] + [answer("1380")])
    assert quality(many, max_actions=4).ok
    assert "exceed the cap of 3" in quality(many, max_actions=3).reason
    assert "LLM quality check: off goal" in quality(GOOD, llm_check=lambda m: (False, "off goal")).reason


def test_websailor_rft_filter():
    long = episode([call("search", query=[f"q{i}"]) for i in range(6)] + [answer("1380")], tokens=500)
    assert rft(long, max_tokens=500, min_tool_calls=5).ok
    assert "not more than 5" in rft(GOOD, min_tool_calls=5).reason
    assert rft(GOOD, min_tool_calls=1).ok
    assert "exceed 499" in rft(long, max_tokens=499).reason
    assert "wrong answer" in rft(episode([answer("1")], prediction="1"), min_tool_calls=0).reason


def test_funnels_report_the_stage_that_drops():
    assert run_funnel(webdancer_funnel(), GOOD) == (["validity", "correctness", "quality"], None, "")
    passed, stage, reason = run_funnel(webdancer_funnel(), episode([answer("1381")], prediction="1381"))
    assert passed == ["validity"] and stage.name == "correctness" and "1381" in reason
    passed, stage, _ = run_funnel(websailor_funnel(), GOOD)
    assert passed == ["validity"] and stage.name == "rft"


@pytest.mark.parametrize(
    "feedbacks, stage",
    [
        (["INCORRECT. Verification: no.", "CORRECT. Verification: yes."], None),
        (["CORRECT. Verification: yes.", "CORRECT. Verification: yes."], "psi"),  # a wrong answer judged CORRECT
        (["INCORRECT. Verification: no.", "INCORRECT. Verification: no."], "psi"),  # a right answer judged INCORRECT
    ],
)
def test_reflection_stages_keep_only_verdicts_that_match_the_truth(feedbacks, stage):
    turns = [call("answer_submit", answer="1381"), call("answer_submit", answer="1380"), answer("1380")]
    subs = [Submission("1381", feedbacks[0]), Submission("1380", feedbacks[1])]
    e = episode(turns, observations=feedbacks + [""], submissions=subs)
    failed = run_funnel(reflection_funnel(), e)[1]
    assert (failed.name if failed else None) == stage
    assert psi(e).ok == (stage is None)


def test_resolved_needs_a_final_correct_verdict_within_n_max():
    subs = [Submission(str(1377 + i), "INCORRECT. Verification: no.") for i in range(3)]
    subs.append(Submission("1380", "CORRECT. Verification: yes."))
    assert resolved(episode([answer("1380")], submissions=subs), n_max=4).ok
    assert "4 submissions" in resolved(episode([answer("1380")], submissions=subs), n_max=3).reason
    assert "not judged CORRECT" in resolved(episode([answer("1380")], submissions=subs[:2])).reason
