"""`jaxseeker bench pages` at a tiny size: it builds the world, and its table and JSON report every figure (the
timings are the machine's; the counts are the corpus's)."""

import json

from jaxseeker.cli import main
from jaxseeker.world.pages_bench import generate_pages_jsonl, page_url

PAGES, QUERIES = 300, 5
ARGV = ["bench", "pages", "--pages", str(PAGES), "--queries", str(QUERIES)]


def test_bench_pages_reports_the_built_worlds_counts_and_every_timing(tmp_path, capsys):
    assert main([*ARGV, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    index = {page_url(i): i for i in range(PAGES)}
    links = set()  # what the build keeps: each link between two pages of the corpus once, none to the page itself
    for line in generate_pages_jsonl(tmp_path / "pages.jsonl", PAGES, seed=0).read_text().splitlines():
        row = json.loads(line)
        links |= {(row["url"], url) for url in row["links"] if url in index and url != row["url"]}
    assert (result["pages"], result["links"], result["shards"]) == (PAGES, len(links), 1)
    assert result["search_top1"] == 1.0  # every page's made-up name finds it first
    timings = (
        "generate_s",
        "build_s",
        "build_cpu_s",
        "pages_per_s",
        "pages_per_cpu_s",
        "search_ms_median",
        "visit_ms",
        "source_mib",
        "world_mib",
        "rss_before_build_mib",
        "peak_rss_mib",
    )
    assert sorted(result) == sorted(["pages", "links", "shards", "search_top1", *timings])
    assert all(result[key] > 0 for key in timings)

    assert main(ARGV) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["pages world", "build", "memory", "search"]
    assert lines[0].startswith(f"pages world: {PAGES} pages, {len(links):,} links, 1 BM25 shard(s); ")
    assert "the named page first in 100%" in lines[3]
