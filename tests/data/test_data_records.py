"""Reading JSONL trajectories: both observation styles, prompt/completion, bad lines as FILE:LINE."""

import json

import pytest

from jaxseeker.data import BadLineError, iter_jsonl, normalize_messages, parse_record, read_trajectories
from jaxseeker.data.records import MAX_MESSAGES, lone_surrogate
from jaxseeker.errors import InputError
from jaxseeker.jsonl import json_lines

from .samples import openseeker_messages, webdancer_messages


def test_tool_runs_become_one_user_observation():
    messages = normalize_messages(openseeker_messages())
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    assert messages[3]["content"] == (
        "<tool_response>\n1. Lyon museum\n</tool_response>\n<tool_response>\n2. Berlin tower\n</tool_response>"
    )
    assert messages == normalize_messages(webdancer_messages())
    assert normalize_messages(messages) == messages  # idempotent


def test_other_keys_are_kept_and_source_is_recorded(write_jsonl):
    path = write_jsonl("t.jsonl", [{"messages": webdancer_messages(), "answer": "Lyon", "id": 7}])
    (record,) = read_trajectories(path)
    assert record.meta == {"answer": "Lyon", "id": 7}
    assert record.source == f"{path}:1"


def test_weight_0_marks_an_untrained_assistant_turn_and_minus_1_a_rejected_one():
    messages = webdancer_messages()
    for weight in (0, -1):
        messages[2] = {**messages[2], "weight": weight}
        normal = normalize_messages(messages)
        assert normal[2]["weight"] == weight and normalize_messages(normal) == normal
    assert "weight" not in normalize_messages([*messages[:2], {**messages[2], "weight": 1}])[2]
    for bad in (
        {**messages[1], "weight": 0},
        {**messages[2], "weight": 0.5},
        {**messages[2], "weight": True},
        {**messages[2], "weight": -2},
    ):
        with pytest.raises(ValueError, match=r"messages\[\d\]: 'weight' must be 1, 0 or -1 on an assistant message"):
            normalize_messages([messages[0], bad] if bad["role"] == "user" else [*messages[:2], bad])


def test_prompt_completion_records():
    record = parse_record({"prompt": "Capital of France?", "completion": "<answer>Paris</answer>", "k": 1})
    assert list(record.messages) == [
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "<answer>Paris</answer>"},
    ]
    assert record.meta == {"k": 1}
    chat = parse_record(
        {"prompt": [{"role": "user", "content": "Q"}], "completion": [{"role": "assistant", "content": "A"}]}
    )
    assert [m["role"] for m in chat.messages] == ["user", "assistant"]


BAD = [
    ({"messages": webdancer_messages()}, None),
    ("{not json", "invalid JSON"),
    ({"text": "hi"}, "expected key 'messages'"),
    ({"messages": [{"role": "robot", "content": "x"}]}, "role 'robot'"),
    ({"messages": [{"role": "user", "content": "q"}]}, "no assistant message"),
    (
        {
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "system", "content": "s"},
                {"role": "assistant", "content": "a"},
            ]
        },
        "system message may only come first",
    ),
    (
        {
            "messages": [
                {"role": "user", "content": "<tool_response>x</tool_response>"},
                {"role": "assistant", "content": "a"},
            ]
        },
        "user question",
    ),
    ({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": None}]}, "missing 'content'"),
    ("[1, 2]", "expected a JSON object"),
]


def test_bad_lines_name_file_and_line(write_jsonl):
    path = write_jsonl("bad.jsonl", [line for line, _ in BAD[:4]] + [""] + [line for line, _ in BAD[4:]])
    with pytest.raises(BadLineError) as err:
        read_trajectories(path)
    reasons = [reason for _, reason in BAD if reason]
    assert len(err.value.bad_lines) == len(reasons)
    line_numbers = [2, 3, 4, 6, 7, 8, 9, 10]  # line 5 is blank and skipped, line 1 is good
    for bad, line_no, reason in zip(err.value.bad_lines, line_numbers, reasons):
        assert str(bad).startswith(f"{path}:{line_no}: ")
        assert reason in bad.reason
    assert f"{path}:3: " in str(err.value) and "skip_bad_lines" in str(err.value)


def test_skip_bad_lines_keeps_the_good_ones(write_jsonl):
    path = write_jsonl("mixed.jsonl", ["{oops", {"messages": openseeker_messages(), "id": 1}])
    (record,) = read_trajectories(path, skip_bad_lines=True)
    assert record.meta == {"id": 1} and record.source.endswith(":2")
    items = list(iter_jsonl(path))
    assert str(items[0]).startswith(f"{path}:1: invalid JSON")


GOOD = b'{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}'


def test_undecodable_lines_are_bad_lines_and_the_others_are_kept(tmp_path):
    path = tmp_path / "raw.jsonl"
    path.write_bytes(
        b"\xef\xbb\xbf"
        + GOOD
        + b"\n"  # a BOM is dropped
        + GOOD.replace(b'"q"', b'"caf\xe9"')
        + b"\n"  # Latin-1, not UTF-8
        + GOOD.replace(b", {", b",\r{")
        + b"\r\n"  # a lone \r is JSON whitespace, not a line end
        + b'{"n": '
        + b"1" * 5000
        + b"}\n"  # an integer over Python's digit limit
        + b"[" * 100_000
        + b"]" * 100_000
        + b"\n"  # nested too deeply
        + GOOD.replace(b'"q"', b'"q\\ud800"')
        + b"\n"  # a lone surrogate escape
        + GOOD
    )
    items = list(iter_jsonl(path))
    assert [getattr(item, "source", None) for item in items] == [
        f"{path}:1",
        None,
        f"{path}:3",
        None,
        None,
        None,
        f"{path}:7",
    ]
    reasons = [items[i].reason for i in (1, 3, 4, 5)]
    assert reasons[0] == "not UTF-8: byte 0xe9 at byte 47 of the line"
    assert reasons[1] == "invalid JSON: an integer of 5000 digits (at most 4300 are read)"
    assert reasons[2] == "invalid JSON: arrays or objects nested deeper than 100"
    assert reasons[3].startswith("messages[0]: content holds a lone surrogate '\\ud800' at character 1")
    with pytest.raises(InputError, match=f"^{path}:2: not UTF-8"):
        list(json_lines(path))


def test_lone_surrogate_is_the_index_of_the_first_unpaired_utf16_half():
    assert lone_surrogate("caf\u00e9 \U0001f600") is None  # an astral character is one code point, not two halves
    assert lone_surrogate("q\ud800") == 1  # what json.loads makes of '"q\\ud800"'
    assert lone_surrogate("ab\udc00 \ud83d") == 2


def test_a_directory_or_unread_tool_calls_are_named(tmp_path, capsys):
    with pytest.raises(InputError, match=f"^{tmp_path}: is a directory"):
        read_trajectories(tmp_path)
    call = {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "search", "arguments": "{}"}}]}
    with pytest.raises(ValueError, match=r"messages\[1\]: 'tool_calls' is not read"):
        normalize_messages([{"role": "user", "content": "q"}, call, {"role": "tool", "content": "r"}])
    kept = {**call, "content": '<tool_call>{"name": "search", "arguments": {}}</tool_call>'}
    assert normalize_messages([{"role": "user", "content": "q"}, kept])[1] == {
        "role": "assistant",
        "content": kept["content"],
    }
    path = tmp_path / "t.jsonl"
    path.write_bytes(GOOD + b"\n[1]\n")
    assert len(read_trajectories(path, skip_bad_lines=True)) == 1
    assert capsys.readouterr().err == f"skipped 1 bad line(s), first: {path}:2: expected a JSON object, got list\n"


@pytest.mark.parametrize("turns", [5_000, 100_000])
def test_a_record_of_more_messages_than_the_limit_is_a_bad_line(tmp_path, turns):
    messages = [{"role": "user", "content": "q"}]
    messages += [
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "<tool_response>r</tool_response>"},
    ] * turns
    path = tmp_path / "long.jsonl"
    path.write_text(json.dumps({"messages": messages + [{"role": "assistant", "content": "done"}]}) + "\n")
    n = 2 * turns + 2
    [item] = iter_jsonl(path)
    assert str(item) == f"{path}:1: {n:,} messages, over the limit of {MAX_MESSAGES:,} (max_messages)"
    [record] = iter_jsonl(path, max_messages=n)  # a user with longer trajectories raises the limit
    assert len(record.messages) == n
