"""A pages world of 20,000 generated pages built on disk: search finds a page by its name, visit reads it,
links resolve both ways, synthesisers run on it, and the build's peak memory barely grows with the corpus."""

import json
import tracemalloc

import pytest
from cli_support import usage_error

from jaxseeker.synthesis.qa.recipes import get_recipe
from jaxseeker.tools import ToolsConfig, build_registry
from jaxseeker.world import pages_links
from jaxseeker.world.pages_bench import generate_pages_jsonl, page_name, page_url
from jaxseeker.world.pages_on_disk import open_pages_world
from jaxseeker.world.pages_source import pages_world
from jaxseeker.world.query import Query

PAGES = 20_000
SHARD_CHARS = 400_000  # ~1,000 generated pages a BM25 shard


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(a world of 20k generated pages, its JSONL)."""
    tmp = tmp_path_factory.mktemp("pages")
    source = generate_pages_jsonl(tmp / "pages.jsonl", PAGES, seed=0)
    return pages_world(source, tmp / "world", shard_chars=SHARD_CHARS), source


def traced_peak(path, directory):
    """The peak of Python-side memory (tracemalloc: objects and numpy buffers) while building `path`."""
    tracemalloc.start()
    try:
        pages_world(path, directory, shard_chars=200_000)  # ~600 pages a shard
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_peak_memory_grows_far_less_than_the_corpus(tmp_path, monkeypatch):
    pages_world(generate_pages_jsonl(tmp_path / "warm.jsonl", 50), tmp_path / "warm")  # imports outside the trace
    # the link passes work in batches of pages and chunks of edges; smaller ones than the defaults (4096 pages,
    # 1M edges) fill up in these small corpora, as the defaults do in large ones
    monkeypatch.setattr(pages_links, "PAGES_PER_BATCH", 256)
    monkeypatch.setattr(pages_links, "EDGES_PER_CHUNK", 4096)
    n = 1_500  # 3 and 10 BM25 shards; tracing makes a build 4x slower, so these corpora are small
    small = traced_peak(generate_pages_jsonl(tmp_path / "small.jsonl", n, seed=1), tmp_path / "small")
    big = traced_peak(generate_pages_jsonl(tmp_path / "big.jsonl", 4 * n, seed=2), tmp_path / "big")
    print(
        f"peak traced memory: {small / 2**20:.1f} MiB for {n} pages, {big / 2**20:.1f} MiB for {4 * n} pages "
        f"({big / small:.2f}x for 4x the pages)"
    )
    assert big / small < 1.3  # an in-memory build grows about 4x


def test_search_finds_each_page_by_its_name(built):
    world = built[0]
    for i in range(0, PAGES, 997):
        hits = world.corpus.search(page_name(i), k=3)
        assert hits[0].url == page_url(i) and hits[0].title.startswith(page_name(i))
        assert hits[0].snippet.startswith(f"{page_name(i)} is a")
    assert world.corpus.search("the of and", k=3) == []  # stopwords only


def test_search_and_visit_tools_read_the_world_from_disk(built):
    world = built[0]
    registry = build_registry(ToolsConfig(enabled=("search", "visit")), corpus=world.corpus)
    name = page_name(12345)
    assert page_url(12345) in registry.call("search", {"query": [name]}).text
    page = world.page(page_url(12345))
    seen = registry.call("visit", {"url": [page_url(12345)], "goal": f"what is {name}"}).text
    assert page.text.split(".")[0] in seen  # "NAME is a KIND"
    assert f"Links on this page:\n- {world.page(page.links[0]).title}: {page.links[0]}" in seen


def test_links_resolve_in_both_directions(built):
    world, source = built[0], built[1]
    ids = {page_url(i): world.id_at(i) for i in range(PAGES)}
    expected = set()
    with open(source) as f:
        for i, line in enumerate(f):
            row = json.loads(line)
            if i % 10 == 0:  # the page keeps its links, those leaving the corpus too
                assert world.page(row["url"]).links == tuple(dict.fromkeys(row["links"]))
            expected |= {(ids[row["url"]], ids[u]) for u in row["links"] if u in ids and u != row["url"]}
    assert {(r.src, r.dst) for r in world.relations} == expected
    assert world.relation_types() == ["links_to"] and world.types() == ["page"]
    hub = world.id_at(0)  # links are skewed towards low ids
    assert world.sources(hub, "links_to") == tuple(sorted(s for s, t in expected if t == hub))
    assert world.degree(hub) == len(world.neighbours(hub)) > 10
    src, dst = next(iter(expected))
    assert world.has_edge(src, "links_to", dst) and world.entity_at(world.url(dst)).id == dst


def test_open_reads_no_page_text(built):
    world = built[0]
    tracemalloc.start()
    try:
        reopened = open_pages_world(world.directory)
        assert len(reopened) == PAGES and reopened.entity(reopened.id_at(7)).name.startswith(page_name(7))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 * 2**20  # the texts alone are several MiB


@pytest.mark.parametrize("recipe", ["crawlqa", "openseeker"])
def test_synthesisers_run_on_a_pages_world(built, recipe):
    world = built[0]
    result = get_recipe(recipe)(world, 3, seed=0)
    assert len(result.records) == 3
    for record in result.records:  # the constraints, checked against the links on disk, single out the answer
        q = Query.from_json(record.meta["query"])
        found = world.match(q)
        assert str(len(found)) == record.answer if q.count else found == [record.meta["answer_id"]]
        assert all(world.page(u) is not None for u in record.meta["urls"])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--pages", "0"], "--pages: must be an integer >= 1, got 0"),
        (["--shard-chars", "0"], "--shard-chars: must be an integer >= 1, got 0"),
        (["--queries", "0"], "--queries: must be an integer >= 1, got 0"),
        (["--seed", "-1"], "--seed: must be an integer >= 0, got -1"),
        (["--pages", "1e5"], "--pages: must be an integer >= 1, got '1e5'"),
    ],
)
def test_bench_pages_flags_out_of_range_are_usage_errors(argv, message, capsys):
    assert usage_error(["bench", "pages", *argv], capsys) == f"jaxseeker bench pages: error: argument {message}"
