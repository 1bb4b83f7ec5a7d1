"""`jaxseeker bench pages`: build a pages world from a generated JSONL corpus; pages/s, peak RSS, search and visit.

Also runs as `python -m jaxseeker.world.pages_bench --pages 200000`. The generated corpus is
deterministic: page `i` has a made-up name of its own (in its url, title and text, nowhere else), a
kind, ~`words` words drawn from a Zipf-like vocabulary, and links to `links` pages (skewed towards
low ids, so some pages are hubs) plus now and then a link leaving the corpus.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from jaxseeker.argtypes import at_least
from jaxseeker.world.pages_source import SHARD_CHARS, pages_world

_SYLLABLES = [a + b for a in "bdfgklmnprstvz" for b in "aeiou"]  # 70 two-letter syllables
KINDS = ("river", "lake", "town", "castle", "bridge", "valley", "harbour", "island", "tower", "forest")


def page_name(i: int) -> str:
    """The made-up name of page `i`: at least four syllables (eight letters), so no common word equals it."""
    syllables = []
    while True:
        i, r = divmod(i, len(_SYLLABLES))
        syllables.append(_SYLLABLES[r])
        if i == 0 and len(syllables) >= 4:
            break
    return "".join(syllables).capitalize()


def page_url(i: int) -> str:
    """The url of generated page `i`."""
    return f"https://pages.test/wiki/{page_name(i)}"


def _vocabulary(size: int, rng: random.Random) -> list[str]:
    words = {rng.choice(_SYLLABLES) + rng.choice(_SYLLABLES) + rng.choice(["", *_SYLLABLES]) for _ in range(size * 2)}
    return sorted(words)[:size]


def generate_pages_jsonl(
    path: str | Path, pages: int, *, seed: int = 0, words: int = 40, links: int = 4, chunk: int = 10_000
) -> Path:
    """Write `pages` generated pages {url, title, text, links} to `path` (JSONL), `chunk` pages at a time."""
    rng = np.random.default_rng(seed)
    vocab = np.array(_vocabulary(3000, random.Random(seed)))
    zipf = 1.0 / np.arange(1, len(vocab) + 1)  # Zipf-like word frequencies
    p = Path(path)
    with open(p, "w", encoding="utf-8") as f:
        for start in range(0, pages, chunk):
            size = min(chunk, pages - start)
            body = vocab[rng.choice(len(vocab), size=(size, words), p=zipf / zipf.sum())]  # [size, words]
            targets = (pages * rng.random((size, links)) ** 2).astype(np.int64)  # [size, links], skewed to low ids
            for i, row, out in zip(range(start, start + size), body.tolist(), targets.tolist()):
                name, kind = page_name(i), KINDS[i % len(KINDS)]
                urls = [page_url(j) for j in out] + ([f"https://elsewhere.test/{i}"] if i % 10 == 0 else [])
                text = f"{name} is a {kind}. {' '.join(row)}."
                f.write(json.dumps({"url": page_url(i), "title": f"{name} {kind}", "text": text, "links": urls}) + "\n")
    return p


def _rss_mib() -> tuple[float, float]:
    """(current, peak) resident memory of this process in MiB (Linux /proc; peak from getrusage elsewhere)."""
    try:
        status = Path("/proc/self/status").read_text().splitlines()
        kib = {line.split(":")[0]: int(line.split()[1]) for line in status if line.startswith(("VmRSS", "VmHWM"))}
        return kib["VmRSS"] / 1024, kib["VmHWM"] / 1024
    except (OSError, KeyError, ValueError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return peak, peak


def run_pages_bench(pages: int, *, shard_chars: int = SHARD_CHARS, queries: int = 200, seed: int = 0) -> dict[str, Any]:
    """Generate `pages` pages, build their world on disk, then time searches for page names and page reads."""
    import bm25s  # noqa: F401  (imported before the baseline, so the RSS growth below is the build's own)

    with tempfile.TemporaryDirectory(prefix="jaxseeker-pages-bench-") as tmp:
        start = time.perf_counter()
        source = generate_pages_jsonl(Path(tmp) / "pages.jsonl", pages, seed=seed)
        generate_s = time.perf_counter() - start
        rss_before, _ = _rss_mib()
        start, cpu = time.perf_counter(), time.process_time()
        world = pages_world(source, Path(tmp) / "world", shard_chars=shard_chars)
        build_s, build_cpu_s = time.perf_counter() - start, time.process_time() - cpu
        _, peak = _rss_mib()
        rng = random.Random(seed + 1)
        picks = [rng.randrange(pages) for _ in range(queries)]
        search_s, found = [], 0
        for i in picks:
            t = time.perf_counter()
            hits = world.corpus.search(page_name(i), k=5)
            search_s.append(time.perf_counter() - t)
            found += bool(hits) and hits[0].url == page_url(i)
        start = time.perf_counter()
        for i in picks:
            world.page(page_url(i))
        visit_s = (time.perf_counter() - start) / len(picks)
        disk = sum(f.stat().st_size for f in (Path(tmp) / "world").rglob("*") if f.is_file())
        return {
            "pages": pages,
            "links": len(world.relations),
            "shards": len(json.loads((Path(tmp) / "world" / "world.json").read_text())["shards"]),
            "source_mib": source.stat().st_size / 2**20,
            "world_mib": disk / 2**20,
            "generate_s": generate_s,
            "build_s": build_s,
            "build_cpu_s": build_cpu_s,
            "pages_per_s": pages / build_s,
            "pages_per_cpu_s": pages / build_cpu_s,
            "rss_before_build_mib": rss_before,
            "peak_rss_mib": peak,
            "search_ms_median": 1000 * statistics.median(search_s),
            "search_top1": found / len(picks),
            "visit_ms": 1000 * visit_s,
        }


def format_result(r: dict[str, Any]) -> str:
    """The benchmark as a few lines of text."""
    return "\n".join(
        [
            f"pages world: {r['pages']:,} pages, {r['links']:,} links, {r['shards']} BM25 shard(s); "
            f"source {r['source_mib']:.0f} MiB -> world {r['world_mib']:.0f} MiB on disk",
            f"build: {r['build_s']:.1f}s = {r['pages_per_s']:,.0f} pages/s; CPU {r['build_cpu_s']:.1f}s = "
            f"{r['pages_per_cpu_s']:,.0f} pages per CPU-second (corpus generated in {r['generate_s']:.1f}s)",
            f"memory: RSS {r['rss_before_build_mib']:.0f} MiB before the build, peak {r['peak_rss_mib']:.0f} MiB",
            f"search: median {r['search_ms_median']:.1f} ms, the named page first in {r['search_top1']:.0%}; "
            f"visit (read one page): {r['visit_ms']:.2f} ms",
        ]
    )


def _bench(args: argparse.Namespace) -> int:
    result = run_pages_bench(args.pages, shard_chars=args.shard_chars, queries=args.queries, seed=args.seed)
    print(json.dumps(result) if args.json else format_result(result))
    return 0


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pages", type=at_least(1), default=200_000, help="generated pages (default 200000)")
    p.add_argument("--shard-chars", type=at_least(1), default=SHARD_CHARS, help="characters of text per BM25 shard")
    p.add_argument("--queries", type=at_least(1), default=200, help="searches and page reads timed")
    p.add_argument("--seed", type=at_least(0), default=0, help="seed of the generated corpus and the picks")
    p.add_argument("--json", action="store_true", help="print one JSON line")
    p.set_defaults(func=_bench)


def add_bench_parser(bench_subparsers: argparse._SubParsersAction) -> None:
    """Add `bench pages` to the `jaxseeker bench` group."""
    _add_arguments(
        bench_subparsers.add_parser(
            "pages", help="build a pages world from a generated corpus: pages/s, peak RSS, search and visit latency"
        )
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m jaxseeker.world.pages_bench", description=__doc__)
    _add_arguments(parser)
    args = parser.parse_args()
    raise SystemExit(args.func(args))
