"""`jaxseeker.jsonl`: the bounded reader every JSONL file goes through (line size, nesting, numbers, quoted values),
and an append-only JSONL file a killed writer left with an unfinished last line is mended."""

import json
import tracemalloc

import pytest

from jaxseeker.errors import InputError
from jaxseeker.jsonl import MAX_DEPTH, MAX_LINE_BYTES, QUOTE_CHARS, drop_torn_tail, json_lines, json_values, quote


def test_an_unfinished_last_line_is_cut_so_appends_start_a_line_of_their_own(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": 2}\n{"a": 3, "text": "caf\xc3')  # killed mid-write, mid-character
    assert drop_torn_tail(path) == len(b'{"a": 3, "text": "caf\xc3')
    with path.open("a") as f:
        f.write('{"a": 3}\n')
    assert [obj for _, obj in json_lines(path)] == [{"a": 1}, {"a": 2}, {"a": 3}]
    assert drop_torn_tail(path) == 0 and path.read_bytes().endswith(b'{"a": 3}\n')  # a whole file stays as it is


def test_a_whole_last_line_without_its_line_feed_gets_one(tmp_path):
    path = tmp_path / "hand.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}')
    assert drop_torn_tail(path) == 0 and path.read_text() == '{"a": 1}\n{"a": 2}\n'


@pytest.mark.parametrize("chunk", [3, 1 << 16])
def test_a_file_of_one_unfinished_line_is_emptied_whatever_the_chunk(tmp_path, chunk):
    path = tmp_path / "one.jsonl"
    path.write_text('{"question": "' + "x" * 40)
    assert drop_torn_tail(path, chunk=chunk) == 54 and path.read_bytes() == b""
    path.write_text('{"a": 1}\n' + '{"b": "' + "y" * 20)
    assert drop_torn_tail(path, chunk=chunk) == 27 and path.read_text() == '{"a": 1}\n'
    assert drop_torn_tail(path, chunk=chunk) == 0


def test_a_bad_line_before_the_last_is_still_named(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"a": 1}\n{"a": \n{"a": 3}\n')
    assert drop_torn_tail(path) == 0
    with pytest.raises(InputError, match=f"^{path}:2: invalid JSON"):
        list(json_lines(path))


# ---- attacks: what a hostile or broken input file must not do to a reader -------------------------------------


def _nested(depth: int) -> str:
    return '{"answer": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


def test_a_line_of_200_mb_is_one_bad_line_read_in_bounded_memory_and_the_next_line_is_read(tmp_path):
    path = tmp_path / "huge.jsonl"
    chunk = b"x" * (1 << 20)
    with path.open("wb") as f:  # written a chunk at a time: the test holds no 200 MB value either
        f.write(b'{"a": "')
        for _ in range(200):
            f.write(chunk)
        f.write(b'"}\n{"a": 2}\n')
    size = 200 * len(chunk) + len('{"a": "') + len('"}')
    tracemalloc.start()
    try:
        values = list(json_values(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert values == [
        (1, None, f"a line of {size:,} bytes, over the limit of {MAX_LINE_BYTES:,} (max_line_bytes)"),
        (2, {"a": 2}, None),
    ]
    assert peak < 3 * MAX_LINE_BYTES  # the line's head (`readline` builds it, then copies it) and 1 MB chunks
    with pytest.raises(InputError) as caught:
        list(json_lines(path))
    assert (
        str(caught.value)
        == f"{path}:1: a line of {size:,} bytes, over the limit of {MAX_LINE_BYTES:,} (max_line_bytes)"
    )


def test_a_line_of_exactly_the_limit_is_read_with_or_without_its_line_feed(tmp_path):
    line = b'{"a": "' + b"y" * 56 + b'"}'  # 65 bytes
    path = tmp_path / "edge.jsonl"
    path.write_bytes(line + b"\n" + line + b"z\n" + line)
    assert [(n, reason) for n, _, reason in json_values(path, max_line_bytes=65)] == [
        (1, None),
        (2, "a line of 66 bytes, over the limit of 65 (max_line_bytes)"),
        (3, None),
    ]


def test_nesting_past_the_limit_is_refused_where_it_is_read(tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text("\n".join([_nested(MAX_DEPTH), _nested(MAX_DEPTH + 1), _nested(985), _nested(100_000)]) + "\n")
    values = list(json_values(path))
    assert values[0][1]["answer"] and values[0][2] is None  # exactly the limit is read
    deeper = f"invalid JSON: arrays or objects nested deeper than {MAX_DEPTH}"
    assert [(n, reason) for n, _, reason in values[1:]] == [(2, deeper), (3, deeper), (4, deeper)]


@pytest.mark.parametrize(
    ("number", "reason"),
    [
        ("NaN", "NaN is not a JSON number (write null or a string)"),
        ("Infinity", "Infinity is not a JSON number (write null or a string)"),
        ("-Infinity", "-Infinity is not a JSON number (write null or a string)"),
        ("1e400", "the number '1e400' overflows a float"),
        ("-2.5E+999", "the number '-2.5E+999' overflows a float"),
    ],
)
def test_numbers_that_are_not_finite_are_refused(tmp_path, number, reason):
    path = tmp_path / "nan.jsonl"
    path.write_text(f'{{"question": "q", "answer": 1.5}}\n{{"question": "q", "answer": [{number}]}}\n')
    with pytest.raises(InputError) as caught:
        list(json_lines(path))
    assert str(caught.value) == f"{path}:2: invalid JSON: {reason}"


@pytest.mark.parametrize(
    "value",
    [
        "q" * 18_000_000,
        "a\nb" * 1_000_000,
        list(range(1_000_000)),
        {f"k{i}": ["v" * 1000] * 1000 for i in range(100)},
        [[[[[["deep"] * 50] * 50] * 50]]],
    ],
    ids=["18 MB string", "line feeds", "a million items", "wide dict", "nested lists"],
)
def test_a_quoted_value_is_one_short_line_whatever_its_size(value):
    text = quote(value)
    assert len(text) <= QUOTE_CHARS + len(" (18,000,000 characters)") and "\n" not in text
    assert text.startswith(repr(value)[:3])  # deep levels are elided as [...]
    if isinstance(value, str):
        assert text.endswith(f" ({len(value):,} characters)")
    assert quote("short") == "'short'" and quote(7) == "7" and json.loads(quote([1, 2]).replace("'", '"')) == [1, 2]
