"""Tool-call parser: several calls per turn, other keys, near-JSON repaired, errors named; fuzzed with hypothesis."""

import json
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxseeker.agent.parser import ToolCall, ToolCallError, parse_answer, parse_tool_calls, split_think
from jaxseeker.rewards.format import extract_answer


def calls_of(text):
    return [(c.name, c.arguments) if isinstance(c, ToolCall) else c for c in parse_tool_calls(text)]


def test_several_calls_in_one_turn_in_order():
    text = (
        "<think>I need two things.</think>\n"
        '<tool_call>\n{"name": "search", "arguments": {"query": ["Velmora bridge"]}}\n</tool_call>\n'
        '<tool_call>{"name": "visit", "arguments": {"url": "https://world.test/velmora", "goal": "arches"}}</tool_call>'
    )
    assert calls_of(text) == [
        ("search", {"query": ["Velmora bridge"]}),
        ("visit", {"url": "https://world.test/velmora", "goal": "arches"}),
    ]
    assert parse_tool_calls(text)[0].raw == '{"name": "search", "arguments": {"query": ["Velmora bridge"]}}'


@pytest.mark.parametrize(
    "body",
    [
        '{"name": "search", "arguments": {"query": ["a b"]}}',
        '{"tool_name": "search", "tool_args": {"query": ["a b"]}}',
        '{"name": "search", "arguments": "{\\"query\\": [\\"a b\\"]}"}',  # arguments as a JSON string
        '```json\n{"name": "search", "arguments": {"query": ["a b"]}}\n```',
        '{"name": "search" "arguments": {"query": ["a b"]}}',  # missing comma
        '{"name": "search", "arguments": {"query": ["a b",],},}',  # trailing commas
        "{'name': 'search', 'arguments': {'query': ['a b']}}",  # single quotes
        '{"name": "search", "arguments": {"query": ["a b"]}',  # missing closing brace
        '{"name": "search", "arguments": {"query": ["a b"}}',  # missing closing bracket
        '[{"name": "search", "arguments": {"query": ["a b"]}}]',  # a list holding the call
    ],
)
def test_accepted_and_repaired_forms(body):
    assert calls_of(f"<tool_call>{body}</tool_call>") == [("search", {"query": ["a b"]})]


def test_code_with_raw_newlines_and_quotes_survives():
    body = '{"name": "python", "arguments": {"code": "s = \\"hi\\"\nprint(s)"}}'
    assert calls_of(f"<tool_call>{body}</tool_call>") == [("python", {"code": 's = "hi"\nprint(s)'})]


def test_missing_arguments_are_an_empty_object():
    assert calls_of('<tool_call>{"name": "search"}</tool_call>') == [("search", {})]


@pytest.mark.parametrize(
    "body, message",
    [
        ("", "empty <tool_call> block"),
        ("just words", "tool call is not a JSON object with a name and arguments: 'just words'"),
        ('{"arguments": {"query": ["x"]}}', "tool call has no tool name (expected a 'name' string)"),
        ('{"name": 3, "arguments": {}}', "tool call has no tool name"),
        (
            '{"name": "search", "arguments": "query=x"}',
            "arguments of tool call 'search' are not a JSON object: 'query=x'",
        ),
        ('{"name": "search", "arguments": ["x"]}', "arguments of tool call 'search' must be an object, got list"),
    ],
)
def test_unusable_blocks_become_errors_naming_the_problem(body, message):
    (error,) = parse_tool_calls(f"<tool_call>{body}</tool_call>")
    assert isinstance(error, ToolCallError)
    assert message in error.message


def test_an_unclosed_last_block_is_an_error_and_earlier_calls_still_count():
    text = '<tool_call>{"name": "a"}</tool_call> then <tool_call>{"name": "b", "arguments": {'
    first, second = parse_tool_calls(text)
    assert first == ToolCall("a", {}, '{"name": "a"}')
    assert second == ToolCallError(
        "unclosed <tool_call> block: end the call with </tool_call>", '<tool_call>{"name": "b", "arguments": {'
    )


def test_calls_and_answers_inside_the_thought_are_ignored():
    text = '<think>maybe <tool_call>{"name": "x"}</tool_call> or <answer>no</answer></think>\nNothing yet.'
    assert parse_tool_calls(text) == [] and parse_answer(text) is None


def test_split_think():
    assert split_think("<think>\n plan \n</think>\nact") == ("plan", "\nact")
    assert split_think("plan only closed</think>act") == ("plan only closed", "act")  # <think> was in the prompt
    assert split_think("no thought") == ("", "no thought")


def test_an_unclosed_think_is_still_thought():
    assert split_think("<think>maybe <answer>42</answer>") == ("maybe <answer>42</answer>", "")
    assert split_think("<think>a</think> act <think>b") == ("a", " act ")


@pytest.mark.parametrize(
    "text",
    [
        "<think>maybe <answer>42</answer>",  # cut at the token limit mid-thought
        "<think>a</think><think>b <answer>42</answer>",  # a second thought, never closed
        '<think>maybe <tool_call>{"name": "search", "arguments": {}}</tool_call>',
        '<think>a</think><think>b <tool_call>{"name": "search", "arguments": {}}</tool_call>',
        "<think>maybe <tool_call>{",
    ],
)
def test_nothing_inside_an_unclosed_think_is_an_action(text):
    assert parse_answer(text) is None and parse_tool_calls(text) == []
    assert extract_answer(text) is None  # the strict reward reader agrees


def test_a_later_closed_think_is_thought_too():
    assert parse_answer("<think>a</think><think><answer>x</answer></think>") is None
    text = '<think>a</think><tool_call>{"name": "search", "arguments": {}}</tool_call><think>b</think>'
    assert split_think(text) == ("a", '<tool_call>{"name": "search", "arguments": {}}</tool_call>')


def test_the_action_before_a_second_unclosed_think_still_counts():
    text = "<think>a</think><answer>42</answer><think>b <answer>7</answer>"
    assert parse_answer(text) == extract_answer(text) == "42"


def test_parse_answer_takes_the_last_complete_answer():
    assert parse_answer("<think>hm</think><answer> Ida Konst </answer>") == "Ida Konst"
    assert parse_answer("<answer>1412</answer> or <answer>1413</answer>") == "1413"
    assert parse_answer("<answer>unfinished") is None


# --- property-based ------------------------------------------------------------------------------

FRAGMENTS = [
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "</think>",
    "<answer>",
    "</answer>",
    "{",
    "}",
    "[",
    "]",
    '"',
    "'",
    ",",
    ":",
    "\\",
    "name",
    "arguments",
    "tool_name",
    "tool_args",
    " ",
    "\n",
    "null",
    "1",
    "search",
    "```",
]
tag_soup = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=5)), max_size=40).map("".join)


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.text(), tag_soup))
def test_random_text_never_raises(text):
    for item in parse_tool_calls(text):
        assert isinstance(item, (ToolCall, ToolCallError))
        if isinstance(item, ToolCall):
            assert item.name and isinstance(item.arguments, dict)
    assert parse_answer(text) is None or isinstance(parse_answer(text), str)
    thought, rest = split_think(text)
    assert isinstance(thought, str) and isinstance(rest, str)


identifier = st.from_regex(r"[a-z][a-z_]{0,10}", fullmatch=True)
plain = st.text(alphabet=string.ascii_letters + string.digits + " ", max_size=15)
arguments = st.dictionaries(
    identifier, st.one_of(plain, st.integers(-(10**6), 10**6), st.lists(plain, max_size=3)), max_size=4
)


def damaged(kind, name, args):
    exact = json.dumps({"name": name, "arguments": args})
    return {
        "exact": exact,
        "missing_comma": f'{{"name": {json.dumps(name)} "arguments": {json.dumps(args)}}}',
        "trailing_commas": exact.replace("}", ",}").replace("]", ",]"),
        "single_quotes": exact.replace('"', "'"),
        "missing_close": exact[:-1],
        "string_arguments": json.dumps({"tool_name": name, "tool_args": json.dumps(args)}),
    }[kind]


@settings(max_examples=150, deadline=None)
@given(
    identifier,
    arguments,
    st.sampled_from(
        ["exact", "missing_comma", "trailing_commas", "single_quotes", "missing_close", "string_arguments"]
    ),
)
def test_repaired_calls_parse_to_the_intended_call(name, args, kind):
    text = f"<think>plan</think>\n<tool_call>\n{damaged(kind, name, args)}\n</tool_call>"
    assert calls_of(text) == [(name, args)]
