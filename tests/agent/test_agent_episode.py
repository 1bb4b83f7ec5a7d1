"""Episode records: JSON round trip, JSONL files, and errors that name the file and line."""

import json

import pytest

from jaxseeker.agent import Episode, Submission, ToolCallRecord, read_episodes, read_questions, write_episodes
from jaxseeker.errors import InputError


def make_episode(**overrides):
    values = {
        "question": "Who founded Velmora?",
        "messages": [
            {"role": "user", "content": "Who founded Velmora?"},
            {"role": "assistant", "content": "<answer>Ida Konst</answer>"},
        ],
        "token_ids": [5, 6, 7, 8],
        "loss_mask": [0, 0, 1, 1],
        "logprobs": [0.0, 0.0, -0.5, -0.25],
        "termination": "answer",
        "prediction": "Ida Konst",
        "answer": "Ida Konst",
        "tool_calls": [ToolCallRecord(1, "search", {"query": ["Velmora"]}, None, 0.01)],
        "submissions": [Submission("Ida", "Incorrect! The F1 score is 0.67.")],
        "turns": 2,
        "group": 3,
        "sample": 1,
        "timings": {"wall_s": 1.5},
        "meta": {"id": "q7"},
    }
    return Episode(**{**values, **overrides})


def test_json_round_trip_through_a_jsonl_file(tmp_path):
    episodes = [make_episode(), make_episode(termination="timeout", prediction=None, sample=2)]
    path = tmp_path / "episodes.jsonl"
    assert write_episodes(path, episodes) == 2
    assert read_episodes(path) == episodes
    line = json.loads(path.read_text().splitlines()[0])
    assert line["messages"][1]["content"] == "<answer>Ida Konst</answer>"  # readable as an SFT record
    assert episodes[0].num_sampled == 2


def test_bad_records_are_errors_naming_what_is_wrong(tmp_path):
    with pytest.raises(ValueError, match="termination: 'gave_up' is not one of"):
        make_episode(termination="gave_up")
    with pytest.raises(ValueError, match="must have the same length"):
        make_episode(logprobs=[0.0])
    path = tmp_path / "episodes.jsonl"
    good = json.dumps(make_episode().to_json())
    path.write_text(good + "\n" + json.dumps({**make_episode().to_json(), "colour": 1}) + "\n")
    with pytest.raises(ValueError, match=r"episodes.jsonl:2: episode: unknown key\(s\) \['colour'\]"):
        read_episodes(path)


def test_questions_file(tmp_path):
    path = tmp_path / "questions.jsonl"
    path.write_text('{"question": "Q1?", "answer": "A1", "id": 1}\n\n{"question": "Q2?", "answer": ["x", "y"]}\n')
    first, second = read_questions(path)
    assert (first.question, first.answer, first.meta) == ("Q1?", "A1", {"id": 1})
    assert second.answer == '["x", "y"]'
    path.write_text('{"question": "Q1?"}\n{"text": "no question"}\n')
    with pytest.raises(ValueError, match=r"questions.jsonl:2: 'question' must be a non-empty string"):
        read_questions(path)
    path.write_text('{"question": "Q1?"}\n[1, 2]\n')  # an InputError: commands print it in one line
    with pytest.raises(InputError, match=r"questions.jsonl:2: expected a string or an object with a 'question'"):
        read_questions(path)
