"""Building a pages world on disk: scores as one bm25s index, bad lines, the cache, saved directories, threads."""

import argparse
import json
import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from jaxseeker.world import Corpus, build_world, command, load_world, open_world, save_world
from jaxseeker.world.pages_on_disk import PagesWorld
from jaxseeker.world.pages_source import pages_world, write_pages_world
from jaxseeker.world.store import is_world_dir

WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "juliett",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
    "uniform",
]


def write(path, rows):
    path.write_bytes(b"".join((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in rows))
    return path


def even_pages(n, seed=0):
    """`n` pages of exactly six tokens each (a one-word title, five words of text), linked at random."""
    rng = random.Random(seed)
    return [
        {
            "url": f"u/{i}",
            "title": rng.choice(WORDS),
            "text": " ".join(rng.choices(WORDS, k=5)),
            "links": [f"u/{rng.randrange(n)}" for _ in range(2)],
        }
        for i in range(n)
    ]


def test_shards_score_like_one_bm25s_index(tmp_path):
    rows = even_pages(120)
    world = pages_world(write(tmp_path / "p.jsonl", rows), tmp_path / "w", shard_chars=150)  # ~4 pages a shard
    assert len(json.loads((tmp_path / "w" / "world.json").read_text())["shards"]) > 20
    one_index = Corpus(world.pages)  # bm25s over the same pages, in memory
    for query in ["alpha", "bravo tango", "kilo kilo lima", "uniform papa echo golf"]:
        sharded = {h.url: h.score for h in world.corpus.search(query, k=len(rows))}
        whole = {h.url: h.score for h in one_index.search(query, k=len(rows))}
        assert sharded.keys() == whole.keys() and len(whole) > 5
        assert all(sharded[u] == pytest.approx(whole[u], rel=1e-5) for u in whole)


BAD = [
    (b"{not json", "invalid JSON"),
    (b'{"url": "u/z", "text": "t"}', "missing key 'title'"),
    (json.dumps({"url": "u/a", "title": "again", "text": "t"}).encode(), "duplicate url 'u/a'"),
    (b'{"url": "u/\xff", "title": "z", "text": "t"}', "not UTF-8"),
]
GOOD = [
    {"url": "u/a", "title": "Alpha river", "text": "The Alpha river flows north.", "links": ["u/c", "x/y"]},
    {"url": "u/b", "title": "Beta lake", "text": "Beta lake is fed by the Alpha river.", "links": ["u/a"]},
    {"url": "u/c", "title": "Gamma peak", "text": "Gamma peak overlooks Beta lake.", "links": ["u/a"]},
]


def test_bad_lines_fail_the_build_naming_file_and_line(tmp_path):
    path = write(tmp_path / "p.jsonl", [GOOD[0], BAD[2][0], GOOD[1]])
    with pytest.raises(ValueError, match=r"p.jsonl:2: duplicate url 'u/a' \(build with skip_bad_lines=True"):
        pages_world(path)
    with pytest.raises(ValueError, match=r"p.jsonl:2: duplicate url"):
        build_world("pages", path=path, cache_dir=tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []  # the half-built world is gone


def test_bad_lines_are_skipped_and_counted(tmp_path):
    rows = [GOOD[0], BAD[0][0], b"", BAD[1][0], GOOD[1], BAD[2][0], BAD[3][0], GOOD[2]]
    path = write(tmp_path / "p.jsonl", rows)
    world = build_world("pages", path=path, cache_dir=tmp_path / "cache", skip_bad_lines=True)
    assert len(world) == 3 and world.info["bad_lines"] == 4
    for example, (line, (_, reason)) in zip(world.info["bad_line_examples"], zip((2, 4, 6, 7), BAD)):
        assert example.startswith(f"{path}:{line}: {reason}")
    a, c = world.entity_at("u/a").id, world.entity_at("u/c").id
    assert world.targets(a, "links_to") == (c,) and world.page("u/a").links == ("u/c", "x/y")
    assert world.corpus.search("gamma", k=1)[0].url == "u/c"


def test_cache_saved_directories_and_the_cli(tmp_path, capsys):
    path = write(tmp_path / "p.jsonl", GOOD)
    world = build_world("pages", path=path, cache_dir=tmp_path / "cache")
    assert isinstance(world, PagesWorld) and world.info["key"] == world.directory.name
    (world.directory / "marker").write_text("")  # a second build must reuse this directory
    assert open_world(f"pages:{path}", cache_dir=tmp_path / "cache").directory == world.directory
    save_world(world, tmp_path / "saved")
    assert is_world_dir(tmp_path / "saved")
    again = load_world(tmp_path / "saved")
    assert isinstance(again, PagesWorld) and list(again.pages) == list(world.pages)
    with pytest.raises(FileExistsError, match="not empty"):
        write_pages_world(path, tmp_path / "saved")
    parser = argparse.ArgumentParser()
    command.add_parser(parser.add_subparsers())
    for argv in (
        ["world", "build", "--source", "pages", "--pages", str(path), "--out", str(tmp_path / "cli")],
        ["world", "info", str(tmp_path / "cli"), "--search", "beta lake"],
    ):
        args = parser.parse_args(argv)
        assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "3 entities, 3 relations, 3 pages" in out and "u/b" in out


def test_an_empty_corpus_makes_an_empty_world(tmp_path):
    world = pages_world(write(tmp_path / "p.jsonl", [b"", b"  "]))
    assert len(world) == 0 and list(world.entities) == [] and len(world.relations) == 0
    assert world.corpus.search("anything", k=3) == [] and world.page("u/a") is None


def test_threads_share_a_world(tmp_path):
    rows = even_pages(300, seed=3)
    world = pages_world(write(tmp_path / "p.jsonl", rows), shard_chars=2_000)
    queries = [f"{a} {b}" for a, b in zip(WORDS, reversed(WORDS))] * 5
    alone = [
        (world.corpus.search(q, 5), world.page(f"u/{i}"), world.entity(world.id_at(i))) for i, q in enumerate(queries)
    ]
    with ThreadPoolExecutor(8) as pool:
        together = list(
            pool.map(
                lambda iq: (world.corpus.search(iq[1], 5), world.page(f"u/{iq[0]}"), world.entity(world.id_at(iq[0]))),
                enumerate(queries),
            )
        )
    assert together == alone


def test_subgraph_keeps_the_pages_and_the_links_among_them(tmp_path):
    world = pages_world(write(tmp_path / "p.jsonl", GOOD))
    a, b, c = (world.entity_at(u).id for u in ("u/a", "u/b", "u/c"))
    small = world.subgraph([a, b])
    assert sorted(small.entities) == [a, b] and [(r.src, r.dst) for r in small.relations] == [(b, a)]
    assert small.page("u/a").text == GOOD[0]["text"]
