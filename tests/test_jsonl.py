"""`jaxseeker.jsonl`: an append-only JSONL file a killed writer left with an unfinished last line is mended."""

import pytest

from jaxseeker.errors import InputError
from jaxseeker.jsonl import drop_torn_tail, json_lines


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
