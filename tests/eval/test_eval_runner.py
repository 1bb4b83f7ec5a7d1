"""The eval runner: k scripted rollouts per question through the real loop and tools, judged, resumable."""

import json
from collections import Counter

import pytest

from jaxseeker.agent import RolloutConfig, ScriptedEngine
from jaxseeker.data import train_tokenizer
from jaxseeker.eval.report import compare_results
from jaxseeker.eval.runner import run_eval
from jaxseeker.tools import ToolsConfig, build_registry
from jaxseeker.world.corpus import Corpus, Page

QUESTIONS = [
    {"id": f"q{i}", "question": f"Which town has the tower number {i}?", "answer": town, "level": 1 + i % 2}
    for i, town in enumerate(["Velmora", "Pirn", "Ostra", "Kessel"])
]


def _script(context: str, turn: int) -> str:
    """Search once, then answer: right for even question numbers, wrong for odd ones."""
    if turn == 0:
        return (
            '<think>Search first.</think>\n<tool_call>{"name": "search", "arguments": {"query": ["tower"]}}</tool_call>'
        )
    number = int(context.split("tower number ")[1].split("?")[0])
    town = QUESTIONS[number]["answer"] if number % 2 == 0 else "Nowhere"
    return f"<think>The page names it.</think>\n<answer>{town}</answer>"


@pytest.fixture(scope="module")
def setup():
    texts = [q["question"] for q in QUESTIONS] + [_script("tower number 0?", t) for t in (0, 1)] * 5
    tok = train_tokenizer(texts, 600)
    corpus = Corpus([Page("https://w.test/t", "Tower", "The tower stands in Velmora.")])
    return tok, build_registry(ToolsConfig(enabled=("search", "visit")), corpus=corpus)


def test_pass_at_1_levels_and_resume(setup, tmp_path):
    tok, registry = setup
    engine = ScriptedEngine(tok, _script, slots=4, max_len=4096, eos_ids=[tok.convert_tokens_to_ids("<|im_end|>")])
    config = RolloutConfig(max_context_tokens=4096, max_tokens_per_turn=256, date="2025-01-01")
    summary = run_eval(engine, tok, registry, QUESTIONS[:2], tmp_path, k=2, config=config, progress=False)
    assert summary["pass_at_1"] == pytest.approx(0.5)

    submitted = []
    original = engine.submit
    engine.submit = lambda rid, prompt, **kw: (submitted.append(rid), original(rid, prompt, **kw))[1]
    summary = run_eval(engine, tok, registry, QUESTIONS, tmp_path, k=2, config=config, progress=False)
    assert len(submitted) == 4, "only the two unfinished questions are rolled out again"
    assert summary["pass_at_1"] == pytest.approx(0.5)
    assert summary["by_level"]["1"]["pass_at_1"] == 1.0 and summary["by_level"]["2"]["pass_at_1"] == 0.0
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and all(r["tool_calls"]["search"] == 1 and r["format_ok"] for r in rows)
    transcript = rows[0]["messages"]  # each record keeps its episode, to read what the policy did
    assert [m["role"] for m in transcript[:3]] == ["system", "user", "assistant"]
    assert transcript[1]["content"] == rows[0]["question"] and "<tool_call>" in transcript[2]["content"]
    assert (tmp_path / "report" / "summary.md").exists()


def test_a_run_killed_while_writing_resumes_after_cutting_its_unfinished_line(setup, tmp_path, capsys):
    tok, registry = setup
    engine = ScriptedEngine(tok, _script, slots=4, max_len=4096, eos_ids=[tok.convert_tokens_to_ids("<|im_end|>")])
    config = RolloutConfig(max_context_tokens=4096, max_tokens_per_turn=256, date="2025-01-01")
    run_eval(engine, tok, registry, QUESTIONS[:2], tmp_path, k=2, config=config, progress=False)
    results = tmp_path / "results.jsonl"
    lines = results.read_text().splitlines(keepends=True)
    results.write_text("".join(lines[:3]) + lines[3][:40])  # killed 40 bytes into q1's second round
    summary = run_eval(engine, tok, registry, QUESTIONS[:2], tmp_path, k=2, config=config, progress=False)
    assert f"{results}: cut the unfinished last line (40 bytes)" in capsys.readouterr().err
    assert (summary["rollouts"], summary["pass_at_1"]) == (4, pytest.approx(0.5))
    # the question whose second round was cut is rolled out again, both rounds, and its first round's earlier
    # record is dropped: the file holds no round twice, as `compare_results` (the pipeline's paired change) needs
    written = Counter(json.loads(line)["question_id"] for line in results.read_text().splitlines())
    assert sorted(written) == ["q0", "q1"] and sorted(written.values()) == [2, 2]
    assert compare_results(results, results, 2)["questions"] == 2


def test_a_resumed_run_gives_each_question_the_request_ids_of_a_whole_run(setup, tmp_path):
    tok, registry = setup
    config = RolloutConfig(max_context_tokens=4096, max_tokens_per_turn=256, date="2025-01-01")
    submitted = {}

    def engine():
        e = ScriptedEngine(tok, _script, slots=4, max_len=4096, eos_ids=[tok.convert_tokens_to_ids("<|im_end|>")])
        original = e.submit
        e.submit = lambda rid, ids, **kw: (submitted.setdefault(tuple(ids), []).append(rid), original(rid, ids, **kw))[
            1
        ]
        return e

    run_eval(engine(), tok, registry, QUESTIONS, tmp_path / "whole", k=1, config=config, progress=False)
    whole, submitted = submitted, {}
    (tmp_path / "resumed").mkdir()
    lines = (tmp_path / "whole" / "results.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "resumed" / "results.jsonl").write_text(lines[0] + lines[2])  # q0 and q2 were done
    run_eval(engine(), tok, registry, QUESTIONS, tmp_path / "resumed", k=1, config=config, progress=False)
    assert len(submitted) == 2 and all(submitted[ids] == whole[ids] for ids in submitted)  # q1 and q3: "1:0"
    assert {r["question_id"] for r in map(json.loads, (tmp_path / "resumed" / "results.jsonl").open())} == {
        "q0",
        "q1",
        "q2",
        "q3",
    }


def _visit_script(context: str, turn: int) -> str:
    """Visit the tower's page on even question numbers, then answer; odd ones answer at once."""
    number = int(context.split("tower number ")[1].split("?")[0])
    if turn == 0 and number % 2 == 0:
        call = '{"name": "visit", "arguments": {"url": ["https://w.test/t"], "goal": "town"}}'
        return f"<think>Read it.</think>\n<tool_call>{call}</tool_call>"
    return f"<think>Done.</think>\n<answer>{QUESTIONS[number]['answer']}</answer>"


def test_evidence_is_the_share_of_the_question_pages_visited(setup, tmp_path):
    tok, registry = setup
    engine = ScriptedEngine(
        tok, _visit_script, slots=4, max_len=4096, eos_ids=[tok.convert_tokens_to_ids("<|im_end|>")]
    )
    config = RolloutConfig(max_context_tokens=4096, max_tokens_per_turn=256, date="2025-01-01")
    pages = {"meta": {"urls": ["https://w.test/t", "https://w.test/%C3%B6"]}}  # the tower's page and one never visited
    questions = [QUESTIONS[0] | pages, QUESTIONS[1] | pages, QUESTIONS[2]]
    summary = run_eval(engine, tok, registry, questions, tmp_path, k=1, config=config, progress=False)
    rows = {r["question_id"]: r for r in map(json.loads, (tmp_path / "results.jsonl").read_text().splitlines())}
    assert (rows["q0"]["evidence"], rows["q1"]["evidence"], rows["q2"]["evidence"]) == (0.5, 0.0, None)
    assert summary["evidence"] == pytest.approx(0.25), "questions without evidence pages are left out of the mean"
    assert summary["by_level"]["1"]["evidence"] == 0.5 and summary["by_level"]["2"]["evidence"] == 0.0


def test_a_rerun_with_a_larger_k_replaces_the_earlier_rounds(setup, tmp_path):
    tok, registry = setup
    engine = ScriptedEngine(tok, _script, slots=4, max_len=4096, eos_ids=[tok.convert_tokens_to_ids("<|im_end|>")])
    config = RolloutConfig(max_context_tokens=4096, max_tokens_per_turn=256, date="2025-01-01")
    run_eval(engine, tok, registry, QUESTIONS[:2], tmp_path, k=1, config=config, progress=False)
    summary = run_eval(engine, tok, registry, QUESTIONS[:2], tmp_path, k=2, config=config, progress=False)
    assert (summary["rollouts"], summary["pass_at_1"]) == (4, pytest.approx(0.5))
    # each question's k=1 round is dropped from the file and rolled out again with the second: no round twice
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 4
    assert len((tmp_path / "report" / "results.jsonl").read_text().splitlines()) == 4
    again = run_eval(engine, tok, registry, QUESTIONS[:2], tmp_path, k=1, config=config, progress=False)
    assert again["rollouts"] == 2  # a smaller k reports the first k rounds of the log


def test_a_browsecomp_topic_is_the_tag_results_are_broken_down_by(setup, tmp_path):
    tok, registry = setup
    engine = ScriptedEngine(tok, _script, slots=4, max_len=4096, eos_ids=[tok.convert_tokens_to_ids("<|im_end|>")])
    config = RolloutConfig(max_context_tokens=4096, max_tokens_per_turn=256, date="2025-01-01")
    topics = [{**q, "topic": topic} for q, topic in zip(QUESTIONS[:2], ["Art", "Sports"])]
    summary = run_eval(engine, tok, registry, topics, tmp_path, k=1, config=config, progress=False)
    assert {name: block["pass_at_1"] for name, block in summary["by_tag"].items()} == {"Art": 1.0, "Sports": 0.0}
