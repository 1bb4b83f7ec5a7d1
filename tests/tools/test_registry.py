"""ToolRegistry: schemas for the prompt, argument checks, failures as observations, concurrent calls."""

import threading
import time

import pytest

from jaxseeker.tools import Tool, ToolError, ToolRegistry

ECHO_PARAMETERS = {
    "type": "object",
    "properties": {
        "words": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "times": {"type": "integer"},
        "mode": {"type": "string", "enum": ["upper", "lower"]},
    },
    "required": ["words"],
}


def echo(args):
    text = " ".join(args["words"]) * args.get("times", 1)
    return text.upper() if args.get("mode") == "upper" else text


def failing(args):
    raise ToolError("the page is gone")


def crashing(args):
    return {"not": "text"}["missing"]


@pytest.fixture
def registry():
    return ToolRegistry(
        [
            Tool("echo", "Repeat words.", ECHO_PARAMETERS, echo),
            Tool("failing", "Always fails.", {"type": "object", "properties": {}}, failing),
            Tool("crashing", "Has a bug.", {"type": "object", "properties": {}}, crashing),
        ]
    )


def test_schemas_are_openai_function_schemas(registry):
    schemas = registry.schemas()
    assert [s["function"]["name"] for s in schemas] == ["echo", "failing", "crashing"]
    assert schemas[0] == {
        "type": "function",
        "function": {"name": "echo", "description": "Repeat words.", "parameters": ECHO_PARAMETERS},
    }


def test_call_returns_the_observation_and_latency(registry):
    result = registry.call("echo", {"words": ["a", "b"], "times": 2, "mode": "upper"})
    assert (result.text, result.error) == ("A BA B", None)
    assert result.arguments == {"words": ["a", "b"], "times": 2, "mode": "upper"}
    assert result.latency_s >= 0


def test_a_string_or_json_list_is_accepted_for_an_array_argument(registry):
    assert registry.call("echo", {"words": "hello"}).text == "hello"
    assert registry.call("echo", {"words": '["a", "b"]'}).text == "a b"
    assert registry.call("echo", {"words": ["x"], "times": "3"}).text == "xxx"


@pytest.mark.parametrize(
    "name, arguments, expected",
    [
        ("nope", {}, "unknown tool 'nope'; available tools: echo, failing, crashing"),
        ("echo", {}, "missing required argument 'words' (array of strings)"),
        (
            "echo",
            {"words": ["a"], "colour": "red"},
            "unknown argument(s) ['colour']; known: ['mode', 'times', 'words']",
        ),
        ("echo", {"words": [1, 2]}, "argument 'words' must be array of strings"),
        ("echo", {"words": []}, "argument 'words' needs at least 1 item(s)"),
        ("echo", {"words": ["a"], "times": True}, "argument 'times' must be integer, got bool"),
        ("echo", {"words": ["a"], "mode": "loud"}, "argument 'mode' must be one of ['upper', 'lower'], got 'loud'"),
        ("echo", ["a"], "arguments must be a JSON object, got list"),
        ("failing", {}, "the page is gone"),
        ("crashing", {}, "KeyError: 'missing'"),
    ],
)
def test_every_failure_becomes_an_error_observation(registry, name, arguments, expected):
    result = registry.call(name, arguments)
    assert result.error == expected
    assert result.text == f"[tool error] {name}: {expected}"


def test_duplicate_names_are_refused_and_extended_leaves_the_original(registry):
    with pytest.raises(ValueError, match="'echo' is already registered"):
        registry.register(Tool("echo", "again", ECHO_PARAMETERS, echo))
    bigger = registry.extended(Tool("shout", "Shout.", ECHO_PARAMETERS, echo))
    assert "shout" in bigger and "shout" not in registry
    assert bigger.names == ["echo", "failing", "crashing", "shout"]


def test_call_many_runs_calls_concurrently_and_keeps_their_order():
    barrier = threading.Barrier(4, timeout=60)

    def slow(args):
        barrier.wait()  # only passes when all four calls run at the same time
        time.sleep(0.05)
        return args["words"][0]

    registry = ToolRegistry([Tool("slow", "Waits.", ECHO_PARAMETERS, slow)])
    calls = [("slow", {"words": [str(i)]}) for i in range(4)] + [("missing", {})]
    results = registry.call_many(calls, max_workers=4)
    assert [r.text for r in results[:4]] == ["0", "1", "2", "3"]
    assert results[4].error.startswith("unknown tool 'missing'")
    assert registry.call_many([]) == []
