"""The rollout loop driven by scripted policies over the real local tools: episodes, terminations, concurrency."""

import threading
import time

import numpy as np
import pytest
from agent_support import ANSWER, DATE, QUESTION, SEARCH, SLOW, VISIT, slow_tool, submit

from jaxseeker.agent import FINAL_ANSWER_REQUEST, Renderer, RolloutConfig, initial_messages, rollout, run_episodes
from jaxseeker.agent.prompts import NO_ACTION_ERROR
from jaxseeker.data import normalize_messages, tokenize_chat
from jaxseeker.rewards import submission_feedback, token_f1
from jaxseeker.tools import Tool, ToolRegistry, answer_submit_tool

CONFIG = RolloutConfig(date=DATE, answer_reserve_tokens=64)


def one(engine, tokenizer, registry, config=CONFIG, question=QUESTION):
    [episode] = run_episodes(engine, tokenizer, registry, [question], config, progress=False)
    return episode


def test_think_search_visit_answer_episode(scripted, tokenizer, registry):
    contexts = []

    def policy(context, turn):
        contexts.append(context)
        return [SEARCH, VISIT, ANSWER][turn]

    engine = scripted(policy)
    question = {"question": QUESTION, "answer": "nine", "id": "velmora-1"}
    episode = one(engine, tokenizer, registry, question=question)

    assert (episode.termination, episode.prediction, episode.answer) == ("answer", "nine", "nine")
    assert episode.meta == {"id": "velmora-1"} and episode.turns == 3 and episode.format_errors == 0
    assert [m["role"] for m in episode.messages] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert f"Current date: {DATE}" in episode.messages[0]["content"]
    assert [m["content"] for m in episode.messages[2::2]] == [SEARCH, VISIT, ANSWER]
    search_obs, visit_obs = episode.messages[3]["content"], episode.messages[5]["content"]
    assert search_obs.startswith("<tool_response>\n") and search_obs.endswith("\n</tool_response>")
    assert "https://world.test/velmora" in search_obs and "nine arches" in visit_obs
    assert [(c.turn, c.name, c.error) for c in episode.tool_calls] == [(1, "search", None), (2, "visit", None)]
    assert episode.tool_calls[1].arguments == {"url": "https://world.test/velmora", "goal": "arches of the bridge"}
    assert all(c.latency_s > 0 for c in episode.tool_calls)
    assert episode.timings["wall_s"] >= episode.timings["tool_wait_s"] >= episode.timings["tool_s"] > 0

    # The rendering identity: the loop's context is exactly the SFT tokenization of its messages.
    ids, mask = tokenize_chat(episode.messages, tokenizer)
    assert episode.token_ids == ids.tolist()
    assert episode.loss_mask == mask.tolist()
    sampled = [t for t, m in zip(episode.token_ids, episode.loss_mask) if m]
    assert tokenizer.decode(sampled) == "".join(c + "<|im_end|>" for c in (SEARCH, VISIT, ANSWER))
    assert len(episode.logprobs) == len(ids) and not any(episode.logprobs)  # a script samples with p = 1
    last_turn = max(i for i in range(1, len(mask)) if mask[i] and not mask[i - 1])
    assert contexts[-1] == tokenizer.decode(episode.token_ids[:last_turn])  # the engine held the same context


def test_turns_cut_at_a_stop_string_are_closed_by_the_loop_with_mask_zero(scripted, tokenizer, registry):
    engine = scripted([SEARCH, VISIT, ANSWER], stop_strings=("</tool_call>", "</answer>"))
    episode = one(engine, tokenizer, registry)

    ids, mask = tokenize_chat(episode.messages, tokenizer)
    assert episode.token_ids == ids.tolist()  # same context ...
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    written = np.flatnonzero(mask - np.asarray(episode.loss_mask))  # ... but the loop, not the policy, wrote these
    assert len(written) == 3 and all(episode.token_ids[i] == im_end for i in written)
    assert not np.any(np.asarray(episode.loss_mask) > mask)


def test_max_tool_calls_ends_the_episode_before_running_more(scripted, tokenizer, registry):
    episode = one(scripted([SEARCH]), tokenizer, registry, RolloutConfig(date=DATE, max_tool_calls=2))
    assert episode.termination == "max_tool_calls"
    assert [c.name for c in episode.tool_calls] == ["search", "search"] and episode.turns == 3
    assert episode.prediction is None


def test_context_limit_asks_once_for_the_final_answer(scripted, tokenizer, registry):
    def policy(context, turn):
        return ANSWER if FINAL_ANSWER_REQUEST in context else SEARCH

    prompt = len(Renderer(tokenizer).prompt_ids(initial_messages(QUESTION, registry.schemas(), date=DATE)))
    config = RolloutConfig(date=DATE, max_context_tokens=prompt + 600, answer_reserve_tokens=150)
    episode = one(scripted(policy), tokenizer, registry, config)

    assert episode.termination == "max_context" and episode.prediction == "nine"
    requests = [m for m in episode.messages if m["content"] == FINAL_ANSWER_REQUEST]
    assert len(requests) == 1 and episode.messages[-2] is requests[0]
    assert len(episode.tool_calls) >= 1 and episode.turns >= 2
    assert len(episode.token_ids) <= prompt + 600 + 1  # + the trailing newline of the rendering
    assert episode.token_ids == tokenize_chat(episode.messages, tokenizer)[0].tolist()


def test_no_answer_after_the_final_answer_request_still_ends_the_episode(scripted, tokenizer, registry):
    prompt = len(Renderer(tokenizer).prompt_ids(initial_messages(QUESTION, registry.schemas(), date=DATE)))
    config = RolloutConfig(date=DATE, max_context_tokens=prompt + 300, answer_reserve_tokens=150)
    episode = one(scripted([SEARCH]), tokenizer, registry, config)
    assert episode.termination == "max_context" and episode.prediction is None
    assert episode.messages[-2]["content"] == FINAL_ANSWER_REQUEST


def test_three_turns_in_a_row_without_call_or_answer_are_a_format_error(scripted, tokenizer, registry):
    episode = one(scripted(["I am not sure what to do."]), tokenizer, registry)
    assert episode.termination == "format_error" and episode.format_errors == 3 and episode.turns == 3
    observations = [m["content"] for m in episode.messages[3::2]]
    assert observations == [f"<tool_response>\n{NO_ACTION_ERROR}\n</tool_response>"] * 2


def test_bad_calls_and_failing_tools_become_observations(scripted, tokenizer, registry):
    bad_turn = (
        "<think>Try several things.</think>\n"
        '<tool_call>["not", "a call"]</tool_call>\n'
        '<tool_call>{"name": "fly", "arguments": {"to": "Velmora"}}</tool_call>\n'
        '<tool_call>{"name": "visit", "arguments": {"url": "https://world.test/nowhere", "goal": "x"}}</tool_call>'
    )
    episode = one(scripted(["No tags here.", bad_turn, ANSWER]), tokenizer, registry)

    assert episode.termination == "answer" and episode.format_errors == 1
    assert [(c.name, c.error is not None) for c in episode.tool_calls] == [("fly", True), ("visit", True)]
    observation = episode.messages[5]["content"]
    blocks = observation.split("\n</tool_response>\n<tool_response>\n")
    assert len(blocks) == 4  # a list of two non-calls is two errors
    assert all("[format error] tool call is not a JSON object" in b for b in blocks[:2])
    assert "[tool error] fly: unknown tool 'fly'" in blocks[2] and "available tools: search, visit" in blocks[2]
    assert "[tool error] visit" in blocks[3] and "nowhere" in blocks[3]


def test_several_calls_in_one_turn_give_one_canonical_observation(scripted, tokenizer, registry):
    both = SEARCH + "\n" + VISIT.split("</think>\n")[1]
    episode = one(scripted([both, ANSWER]), tokenizer, registry)
    assert [c.name for c in episode.tool_calls] == ["search", "visit"]
    observation = episode.messages[3]
    assert observation["content"].count("<tool_response>") == 2
    assert normalize_messages(episode.messages) == episode.messages  # already in the data's canonical form


def test_a_turn_cut_at_max_tokens_per_turn_is_reported_to_the_policy(scripted, tokenizer, registry):
    long_thought = "<think>" + "I keep thinking about rivers and towns. " * 20 + "</think>\n<answer>nine</answer>"
    episode = one(scripted([long_thought]), tokenizer, registry, RolloutConfig(date=DATE, max_tokens_per_turn=16))
    assert episode.termination == "format_error"
    assert "cut after 16 tokens" in episode.messages[3]["content"]
    assert [int(sum(m)) for m in _turn_masks(episode)] == [16, 16, 16]


def _turn_masks(episode):
    mask = np.asarray(episode.loss_mask)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask, [0]])))
    return [mask[a:b] for a, b in zip(edges[::2], edges[1::2])]


def test_timeout_ends_an_episode_waiting_for_a_slow_tool(scripted, tokenizer):
    release, returned = threading.Event(), threading.Event()

    def held(args):  # returns once the test lets it (or after 30 s)
        release.wait(30)
        returned.set()
        return "done"

    registry = ToolRegistry([Tool("slow", "Wait a little.", {"type": "object", "properties": {}}, held)])
    try:
        episode = one(scripted([SLOW, ANSWER]), tokenizer, registry, RolloutConfig(date=DATE, timeout_s=0.2))
        assert not returned.is_set()  # the episode ended without waiting for the tool to return
    finally:
        release.set()
    assert episode.termination == "timeout" and episode.tool_calls == []
    assert episode.token_ids == tokenize_chat(episode.messages, tokenizer)[0].tolist()


def test_multi_submit_continues_until_the_feedback_says_correct(scripted, tokenizer, registry):
    def with_submit(question):
        def feedback(answer):
            return submission_feedback(token_f1(answer, question.answer), threshold=1.0)

        return registry.extended(answer_submit_tool(feedback))

    engine = scripted([SEARCH, submit("eight"), VISIT, submit("nine"), ANSWER])
    episode = one(engine, tokenizer, with_submit, question={"question": QUESTION, "answer": "nine"})
    assert episode.termination == "answer" and episode.prediction == "nine" and episode.turns == 4
    assert [(s.answer, s.feedback.split()[0]) for s in episode.submissions] == [
        ("eight", "Incorrect!"),
        ("nine", "Correct!"),
    ]
    assert "answer_submit" in episode.messages[0]["content"]
    assert "Incorrect! The F1 score is 0.00." in episode.messages[5]["content"]

    capped = one(
        scripted([submit("eight")]),
        tokenizer,
        with_submit,
        RolloutConfig(date=DATE, max_submissions=2),
        question={"question": QUESTION, "answer": "nine"},
    )
    assert (capped.termination, capped.prediction, len(capped.submissions)) == ("answer", "eight", 2)


def test_episodes_overlap_their_tool_calls_and_queue_beyond_the_slots(scripted, tokenizer):
    # Every call waits until the calls of all six episodes are in flight at once (episodes run one after another
    # would break the barrier: a tool error), then a moment more, in which no episode has anything to decode.
    together = threading.Barrier(6, timeout=60)

    def meet(args):
        together.wait()
        time.sleep(0.2)
        return "all here"

    registry = ToolRegistry([Tool("slow", "Wait a little.", {"type": "object", "properties": {}}, meet)])
    engine = scripted([SLOW, SLOW, ANSWER], slots=6)
    result = rollout(
        engine, tokenizer, registry, ["q a", "q b", "q c"], RolloutConfig(date=DATE), n_per_question=2, progress=False
    )

    assert [c.error for e in result.episodes for c in e.tool_calls] == [None] * 12  # no broken barrier: both
    assert all("all here" in m["content"] for e in result.episodes for m in e.messages[3::2])  # rounds overlapped
    assert [(e.group, e.sample, e.question) for e in result.episodes] == [
        (0, 0, "q a"),
        (0, 1, "q a"),
        (1, 0, "q b"),
        (1, 1, "q b"),
        (2, 0, "q c"),
        (2, 1, "q c"),
    ]
    assert result.stats.terminations == {"answer": 6} and result.stats.tool_calls == 12
    assert result.stats.sampled_tokens == sum(sum(e.loss_mask) for e in result.episodes)
    stats = result.stats  # the engine waited for the tools: idle time, apart from its steps
    assert stats.idle_s > 0 and stats.step_s > 0 and stats.step_s + stats.idle_s <= stats.wall_s

    queued = run_episodes(
        scripted([SEARCH, ANSWER], slots=2),
        tokenizer,
        ToolRegistry([slow_tool(0.0)]),
        [f"q {i}" for i in range(5)],
        RolloutConfig(date=DATE),
        progress=False,
    )
    assert [e.termination for e in queued] == ["answer"] * 5


def test_bad_questions_and_config_name_the_problem(scripted, tokenizer, registry):
    with pytest.raises(ValueError, match=r"questions\[1\]: 'question' must be a non-empty string"):
        run_episodes(scripted([ANSWER]), tokenizer, registry, ["ok", {"answer": "x"}], progress=False)
    with pytest.raises(ValueError, match="RolloutConfig.max_tool_calls must be >= 1"):
        RolloutConfig(max_tool_calls=0)


def test_first_group_numbers_the_groups_and_their_engine_requests(scripted, tokenizer, registry):
    engine = scripted(lambda context, turn: ANSWER)
    submitted, submit_request = [], engine.submit

    def recorded_submit(request_id, prompt, **kwargs):
        submitted.append(request_id)
        return submit_request(request_id, prompt, **kwargs)

    engine.submit = recorded_submit
    result = rollout(
        engine, tokenizer, registry, [QUESTION, QUESTION], CONFIG, n_per_question=2, progress=False, first_group=3
    )
    assert [(e.group, e.sample) for e in result.episodes] == [(3, 0), (3, 1), (4, 0), (4, 1)]
    assert sorted(submitted) == ["3:0", "3:1", "4:0", "4:1"]  # the engine keys its sampling by these ids


def test_groups_name_each_question_and_each_finished_episode_is_handed_over_once(scripted, tokenizer, registry):
    engine = scripted(lambda context, turn: SEARCH if turn == 0 else ANSWER)
    seen = []
    result = rollout(
        engine,
        tokenizer,
        registry,
        [QUESTION, QUESTION],
        CONFIG,
        progress=False,
        groups=[5, 2],
        on_episode=lambda e: seen.append((e.group, e.termination)),
    )
    assert [e.group for e in result.episodes] == [2, 5]  # sorted by group, as always
    assert sorted(seen) == [(2, "answer"), (5, "answer")]  # once each, as it finished
    with pytest.raises(ValueError, match="groups: 1 group ids for 2 questions"):
        rollout(engine, tokenizer, registry, [QUESTION, QUESTION], CONFIG, progress=False, groups=[1])
