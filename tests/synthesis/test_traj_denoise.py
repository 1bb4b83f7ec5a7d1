"""OpenSeeker denoised synthesis: the teacher reads summaries of old observations, the trajectory keeps raw ones."""

from __future__ import annotations

from traj_support import LOOP

from jaxseeker.agent import run_episodes
from jaxseeker.data.records import is_observation
from jaxseeker.synthesis import (
    DenoisedTeacher,
    ExpertTeacher,
    denoised_context,
    extractive_summary,
)
from jaxseeker.synthesis.denoise import SUMMARY_MARK


def test_teacher_context_is_raw_only_for_the_last_observation(
    traj_world, traj_registry, traj_tokenizer, traj_questions
):
    contexts: list = []
    teacher = DenoisedTeacher(ExpertTeacher(traj_world), contexts=contexts)
    questions = traj_questions[:12]
    episodes = run_episodes(
        teacher.engine(traj_tokenizer, questions), traj_tokenizer, traj_registry, questions, LOOP, progress=False
    )
    assert sum(e.prediction == e.answer for e in episodes) >= 9  # the expert still solves them from this view
    long_ones = [c for c in contexts if sum(map(is_observation, c)) >= 3]
    assert long_ones
    for context in contexts:
        observations = [m["content"] for m in context if is_observation(m)]
        for summary in observations[:-1]:
            assert SUMMARY_MARK in summary and "Evidence in page" not in summary
        if observations:
            assert SUMMARY_MARK not in observations[-1]
    by_question = {e.question: e for e in episodes}
    for context in long_ones:
        raw = [m["content"] for m in by_question[context[1]["content"]].messages if is_observation(m)]
        shown = [m["content"] for m in context if is_observation(m)]
        assert shown[-1] == raw[len(shown) - 1]  # the last observation is exactly what the tool returned
        assert sum(map(len, shown[:-1])) < sum(map(len, raw[: len(shown) - 1]))
    for e in episodes:  # the saved trajectory restores every raw observation
        saved = [m["content"] for m in e.messages if is_observation(m)]
        assert saved and all(SUMMARY_MARK not in o for o in saved)
        assert all(
            o.startswith("<tool_response>\nSearch results") or "\nPage: " in o or "No results" in o for o in saved
        )


def test_extractive_summary_keeps_titles_urls_and_first_sentences(traj_registry, traj_world):
    page = traj_world.pages[0]
    search = traj_registry.call("search", {"query": [page.title]}).text
    visit = traj_registry.call("visit", {"url": [page.url], "goal": "facts"}).text
    assert page.url in extractive_summary(f"<tool_response>\n{search}\n</tool_response>")
    summary = extractive_summary(f"<tool_response>\n{visit}\n</tool_response>")
    assert summary.startswith(f"visited {page.title} ({page.url}): {page.text.split('. ')[0]}")
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": f"<tool_response>\n{visit}\n</tool_response>"},
        {"role": "assistant", "content": "a2"},
        {"role": "user", "content": f"<tool_response>\n{search}\n</tool_response>"},
    ]
    view = denoised_context(messages, lambda obs, q: f"{len(obs)} chars for {q}")
    assert (
        view[3]["content"]
        == f"<tool_response>\n{SUMMARY_MARK}{len(messages[3]['content'])} chars for q\n</tool_response>"
    )
    assert view[5] == messages[5] and view[:3] == messages[:3]
