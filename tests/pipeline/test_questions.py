"""The pipeline's question files: JSONL read back whole, whatever characters the world's text holds."""

import json

from jaxseeker.pipeline.questions import read_jsonl


def test_a_line_separator_inside_a_question_does_not_end_its_line(tmp_path):
    rows = [{"question": "Which town lies on the Pirn\u2028river?", "answer": "Velmora\u0085"}, {"question": "b"}]
    path = tmp_path / "test.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows) + "\n", encoding="utf-8")
    assert read_jsonl(path) == rows
