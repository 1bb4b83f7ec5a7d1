"""`jaxseeker synth trajectories` with an LLM in every role it can take: teacher, judge, quality reviewer, summarizer
(denoised mode), short-CoT rewriter, and reflection verifier. One scripted "model" on a loopback server plays them
all, telling the roles apart by their prompts; each test checks what its role changed in the written records."""

from __future__ import annotations

import json
import re
import threading

import pytest
from loopback import LoopbackServer, Reply

from jaxseeker.cli import main
from jaxseeker.data import read_trajectories
from jaxseeker.synthesis.denoise import SUMMARY_PROMPT
from jaxseeker.synthesis.filters import QUALITY_PROMPT
from jaxseeker.synthesis.reflection import VERIFY_PROMPT
from jaxseeker.synthesis.shortcot import SHORT_COT_PROMPT
from jaxseeker.world import save_world

SUMMARY = "The search listed the person's page first."
SHORT_THOUGHT = "Short thought: the next step."
PEOPLE = 3


def _prefix(prompt: str) -> str:
    """A prompt's text up to its first placeholder: how the script recognises the role it is asked to play."""
    return prompt.split("{")[0]


def _call(name: str, arguments: dict) -> str:
    action = json.dumps({"name": name, "arguments": arguments})
    return f"<think>Next: {name}.</think>\n<tool_call>\n{action}\n</tool_call>"


class Script:
    """The scripted model. As an agent (reasoner or verifier): search the person's name, open the first hit, read the
    birth year. The reasoner answers "in YEAR" (an exact-match judge says wrong, a reading one right); in reflection
    mode it first submits YEAR + 1, then YEAR, then answers. The verifier answers CORRECT exactly for the year on the
    page. Judge: the digits must agree. Reviewer: DROP the trajectory of the question `dropped`, KEEP the others."""

    def __init__(self, dropped: str):
        self.dropped = dropped
        self.prompts: list[list[dict]] = []  # every request's messages
        self.lock = threading.Lock()

    def __call__(self, request) -> Reply:
        messages = request.json()["messages"]
        with self.lock:
            self.prompts.append(messages)
        text = self.agent(messages) if messages[0]["role"] == "system" else self.helper(messages[0]["content"])
        return Reply(
            body={
                "model": "scripted",
                "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            }
        )

    def helper(self, prompt: str) -> str:
        if prompt.startswith("You are an evaluation assistant"):  # the GAIA judge
            labeled = re.search(r"Labeled Answer: (.*)", prompt).group(1)
            predicted = re.search(r"Predicted Answer: (.*)", prompt).group(1)
            return "Correct" if re.sub(r"\D", "", predicted) == re.sub(r"\D", "", labeled) else "Incorrect"
        if prompt.startswith(_prefix(QUALITY_PROMPT)):
            return "DROP: it asks about the wrong person" if self.dropped in prompt else "KEEP"
        if prompt.startswith(_prefix(SUMMARY_PROMPT)):
            return SUMMARY
        if prompt.startswith(_prefix(SHORT_COT_PROMPT)):
            return f"  {SHORT_THOUGHT}  "
        raise AssertionError(f"a prompt of no role: {prompt[:200]!r}")

    def agent(self, messages: list[dict]) -> str:
        question, turns = messages[1]["content"], sum(m["role"] == "assistant" for m in messages)
        name = re.search(r"was (.+) born\?", question).group(1)
        if turns == 0:
            return _call("search", {"query": [name]})
        if turns == 1:
            return _call(
                "visit",
                {"url": [re.search(r"\[1\] .*\n(\S+)", messages[-1]["content"]).group(1)], "goal": "birth year"},
            )
        pages = "\n".join(m["content"] for m in messages if m["role"] == "user")
        year = int(re.search(r"was born on \d+ \w+ (\d+)\.", pages).group(1))
        if question.startswith(_prefix(VERIFY_PROMPT)):
            proposal = re.search(r"Proposed answer: (.*)", question).group(1)
            return f"<think>Compare.</think>\n<answer>{'CORRECT' if proposal == str(year) else 'INCORRECT'}</answer>"
        if '"name": "answer_submit"' not in messages[0]["content"]:
            return f"<think>The page gives the year.</think>\n<answer>in {year}</answer>"
        verdicts = re.findall(r"<tool_response>\n(CORRECT|INCORRECT)\.", pages)
        if not verdicts:
            return _call("answer_submit", {"answer": str(year + 1)})  # a wrong first proposal
        if verdicts[-1] == "INCORRECT":
            return _call("answer_submit", {"answer": str(year)})
        return f"<think>Confirmed.</think>\n<answer>{year}</answer>"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, traj_world, traj_tokenizer):
    """(a directory with a saved world, its tokenizer and a QA file of three birth-year questions; the questions)."""
    root = tmp_path_factory.mktemp("llm_roles")
    save_world(traj_world, root / "world")
    traj_tokenizer.save_pretrained(str(root / "tok"))
    people = [e for e in traj_world.entities.values() if e.type == "person"][:PEOPLE]
    questions = [{"question": f"In what year was {p.name} born?", "answer": p.dates["born"][:4]} for p in people]
    (root / "qa.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    return root, [q["question"] for q in questions]


@pytest.fixture
def script(inputs):
    """The scripted model, dropping the trajectory of the last question, on a loopback server: (script, argv)."""
    root, questions = inputs
    server, script = LoopbackServer(), Script(dropped=questions[-1])
    server.route = script
    argv = [
        "synth",
        "trajectories",
        "--questions",
        str(root / "qa.jsonl"),
        "--world",
        str(root / "world"),
        "--tokenizer",
        str(root / "tok"),
        "--date",
        "2025-01-01",
        "--no-progress",
        "--tries",
        "1",
        "--teacher",
        "openai",
        "--llm-url",
        f"{server.url}/v1",
        "--llm-model",
        "scripted",
        "--llm-key-env",
        "JAXSEEKER_TEST_NO_KEY",
    ]
    yield script, argv
    server.close()


def _stats(out) -> dict:
    return json.loads(out.with_name(out.name + ".stats.json").read_text())


def _role_count(script: Script, prompt: str) -> int:
    return sum(m[0]["content"].startswith(_prefix(prompt)) for m in script.prompts)


def test_the_llm_judge_decides_correctness_and_the_llm_reviewer_drops_in_the_quality_stage(script, tmp_path):
    script, argv = script
    assert main([*argv, "--out", str(tmp_path / "em.jsonl")]) == 0  # "in 1850" is not "1850" to exact match
    assert _stats(tmp_path / "em.jsonl")["passed"].get("correctness", 0) == 0 and not read_trajectories(
        tmp_path / "em.jsonl"
    )

    assert main([*argv, "--out", str(tmp_path / "llm.jsonl"), "--judge", "llm", "--quality", "llm"]) == 0
    stats = _stats(tmp_path / "llm.jsonl")
    assert (stats["entered"]["correctness"], stats["passed"]["correctness"]) == (PEOPLE, PEOPLE)  # the judge reads
    assert (stats["entered"]["quality"], stats["passed"]["quality"]) == (PEOPLE, PEOPLE - 1)
    assert stats["reasons"] == {"quality: LLM quality check: it asks about the wrong person": 1}
    kept = read_trajectories(tmp_path / "llm.jsonl")
    assert len(kept) == PEOPLE - 1 and script.dropped not in [t.messages[1]["content"] for t in kept]
    assert (
        _role_count(script, QUALITY_PROMPT) == PEOPLE
        and sum(m[0]["content"].startswith("You are an evaluation assistant") for m in script.prompts) == PEOPLE
    )


def test_short_cot_rewrites_every_thought_through_the_llm(script, tmp_path):
    script, argv = script
    out = tmp_path / "short.jsonl"
    assert main([*argv, "--out", str(out), "--judge", "llm", "--short-cot"]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == PEOPLE
    for record in records:
        turns = [m["content"] for m in record["messages"] if m["role"] == "assistant"]
        assert len(turns) == 3 and all(t.startswith(f"<think>{SHORT_THOUGHT}</think>\n") for t in turns)
        assert turns[-1].endswith("<answer>" + record["prediction"] + "</answer>")  # the actions are kept
        assert record["provenance"]["short_cot"] == "rewritten"
    assert _role_count(script, SHORT_COT_PROMPT) == 3 * PEOPLE


def test_denoised_mode_shows_the_teacher_llm_summaries_and_keeps_the_raw_observations(script, tmp_path):
    script, argv = script
    out = tmp_path / "denoised.jsonl"
    assert main([*argv, "--out", str(out), "--judge", "llm", "--mode", "denoised", "--summarizer", "llm"]) == 0
    last_turns = [m for m in script.prompts if m[0]["role"] == "system" and len(m) == 6]  # before the answer
    assert len(last_turns) == PEOPLE
    for messages in last_turns:  # the search result summarised, the page (the last observation) raw
        assert messages[3]["content"] == f"<tool_response>\n[summary] {SUMMARY}\n</tool_response>"
        assert "was born on" in messages[5]["content"]
    records = read_trajectories(out)
    assert len(records) == PEOPLE
    assert all(t.messages[3]["content"].startswith("<tool_response>\nSearch results for") for t in records)
    assert _role_count(script, SUMMARY_PROMPT) == PEOPLE  # one summary an observation (cached for later turns)


def test_reflection_with_an_llm_teacher_verifies_each_proposal_by_rollouts_of_the_llm(script, tmp_path):
    script, argv = script
    out = tmp_path / "reflection.jsonl"
    assert main([*argv, "--out", str(out), "--mode", "reflection", "--no-balance"]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == PEOPLE and all(r["provenance"]["submissions"] == 2 for r in records)
    for record in records:
        year = int(record["answer"])
        feedback = [m["content"] for m in record["messages"] if m["content"].startswith("<tool_response>\n")][-2:]
        assert feedback == [
            "<tool_response>\nINCORRECT. Verification: search visit\n</tool_response>",
            "<tool_response>\nCORRECT. Verification: search visit\n</tool_response>",
        ]
        assert f'"answer": "{year + 1}"' in record["messages"][6]["content"]
    verifications = [m for m in script.prompts if len(m) > 1 and m[1]["content"].startswith(_prefix(VERIFY_PROMPT))]
    assert len(verifications) == 3 * 2 * PEOPLE  # 3 turns a verification, one verification a proposal


def test_an_llm_role_without_llm_model_and_a_review_without_a_quality_stage_end_in_one_line(inputs, tmp_path):
    root, _ = inputs
    argv = [
        "synth",
        "trajectories",
        "--questions",
        str(root / "qa.jsonl"),
        "--world",
        str(root / "world"),
        "--out",
        str(tmp_path / "t.jsonl"),
    ]
    for flags, message in (
        (["--judge", "llm"], "--judge llm needs --llm-model"),
        (["--mode", "denoised", "--summarizer", "llm"], "--summarizer llm needs --llm-model"),
        (
            ["--quality", "llm", "--llm-model", "m", "--funnel", "websailor"],
            "--quality llm reviews in the quality stage, which --funnel websailor has not",
        ),
    ):
        with pytest.raises(SystemExit, match="^jaxseeker synth: " + re.escape(message)):
            main([*argv, *flags])
