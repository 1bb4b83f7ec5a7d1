import pytest

from jaxseeker.rewards import check_format, extract_answer

SEARCH = '<think>I should look it up.</think>\n<tool_call>{"name": "search", "arguments": {"query": ["x"]}}</tool_call>'
VISIT = (
    "<think>Two pages at once.</think>"
    '<tool_call>{"name": "visit", "arguments": {"url": "a"}}</tool_call>\n'
    '<tool_call>{"name": "visit", "arguments": {"url": "b"}}</tool_call>'
)
ANSWER = "<think>Found it.</think>\n<answer> Paris </answer>"


def test_a_well_formed_episode_passes():
    result = check_format([SEARCH, VISIT, ANSWER])
    assert result.ok and result.reasons == []
    assert check_format(ANSWER).ok  # a single string is a one-turn episode


@pytest.mark.parametrize(
    "turn, reason",
    [
        ("<answer>Paris</answer>", "does not start with <think>"),
        ("<think>hm</think>", "has no <tool_call> or <answer>"),
        ("<think>a</think><think>b</think><answer>x</answer>", "more than one <think>"),
        ("<think>a</think><answer>x</answer><answer>y</answer>", "more than one <answer>"),
        (
            '<think>a</think><tool_call>{"name": "search"}</tool_call><answer>x</answer>',
            "mixes <tool_call> and <answer>",
        ),
        ("<think>a</think>So the answer is <answer>x</answer>", "text outside tags: 'So the answer is'"),
        ("<think>a</think><answer>x", "<answer> is never closed"),
        ("<think>a<answer>x</answer></think>", "<answer> opened inside <think>"),
        ("<think>a</think></answer>", "</answer> without a matching <answer>"),
        ("<think>a</think><answer>x</answer><tool_response>y</tool_response>", "contains <tool_response>"),
    ],
)
def test_malformed_final_turns_are_rejected_with_a_reason(turn, reason):
    result = check_format([SEARCH, turn])
    assert not result.ok
    assert any(r.startswith("turn 1: ") and reason in r for r in result.reasons), result.reasons


@pytest.mark.parametrize(
    "body, reason",
    [
        ("{'name': 'search'}", "not valid JSON"),
        ('{"name": "search", "arguments": {"query": "x"}', "not valid JSON"),
        ('["search"]', 'needs a string "name"'),
        ('{"name": "search", "arguments": "query=x"}', '"arguments" must be a JSON object'),
    ],
)
def test_tool_calls_must_be_strict_json(body, reason):
    result = check_format([f"<think>t</think><tool_call>{body}</tool_call>", ANSWER])
    assert not result.ok
    assert any(r.startswith("turn 0: ") and reason in r for r in result.reasons), result.reasons


def test_exactly_one_final_answer_ends_the_episode():
    assert check_format([]).reasons == ["episode has no assistant turn"]
    no_answer = check_format([SEARCH, VISIT])
    assert no_answer.reasons == ["turn 1: the episode does not end with an <answer>"]
    two_answers = check_format([ANSWER, ANSWER])
    assert two_answers.reasons == ["episode has 2 answer turns, at most 1 allowed"]
    answer_then_search = check_format([ANSWER, SEARCH])
    assert not answer_then_search.ok


def test_srrl_episodes_may_submit_several_answers():
    episode = [SEARCH, ANSWER, SEARCH, ANSWER]
    assert check_format(episode, max_answers=20).ok
    assert not check_format(episode).ok


def test_non_string_turn_names_its_index():
    with pytest.raises(TypeError, match="assistant turn 1 is dict"):
        check_format([SEARCH, {"role": "assistant"}])


def test_extract_answer_returns_the_last_answer():
    assert extract_answer([SEARCH, ANSWER]) == "Paris"
    assert extract_answer([ANSWER, "<think>t</think><answer>Lyon</answer>"]) == "Lyon"
    assert extract_answer([SEARCH]) is None
