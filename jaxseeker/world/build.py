"""One entry point to get a world: build it from a source (once, then from the cache) or open a saved one."""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Sequence
from pathlib import Path

from jaxseeker.errors import InputError
from jaxseeker.world.atlas import PACKAGES as ATLAS_PACKAGES
from jaxseeker.world.atlas import VERSION as ATLAS_VERSION
from jaxseeker.world.atlas import atlas_world
from jaxseeker.world.graph import World
from jaxseeker.world.pages_on_disk import LAYOUT, PagesWorld, open_pages_world
from jaxseeker.world.pages_source import pages_world, write_pages_world
from jaxseeker.world.store import cache_key, cached, cached_directory, is_world_dir, load_world
from jaxseeker.world.synthetic import synthetic_world

SOURCES = ("synthetic", "pages", "atlas")


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "missing"


def build_world(
    source: str,
    *,
    size: int = 2000,
    seed: int = 0,
    path: str | Path | None = None,
    countries: Sequence[str] | None = None,
    cache_dir: str | Path | None = None,
    use_cache: bool = True,
    skip_bad_lines: bool = False,
) -> World | PagesWorld:
    """The world from `source` (synthetic: `size`, `seed`; pages: the JSONL `path`, built on disk, bad lines
    skipped and counted when `skip_bad_lines`; atlas: all countries or these ISO codes), cached by its inputs."""
    if source == "synthetic":
        key = cache_key("synthetic", size=size, seed=seed)
        build = functools.partial(synthetic_world, size, seed)
    elif source == "pages":
        if path is None:
            raise InputError("source 'pages' needs path= (`--pages FILE`: a JSONL file of {url, title, text, links})")
        p = Path(path).resolve()
        if not p.is_file():
            raise FileNotFoundError(f"pages file not found: {p}")
        if not use_cache:
            return pages_world(p, skip_bad_lines=skip_bad_lines)
        stat = p.stat()
        skip = {"skip_bad_lines": "yes"} if skip_bad_lines else {}
        key = cache_key(
            "pages", file=str(p), bytes=stat.st_size, mtime_ns=stat.st_mtime_ns, layout=f"v{LAYOUT}", **skip
        )
        write = functools.partial(write_pages_world, p, skip_bad_lines=skip_bad_lines, info={"key": key})
        return open_pages_world(cached_directory(key, write, cache_dir))
    elif source == "atlas":
        codes = sorted(c.upper() for c in countries) if countries else None
        versions = {p: _version(p) for p in ATLAS_PACKAGES}
        key = cache_key("atlas", countries=",".join(codes) if codes else "all", version=ATLAS_VERSION, **versions)
        build = functools.partial(atlas_world, codes)
    else:
        raise InputError(f"unknown world source {source!r}; known: {', '.join(SOURCES)}")
    if not use_cache:
        return build()
    return cached(key, build, cache_dir)


def open_world(spec: str, *, cache_dir: str | Path | None = None) -> World | PagesWorld:
    """A saved world directory, or a spec `synthetic[:SIZE[:SEED]]` / `pages:FILE.jsonl` / `atlas[:FR,DE,...]`."""
    if is_world_dir(spec):
        return load_world(spec)
    source, _, rest = spec.partition(":")
    if source == "synthetic":
        parts = [p for p in rest.split(":") if p] if rest else []
        try:
            nums = [int(p) for p in parts]
        except ValueError:
            raise InputError(f"world spec {spec!r}: expected synthetic[:SIZE[:SEED]] with integers") from None
        if len(nums) > 2:
            raise InputError(f"world spec {spec!r}: expected synthetic[:SIZE[:SEED]]")
        size, seed = (nums + [2000, 0][len(nums) :])[:2]
        return build_world("synthetic", size=size, seed=seed, cache_dir=cache_dir)
    if source == "pages" and rest:
        return build_world("pages", path=rest, cache_dir=cache_dir)
    if source == "atlas":
        codes = [c for c in rest.split(",") if c] if rest else None
        return build_world("atlas", countries=codes, cache_dir=cache_dir)
    if Path(spec).exists():
        raise FileNotFoundError(f"{spec} exists but is not a saved world (no world.json, entities.jsonl, ...)")
    raise InputError(
        f"cannot open world {spec!r}: give a saved world directory, synthetic[:SIZE[:SEED]], pages:FILE.jsonl "
        "or atlas[:CODES]"
    )
