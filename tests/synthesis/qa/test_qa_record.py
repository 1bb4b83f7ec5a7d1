"""QA records as JSONL: round trip, and a bad line named by FILE:LINE."""

import pytest

from jaxseeker.synthesis.qa import QARecord, read_jsonl, write_jsonl


def test_round_trip(tmp_path):
    records = [
        QARecord("Which city?", "Varo", "sailorfog", 3, {"hops": 2, "urls": ["u"]}),
        QARecord("Wie viele?", "3", "crawlqa", 1, {}),
    ]
    assert write_jsonl(records, tmp_path / "qa.jsonl") == 2
    assert list(read_jsonl(tmp_path / "qa.jsonl")) == records


def test_bad_line_names_file_and_line(tmp_path):
    path = tmp_path / "qa.jsonl"
    path.write_text('{"question": "q", "answer": "a", "tag": "t", "level": 1, "meta": {}}\n{"question": "q"}\n')
    with pytest.raises(ValueError, match=r"qa.jsonl:2: bad QA record"):
        list(read_jsonl(path))
    path.write_text("not json\n")
    with pytest.raises(ValueError, match=r"qa.jsonl:1: invalid JSON"):
        list(read_jsonl(path))
