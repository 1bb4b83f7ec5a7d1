"""The embedded expert solves questions through the real tools and loop, copying what it uses from observations."""

from __future__ import annotations

import dataclasses
import json
import re

from traj_support import LOOP

from jaxseeker.agent import as_question, run_episodes
from jaxseeker.rewards import exact_match
from jaxseeker.synthesis import (
    ExpertConfig,
    ExpertTeacher,
    synthesize,
    webdancer_funnel,
)
from jaxseeker.synthesis.plan import make_plan
from jaxseeker.synthesis.qa import e2hqa, sailorfog
from jaxseeker.synthesis.qa.recipes import RECIPE_CONFIGS
from jaxseeker.synthesis.report import trajectory_stats
from jaxseeker.tools import ToolsConfig, build_registry
from jaxseeker.world import Corpus, Page


def _calls(message: dict) -> list[dict]:
    return [json.loads(b) for b in re.findall(r"<tool_call>\n(.*?)\n</tool_call>", message["content"], re.DOTALL)]


def test_the_narrating_expert_solves_at_least_95_percent_of_level_1_and_2(
    traj_world, traj_registry, traj_tokenizer, traj_questions
):
    easy = [q for q in traj_questions if q.meta["level"] <= 2]
    assert len(easy) >= 60
    records, stats = synthesize(
        ExpertTeacher(traj_world, ExpertConfig(reasoning=False)),
        traj_tokenizer,
        traj_registry,
        easy,
        webdancer_funnel(),
        tries=1,
        config=LOOP,
        progress=False,
    )
    assert len(records) / len(easy) >= 0.95, stats.summary(["validity", "correctness", "quality"])
    assert stats.passed["validity"] == len(easy)  # every episode is well-formed, solved or not
    for r in records:
        assert r["provenance"]["teacher"] == "expert" and r["provenance"]["filters"] == [
            "validity",
            "correctness",
            "quality",
        ]
        assert exact_match(r["prediction"], r["answer"])


def test_every_name_and_url_used_was_shown_by_an_observation(traj_world, traj_registry, traj_tokenizer, traj_questions):
    episodes = run_episodes(
        ExpertTeacher(traj_world).engine(traj_tokenizer, traj_questions[:40]),
        traj_tokenizer,
        traj_registry,
        traj_questions[:40],
        LOOP,
        progress=False,
    )
    for episode in episodes:
        seen = episode.question
        for m in episode.messages[2:]:
            if m["role"] == "user":
                seen += m["content"]
                continue
            for call in _calls(m):
                if call["name"] == "visit":
                    assert all(url in seen for url in call["arguments"]["url"]), call
            answer = re.search(r"<answer>(.*)</answer>", m["content"])
            if answer and answer.group(1) != "unknown" and not answer.group(1).isdigit():
                assert answer.group(1) in seen  # entity answers are copied from what the tools showed


def test_expert_fails_when_the_tools_do_not_show_the_fact(traj_world, traj_tokenizer, traj_questions):
    question = next(q for q in traj_questions if q.meta["tag"] == "e2hqa")
    answer_page = traj_world.url(question.meta["meta"]["answer_id"])
    attr = question.meta["meta"]["query"]["answer_attr"]
    pages = [
        dataclasses.replace(p, text=" ".join(s for s in p.text.split(". ") if attr[:4] not in s))
        if p.url == answer_page
        else p
        for p in traj_world.pages
    ]
    hidden = build_registry(ToolsConfig(enabled=("search", "visit")), corpus=Corpus(pages))
    [episode] = run_episodes(
        ExpertTeacher(traj_world).engine(traj_tokenizer, [question]),
        traj_tokenizer,
        hidden,
        [question],
        LOOP,
        progress=False,
    )
    assert episode.termination == "answer"
    assert episode.prediction == "unknown"


def test_with_title_first_search_the_expert_finds_a_page_that_longer_pages_bury(traj_world, traj_tokenizer):
    one_hop = e2hqa.E2HQAConfig(
        min_rounds=0, max_rounds=0, natural=False
    )  # "What is the … of NAME?": NAME's page holds the answer
    question = as_question(e2hqa.synthesize(traj_world, 1, seed=5, config=one_hop).records[0].to_json())
    anchor = traj_world.entity(question.meta["meta"]["answer_id"]).name
    decoys = [
        Page(f"https://decoy.test/{i}", f"{anchor} {word}", f"{anchor} {word}. " * 6 + f"Near {anchor}.")
        for i, word in enumerate(("Airport", "Station", "Harbour", "Museum", "Park", "Bridge"))
    ]
    corpus = Corpus(list(traj_world.pages) + decoys)
    assert anchor not in [h.title for h in corpus.search(anchor, 5)]  # BM25 lists the decoys that repeat the name
    episodes = {}
    for title_first in (False, True):
        registry = build_registry(ToolsConfig(enabled=("search", "visit"), title_first=title_first), corpus=corpus)
        teacher = ExpertTeacher(traj_world, ExpertConfig(detour_rate=0.0, slip_rate=0.0), title_first=title_first)
        [episodes[title_first]] = run_episodes(
            teacher.engine(traj_tokenizer, [question]), traj_tokenizer, registry, [question], LOOP, progress=False
        )
    assert episodes[False].prediction == "unknown"  # it never saw the page it needed
    assert exact_match(episodes[True].prediction, question.answer)


def test_detours_show_recovery_and_rejected_candidates(traj_world, traj_registry, traj_tokenizer, traj_questions):
    teacher = ExpertTeacher(traj_world, ExpertConfig(detour_rate=1.0, batch_rate=0.0, empty_share=1.0, reasoning=False))
    records, _ = synthesize(
        teacher, traj_tokenizer, traj_registry, traj_questions, webdancer_funnel(), tries=1, config=LOOP, progress=False
    )
    assert len(records) >= 0.8 * len(traj_questions)
    texts = ["\n".join(m["content"] for m in r["messages"][2:]) for r in records]
    recovered = [t for t in texts if "No results for" in t]
    assert len(recovered) >= 10  # an empty search, then the agent goes on (the episode is still correct)
    rejected = [t for t in texts if re.search(r"Not (this one|\w)|is out|does not fit|; move on", t)]
    assert rejected
    thoughts = {m["content"].split("</think>")[0] for r in records for m in r["messages"] if m["role"] == "assistant"}
    assert len(thoughts) > 0.8 * sum(1 for r in records for m in r["messages"] if m["role"] == "assistant")


def test_expert_answers_from_a_snippet_that_shows_the_answer(traj_world, traj_registry, traj_tokenizer):
    one_hop = [
        as_question(r.to_json())
        for r in e2hqa.synthesize(
            traj_world, 20, seed=2, config=e2hqa.E2HQAConfig(min_rounds=0, max_rounds=0, natural=False)
        ).records
    ]
    always = ExpertTeacher(traj_world, ExpertConfig(detour_rate=0.0, snippet_rate=1.0))
    records, _ = synthesize(
        always, traj_tokenizer, traj_registry, one_hop, webdancer_funnel(), tries=1, config=LOOP, progress=False
    )
    assert len(records) >= 0.9 * len(one_hop)
    from_snippet = [
        r
        for r in records
        if not any(c["name"] == "visit" for m in r["messages"] if m["role"] == "assistant" for c in _calls(m))
    ]
    assert len(from_snippet) >= len(records) // 2  # snippets cut with "…" still need the page
    for r in from_snippet:
        assert exact_match(r["prediction"], r["answer"])
        observations = "".join(m["content"] for m in r["messages"] if m["role"] == "user")
        quoted = re.search(r"“(.*?)”", r["messages"][-1]["content"]).group(1)
        assert quoted in observations  # the final thought quotes the snippet it answered from


def test_hop_snippets_read_a_link_from_a_snippet_and_the_answer_from_a_hit_shown_beside_it(
    traj_world, traj_registry, traj_tokenizer
):
    two_hop = [
        as_question(r.to_json())
        for r in e2hqa.synthesize(
            traj_world, 30, seed=3, config=e2hqa.E2HQAConfig(min_rounds=1, max_rounds=1, natural=False)
        ).records
    ]

    def solve(hop_snippets: bool) -> list[dict]:
        config = ExpertConfig(detour_rate=0.0, snippet_rate=1.0, hop_snippets=hop_snippets)
        teacher = ExpertTeacher(traj_world, config)
        records, _ = synthesize(
            teacher, traj_tokenizer, traj_registry, two_hop, webdancer_funnel(), tries=1, config=LOOP, progress=False
        )
        assert len(records) >= 0.9 * len(two_hop)
        return records

    def calls(record: dict) -> list[dict]:
        return [c for m in record["messages"] if m["role"] == "assistant" for c in _calls(m)]

    assert all(len(calls(r)) >= 2 for r in solve(False))  # without: the first hop's page is always opened
    one_search = [r for r in solve(True) if [c["name"] for c in calls(r)] == ["search"]]
    assert one_search  # the link and the answer both read from the first search's results
    for r in one_search:
        assert exact_match(r["prediction"], r["answer"])
        observation = r["messages"][3]["content"]
        link, answer = re.findall(r"“(.*?)”", r["messages"][-1]["content"])
        assert link in observation and answer in observation
        hit = re.search(r"\[(\d)\]", r["messages"][-1]["content"]).group(1)
        assert f"[{hit}] {answer.split(' ')[0]}" in observation  # the hit it points at holds the answer


def test_restate_goal_says_what_is_asked_before_quoting_the_sentence_that_answers_it(
    traj_world, traj_registry, traj_tokenizer
):
    one_hop = [
        as_question(r.to_json())
        for r in e2hqa.synthesize(
            traj_world, 20, seed=4, config=e2hqa.E2HQAConfig(min_rounds=0, max_rounds=0, natural=False)
        ).records
    ]
    asked = re.compile(r"<think>(?:The question asks|Wanted:|I am asked) (.+?)\. .*?“(.+?)”", re.DOTALL)
    for restate in (False, True):
        teacher = ExpertTeacher(traj_world, ExpertConfig(detour_rate=0.0, snippet_rate=0.5, restate_goal=restate))
        records, _ = synthesize(
            teacher, traj_tokenizer, traj_registry, one_hop, webdancer_funnel(), tries=1, config=LOOP, progress=False
        )
        assert len(records) >= 0.9 * len(one_hop)
        finals = [asked.match(r["messages"][-1]["content"]) for r in records]
        if not restate:
            assert not any(finals)
            continue
        assert all(finals)
        for record, final in zip(records, finals, strict=True):
            goal, quoted = final.groups()
            subject = next(t for t in quoted.split(" ") if t[:1].isupper())
            assert subject in goal  # the goal names the page the quote comes from
            assert record["prediction"] in quoted.replace(",", "")


def test_slips_show_a_miscopied_search_out_of_the_loss_then_the_right_one(
    traj_world, traj_registry, traj_tokenizer, traj_questions
):
    teacher = ExpertTeacher(traj_world, ExpertConfig(detour_rate=0.0, slip_rate=1.0, link_rate=0.0))
    records, _ = synthesize(
        teacher,
        traj_tokenizer,
        traj_registry,
        traj_questions[:40],
        webdancer_funnel(),
        tries=1,
        config=LOOP,
        transform=teacher.weigh,
        progress=False,
    )
    assert len(records) >= 0.8 * 40  # a slip costs a turn, not the episode
    slipped = [r for r in records if r["provenance"].get("untrained_turns")]
    assert len(slipped) >= len(records) // 2
    for r in slipped:
        turns = r["messages"]
        for i, m in enumerate(turns):
            if m.get("weight") != 0:
                continue
            assert m["role"] == "assistant"
            [wrong] = _calls(m)[0]["arguments"]["query"]
            recovery = turns[i + 2]
            [meant] = _calls(recovery)[0]["arguments"]["query"]  # the right search follows, trained
            assert "weight" not in recovery and meant != wrong
            assert meant in m["content"].split("</think>")[0]  # the slipped turn's thought named the right entity
            assert f"] {meant}\n" not in turns[i + 1]["content"]  # the results do not list its page
            assert f"not {meant}" in recovery["content"] or f"instead of {meant}" in recovery["content"]
        assert sum(m.get("weight") == 0 for m in turns) == r["provenance"]["untrained_turns"]


def test_the_reasoning_expert_quotes_evidence_names_the_next_clue_and_takes_no_candidate_unseen(
    traj_world, traj_registry, traj_tokenizer, traj_questions
):
    questions = traj_questions[::3]  # every recipe
    figures = {}
    for reasoning in (True, False):
        teacher = ExpertTeacher(traj_world, ExpertConfig(reasoning=reasoning, detour_rate=0.0))
        records, stats = synthesize(
            teacher,
            traj_tokenizer,
            traj_registry,
            questions,
            webdancer_funnel(),
            tries=1,
            config=LOOP,
            transform=teacher.weigh,  # the provenance counts the oracle jumps
            progress=False,
        )
        assert not stats.teacher_errors, stats.teacher_errors
        st = trajectory_stats(records)
        figures[reasoning] = (len(records), st.oracle_jumps, st.reasoned / st.after_observation)
    (kept, jumps, reasoned), (kept_narrated, jumps_narrated, reasoned_narrated) = figures[True], figures[False]
    assert jumps == 0 and jumps_narrated > 0  # the narrator takes a listed candidate unseen; the reasoner never
    assert reasoned >= 0.9 and reasoned_narrated < 0.1  # quoted evidence and the next clue, turn after turn
    assert kept >= 0.6 * len(questions) and kept_narrated >= kept  # first fits that are not the answer are dropped


def test_the_reasoning_expert_solves_questions_that_name_nothing_from_the_searches_of_their_clues(
    traj_world, traj_registry, traj_tokenizer
):
    config = RECIPE_CONFIGS["sailorfog"](p_nameless=1.0)  # every draft names nothing (one a search can start)
    drafted = [as_question(r.to_json()) for r in sailorfog.synthesize(traj_world, 12, seed=1, config=config).records]
    nameless = [q for q in drafted if not make_plan(q.meta).anchors]
    assert len(nameless) >= 6
    teacher = ExpertTeacher(traj_world, ExpertConfig(detour_rate=0.0))
    records, stats = synthesize(
        teacher,
        traj_tokenizer,
        traj_registry,
        nameless,
        webdancer_funnel(),
        tries=1,
        config=LOOP,
        transform=teacher.weigh,
        progress=False,
    )
    assert len(records) >= len(nameless) // 2, stats.summary(["validity", "correctness", "quality"])
    for r in records:
        assert r["provenance"]["names_nothing"] and "oracle_jumps" not in r["provenance"]  # nothing taken unseen
        (first,) = _calls(next(m for m in r["messages"] if m["role"] == "assistant"))
        assert first["name"] == "search"
        assert all(re.search(r"\b\d{3,4}\b", query) for query in first["arguments"]["query"])  # the clues' years
        shown = "".join(m["content"] for m in r["messages"][2:] if m["role"] != "assistant")
        assert r["prediction"] in shown  # the answer is copied from an observation
    st = trajectory_stats(records)
    assert st.reasoned / st.after_observation >= 0.9
