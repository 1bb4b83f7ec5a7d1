"""The pages source: a user's JSONL becomes a link graph with a search index; bad lines name FILE:LINE."""

import json

import pytest

from jaxseeker.world import build_world, pages_world, read_pages_jsonl

PAGES = [
    {"url": "u/a", "title": "Alpha river", "text": "The Alpha river flows north.", "links": ["u/b", "ext/x"]},
    {"url": "u/b", "title": "Beta lake", "text": "Beta lake is fed by the Alpha river.", "links": ["u/a"]},
    {"url": "u/c", "title": "Gamma peak", "text": "Gamma peak overlooks Beta lake.", "links": ["u/b", "u/b"]},
]


def write(path, rows):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_link_graph_and_search(tmp_path):
    w = pages_world(write(tmp_path / "p.jsonl", PAGES))
    a, b, c = (w.entity_at(u).id for u in ("u/a", "u/b", "u/c"))
    assert w.targets(a, "links_to") == (b,)  # the external link makes no edge
    assert sorted(w.sources(b, "links_to")) == sorted([a, c])
    assert w.page("u/a").links == ("u/b", "ext/x")
    assert w.page("u/c").links == ("u/b",)
    assert w.corpus.search("Gamma peak", k=1)[0].url == "u/c"


@pytest.mark.parametrize(
    "bad, message",
    [
        ("{not json", r"p.jsonl:2: invalid JSON"),
        ('["a list"]', r"p.jsonl:2: expected a JSON object"),
        ('{"url": "u/z", "text": "t"}', r"p.jsonl:2: missing key 'title'"),
        ('{"url": "u/z", "title": 3, "text": "t"}', r"p.jsonl:2: key 'title' must be a string"),
        ('{"url": "u/z", "title": "z", "text": "t", "links": "u/a"}', r"p.jsonl:2: key 'links' must be a list"),
        ('{"url": "u/a", "title": "again", "text": "t"}', r"p.jsonl:2: duplicate url 'u/a'"),
    ],
)
def test_malformed_line_names_file_and_line(tmp_path, bad, message):
    path = write(tmp_path / "p.jsonl", [PAGES[0], bad, PAGES[1]])
    with pytest.raises(ValueError, match=message):
        pages_world(path)


def test_streaming_reader_yields_before_the_bad_line(tmp_path):
    pages = read_pages_jsonl(write(tmp_path / "p.jsonl", [PAGES[0], "", PAGES[1], "oops"]))
    assert next(pages).url == "u/a" and next(pages).url == "u/b"
    with pytest.raises(ValueError, match=r"p.jsonl:4:"):
        next(pages)


def test_cached_build_follows_the_file(tmp_path):
    path = write(tmp_path / "p.jsonl", PAGES)
    assert len(build_world("pages", path=path, cache_dir=tmp_path / "cache")) == 3
    write(path, PAGES[:2])
    assert len(build_world("pages", path=path, cache_dir=tmp_path / "cache")) == 2
