"""Style figures of a questions file, and `jaxseeker synth stats FILE` that prints them."""

import json

import pytest

from jaxseeker.cli import main
from jaxseeker.synthesis.qa import QARecord, RuleSolver, style_figures, style_summary, write_jsonl
from jaxseeker.synthesis.qa.style import has_placeholder, opening
from jaxseeker.world import Edge, Entity, Is, Query, Relation, Var, World

QUESTIONS = [
    "Which country contains Sanming, contains a city X that has a name starting with “J”?",  # placeholder
    "Which city has a population of 327,167,434?",  # exact number
    "Which city lies in the subdivision X?",  # placeholder
    "Born in the 1960s, which player played for Y?",  # placeholder
    "Name the airport that serves Flying V Ranch Airport (Louise) in the 20th century.",  # a name, an ordinal
    "In what year was Ada Fenwick born?",
]


def rec(question: str, meta: dict | None = None, answer: str = "A") -> QARecord:
    return QARecord(question, answer, "t", 1, meta or {})


def test_openings_placeholders_exact_numbers_and_median_words():
    f = style_figures([rec(q) for q in QUESTIONS])
    assert (f.n, f.openings, f.placeholder, f.exact_number) == (6, 5, 3, 1)
    assert f.median_words == 8 and f.top_openings[0] == ("which city", 2)
    assert f.solver_pass is None and f.unique is None
    text = style_summary(f)
    assert "distinct two-word openings: 5 (most common: “which city” 2" in text
    assert "placeholder letters: 3 of 6 (50%)" in text and "an exact number of 3+ digits: 1 of 6 (17%)" in text


@pytest.mark.parametrize(
    "text, opened", [("“Born in” Varo, who?", "born in"), ("Which city?", "which city"), ("Name.", "name")]
)
def test_opening_is_two_bare_lower_case_words(text, opened):
    assert opening(text) == opened


def test_a_lone_letter_after_a_name_is_part_of_the_name():
    assert not has_placeholder("a film about Malcolm X.") and has_placeholder("and includes X among its cities")


def test_with_a_world_uniqueness_and_the_solver_pass_rate():
    w = World(
        [Entity("p", "person", "Ada Fenwick"), Entity("q", "person", "Bram Osk"), Entity("c", "city", "Varo")],
        [Relation("p", "born_in", "c"), Relation("q", "born_in", "c")],
    )
    one = Query((Var("city"), Var("person", (Is("p"),))), (Edge(1, "born_in", 0),))
    two = Query((Var("person"), Var("city", (Is("c"),))), (Edge(0, "born_in", 1),))  # Ada and Bram: not unique
    records = [
        rec("Where was Ada born?", {"query": one.to_json(), "answer_id": "c"}, "Varo"),
        rec("Who was born in Varo?", {"query": two.to_json(), "answer_id": "p"}, "Ada Fenwick"),
        rec("A question with no query."),
    ]
    f = style_figures(records, w, RuleSolver(w, memory_share=1.0))
    # the solver knows everything: it answers Varo, then the more linked (or later) of Ada and Bram
    assert (f.with_query, f.unique) == (2, 0.5) and f.solver_pass == 0.5
    assert "unique under their structured query: 50% of 2" in style_summary(f)


def test_synth_stats_prints_the_figures_of_a_file(tmp_path, capsys):
    path = tmp_path / "q.jsonl"
    write_jsonl(
        [QARecord(q, "A", "sailorfog", 3, {"hops": 2, "shape": "chain", "obfuscations": ["date"]}) for q in QUESTIONS],
        path,
    )
    assert main(["synth", "stats", str(path)]) == 0
    out = capsys.readouterr().out
    assert "6 questions (sailorfog: 6)" in out and "level: 3: 6" in out
    assert "distinct two-word openings: 5" in out and "placeholder letters: 3 of 6 (50%)" in out
    assert "median 8 words" in out and "reference solver" not in out


def test_synth_stats_with_the_world_of_a_recipe(tmp_path, capsys):
    common = ["--world", "synthetic:300:5", "--cache-dir", str(tmp_path / "cache")]
    assert main(["synth", "crawlqa", *common, "--n", "4", "--out", str(tmp_path / "q.jsonl"), "--no-solver"]) == 0
    capsys.readouterr()
    assert main(["synth", "stats", str(tmp_path / "q.jsonl"), *common]) == 0
    out = capsys.readouterr().out
    assert "unique under their structured query: 100% of 4" in out and "reference solver pass rate:" in out


def test_synth_stats_refuses_an_empty_or_bad_file_in_one_line(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(SystemExit, match=r"^jaxseeker synth: .*empty.jsonl: no questions$"):
        main(["synth", "stats", str(tmp_path / "empty.jsonl")])
    (tmp_path / "bad.jsonl").write_text(json.dumps({"question": "q"}) + "\n")
    with pytest.raises(SystemExit, match=r"bad.jsonl:1: bad QA record"):
        main(["synth", "stats", str(tmp_path / "bad.jsonl")])
