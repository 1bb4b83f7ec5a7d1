"""Statistics, the summary text and the PNG plots."""

from jaxseeker.synthesis.qa import compute_stats, plot_stats, reference_solver, summary
from jaxseeker.synthesis.qa.record import QARecord


def rec(level, hops, obf, answer="A", tag="t"):
    return QARecord("Q?", answer, tag, level, {"hops": hops, "shape": "chain", "obfuscations": obf})


def test_counts_and_summary():
    records = [rec(1, 1, []), rec(3, 2, ["date", "name"]), rec(3, 3, ["date"])]
    s = compute_stats(records)
    assert s.n == 3 and s.by_level == {1: 1, 3: 2} and s.by_hops == {1: 1, 2: 1, 3: 1}
    assert s.obfuscations == {"date": 2, "name": 1} and s.solver_pass == {}
    text = summary(s, attempts=5, dropped={"not_unique": 2})
    assert "3 questions" in text and "5 drafts tried" in text and "not_unique: 2" in text
    assert "level: 1: 1, 3: 2" in text


def test_solver_pass_rate_per_level():
    records = [rec(1, 1, [], answer="yes"), rec(2, 2, [], answer="no"), rec(2, 2, [], answer="yes")]
    s = compute_stats(records, solver=lambda task: "Yes")
    assert s.solver_pass == {1: 1.0, 2: 0.5}
    assert "1: 100%, 2: 50%" in summary(s)


def test_reference_solver_reads_the_named_entities_their_links_and_its_search_hits(world):
    """The reference solver reads the named entities, the pages its search for the question finds, and one link
    further: a work two links from the only name is out of its reach, unless the question's words find the page in
    between."""
    from jaxseeker.world import Edge, Is, Query, Var

    city = next(
        c
        for c in world.ids_of_type("city")
        if len([w for p in world.sources(c, "born_in") for w in world.sources(p, "created_by")]) == 1
    )
    ((work, person),) = [(w, p) for p in world.sources(city, "born_in") for w in world.sources(p, "created_by")]
    name = world.entity
    one_hop = Query((Var("city"), Var("person", (Is(person),))), (Edge(1, "born_in", 0),))
    two_hops = Query(
        (Var("work"), Var("person"), Var("city", (Is(city),))), (Edge(0, "created_by", 1), Edge(1, "born_in", 2))
    )

    def record(question, q, answer, level):
        return QARecord(question, name(answer).name, "t", level, {"query": q.to_json(), "hops": level})

    records = [
        record("Where was this person born?", one_hop, city, 1),
        record("Which work?", two_hops, work, 2),  # nothing in the text finds the person in between
        record(f"Which work by {name(person).name}?", two_hops, work, 2),
    ]
    assert [world.match(r_q) for r_q in (one_hop, two_hops)] == [[city], [work]]
    s = compute_stats(records, solver=reference_solver(world))
    assert s.solver_pass == {1: 1.0, 2: 0.5}


def test_plots_are_png_files(tmp_path):
    s = compute_stats([rec(1, 1, ["date"]), rec(2, 2, [])], solver=lambda task: "A")
    paths = plot_stats(s, tmp_path / "plots", prefix="demo")
    names = ["demo_levels.png", "demo_obfuscations.png", "demo_hops.png", "demo_solver_pass.png"]
    assert [p.name for p in paths] == names
    for p in paths:
        data = p.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000


def test_questions_without_a_structured_query_count_no_hops_or_shape(tmp_path):
    """An LLM explorer's questions (`synth webexplorer --explorer openai`) have no hops or shape: none is made up."""
    free = QARecord("Which river?", "Ostra", "webexplorer", 2, {"obfuscations": ["blur"]})
    s = compute_stats([free, rec(1, 1, [])])
    assert (s.by_hops, s.by_shape) == ({1: 1}, {"chain": 1})
    s = compute_stats([free])
    assert (s.by_hops, s.by_shape) == ({}, {})
    assert "  hops: -\n  shape: -\n" in summary(s)
    assert [p.name for p in plot_stats(s, tmp_path)] == ["qa_levels.png", "qa_obfuscations.png"]
