"""`jaxseeker world build …` and `jaxseeker world info …`."""

from __future__ import annotations

import argparse
import collections
import time

from jaxseeker.argtypes import at_least
from jaxseeker.cli_args import WORLD_HELP, world_spec
from jaxseeker.world.build import SOURCES, build_world, open_world
from jaxseeker.world.graph import World
from jaxseeker.world.store import check_output, save_world
from jaxseeker.world.synthetic import MIN_SIZE


def describe(world: World) -> str:
    """A few lines: source, counts of entities per type and relations per type, pages."""
    types = collections.Counter(e.type for e in world.entities.values())
    rels = collections.Counter(r.rel for r in world.relations)
    lines = [
        f"world {world.info.get('source', '?')}: {len(world.entities)} entities, "
        f"{len(world.relations)} relations, {len(world.pages)} pages",
        "  entities: " + ", ".join(f"{t} {n}" for t, n in sorted(types.items())),
        "  relations: " + ", ".join(f"{r} {n}" for r, n in sorted(rels.items())),
    ]
    return "\n".join(lines)


def _build(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    if args.out is not None:
        check_output(args.out, "--out", directory=True)
    countries = args.countries.split(",") if args.countries else None
    world = build_world(
        args.source,
        size=args.size,
        seed=args.seed,
        path=args.pages,
        countries=countries,
        cache_dir=args.cache_dir,
        use_cache=args.out is None,
        skip_bad_lines=args.skip_bad_lines,
    )
    if args.out is not None:
        save_world(world, args.out)
    print(describe(world))
    where = args.out if args.out is not None else f"cache ({world.info.get('key', '')})"
    print(f"saved to {where} in {time.perf_counter() - start:.1f}s")
    return 0


def _info(args: argparse.Namespace) -> int:
    world = open_world(args.world, cache_dir=args.cache_dir)
    print(describe(world))
    for hit in world.corpus.search(args.search, k=5) if args.search else []:
        print(f"  {hit.score:6.2f}  {hit.url}  {hit.snippet}")
    return 0


def add_parser(subparsers) -> None:
    """Add `world build` and `world info` to a `jaxseeker` argparse subparsers object."""
    world = subparsers.add_parser("world", help="build or inspect the offline world")
    sub = world.add_subparsers(dest="world_command", required=True)
    build = sub.add_parser("build", help="build a world (cached by source, size and seed)")
    build.add_argument("--source", choices=SOURCES, default="synthetic")
    build.add_argument("--size", type=at_least(MIN_SIZE), default=2000, help="entities (synthetic)")
    build.add_argument("--seed", type=at_least(0), default=0, help="synthetic")
    build.add_argument("--pages", default=None, help="JSONL of {url,title,text,links} (source pages)")
    build.add_argument(
        "--skip-bad-lines",
        action="store_true",
        help="pages: skip (and count) malformed lines instead of failing on the first",
    )
    build.add_argument("--countries", default=None, help="atlas: only these ISO codes, e.g. FR,DE,IT")
    build.add_argument("--out", default=None, help="save to this directory instead of the cache")
    build.add_argument("--cache-dir", default=None)
    build.set_defaults(func=_build)
    info = sub.add_parser("info", help="counts of a world, and optionally a search")
    info.add_argument("world", type=world_spec, metavar="WORLD", help=WORLD_HELP)
    info.add_argument("--search", default=None, help="show the top pages for this query")
    info.add_argument("--cache-dir", default=None)
    info.set_defaults(func=_info)
