"""Results JSONL, the markdown summary and the PNG plots, from the shared hand-built rollouts."""

import json

import pytest
from matplotlib.image import imread

from jaxseeker import eval as ev
from jaxseeker.eval.report import REPORT_FILES

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_results_round_trip(tmp_path, judged_rollouts):
    path = ev.write_results(judged_rollouts, tmp_path / "out" / "results.jsonl")
    assert ev.read_results(path) == judged_rollouts
    assert not list(path.parent.glob("*.partial"))


def test_results_with_unicode_line_separators_round_trip(tmp_path, judged_rollouts):
    judged_rollouts[0]["prediction"] = "one\u2028two\x85three"  # written unescaped (ensure_ascii=False)
    path = ev.write_results(judged_rollouts, tmp_path / "results.jsonl")
    assert ev.read_results(path) == judged_rollouts


def test_read_results_names_the_bad_line(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text('{"question_id": "A"}\n\n{"question_id": \n', encoding="utf-8")
    with pytest.raises(ev.LoadError, match=r"results\.jsonl:3: invalid JSON"):
        ev.read_results(path)


def test_read_results_reads_like_the_question_loader(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"question_id": "A"}\n')  # a BOM is dropped
    assert ev.read_results(path) == [{"question_id": "A"}]
    path.write_bytes(b'{"question_id": "A"}\n{"prediction": "caf\xe9"}\n')
    with pytest.raises(ev.LoadError, match=r"results\.jsonl:2: not UTF-8: byte 0xe9 at byte 20 of the line"):
        ev.read_results(path)
    with pytest.raises(ev.LoadError, match=r"missing\.jsonl: cannot read"):
        ev.read_results(tmp_path / "missing.jsonl")


def test_summary_table_rows(judged_rollouts):
    table = ev.summary_table(ev.summarize(judged_rollouts, k=2))
    assert table.startswith("## Evaluation: k=2, 4 questions, 8 rollouts\n")
    assert "| group | questions | pass@1 | pass@2 | avg@2 | cons@2 | best pass@1 | invalid | judge failures |" in table
    assert "| all | 4 | 50.0% | 75.0% | 50.0% | 25.0% | 75.0% | 25.0% | 1 (12.5%) |" in table
    assert "| level 1 | 2 | 50.0% | 100.0% | 50.0% | 0.0% | 100.0% | 25.0% | 1 (25.0%) |" in table
    assert "| tag sailor | 2 | 25.0% | 50.0% | 25.0% | 0.0% | 50.0% | 25.0% | 1 (25.0%) |" in table
    assert (
        "| group | search | visit | python | tools total | evidence | answer len | think len | termination |" in table
    )
    behaviour = (
        "| all | 1.38 | 0.75 | 0.38 | 2.50 | – | 6.6 | 140.0 | answer 75.0% · max_turns 12.5% · context_limit 12.5% |"
    )
    assert behaviour in table


def test_summary_table_shows_evidence_where_measured(make_rollout):
    records = [
        make_rollout("x", 0, True, (1, 1, 0), evidence=1.0),
        make_rollout("y", 0, False, (1, 0, 0), evidence=0.0),
    ]
    assert "| all | 1.00 | 0.50 | 0.00 | 1.50 | 50.0% | 0.0 | 0.0 | answer 100.0% |" in ev.summary_table(
        ev.summarize(records, 1)
    )


def test_write_report_writes_every_file(tmp_path, judged_rollouts):
    summary = ev.write_report(judged_rollouts, 2, tmp_path / "eval")
    assert sorted(p.name for p in (tmp_path / "eval").iterdir()) == sorted(REPORT_FILES)
    assert json.loads((tmp_path / "eval" / "summary.json").read_text()) == json.loads(json.dumps(summary))
    assert (tmp_path / "eval" / "summary.md").read_text() == ev.summary_table(summary)
    assert len(ev.read_results(tmp_path / "eval" / "results.jsonl")) == 9
    for name in REPORT_FILES:
        if name.endswith(".png"):
            path = tmp_path / "eval" / name
            assert path.read_bytes()[:8] == PNG_MAGIC
            height, width, _ = imread(path).shape
            assert height > 100 and width > 300


def test_compare_question_sets_pools_distinct_questions(tmp_path, make_rollout):
    def results(name, verdicts):
        rows = [
            make_rollout(q, r, c, (1, 0, 0), level=level)
            for q, (level, cs) in verdicts.items()
            for r, c in enumerate(cs)
        ]
        return ev.write_results(rows, tmp_path / f"{name}.jsonl")

    test = (
        results("test_sft", {"t1": (1, [False, False]), "t2": (2, [True, False])}),
        results("test_rl", {"t1": (1, [True, True]), "t2": (2, [True, False])}),
    )
    fresh = (
        results("fresh_sft", {"f1": (1, [False, True]), "f2": (2, [True, True]), "f3": (2, [False, False])}),
        results("fresh_rl", {"f1": (1, [False, False]), "f2": (2, [True, True]), "f3": (2, [True, False])}),
    )
    change = ev.compare_question_sets([test, fresh], k=2)
    assert change["questions"] == 5 and (change["gained"], change["lost"]) == (2, 1)  # t1, f3 gained; f1 lost
    assert change["delta_pass_at_1"] == pytest.approx((1.0 + 0.0 - 0.5 + 0.0 + 0.5) / 5)
    assert {lvl: c["questions"] for lvl, c in change["by_level"].items()} == {"1": 2, "2": 3}
    assert change["by_level"]["1"]["delta_pass_at_1"] == pytest.approx((1.0 - 0.5) / 2)
    one = ev.compare_question_sets([test], k=2)
    assert {k: one[k] for k in ("gained", "lost", "delta_pass_at_1")} == {
        k: ev.compare_results(*test, k=2)[k] for k in ("gained", "lost", "delta_pass_at_1")
    }
    with pytest.raises(ValueError, match="test_sft.jsonl holds 2 questions of an earlier set"):
        ev.compare_question_sets([test, test], k=2)
    with pytest.raises(ValueError, match="test_sft.jsonl and .*fresh_rl.jsonl hold different questions"):
        ev.compare_question_sets([(test[0], fresh[1])], k=2)
