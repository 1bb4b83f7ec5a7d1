"""One entry point to get a world: build it from a source (once, then from the cache) or open a saved one."""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from jaxseeker.errors import InputError
from jaxseeker.world.atlas import PACKAGES as ATLAS_PACKAGES
from jaxseeker.world.atlas import VERSION as ATLAS_VERSION
from jaxseeker.world.atlas import atlas_world
from jaxseeker.world.graph import World
from jaxseeker.world.pages_on_disk import LAYOUT, PagesWorld, open_pages_world
from jaxseeker.world.pages_source import pages_world, write_pages_world
from jaxseeker.world.spec import WorldSpec, world_spec
from jaxseeker.world.store import cache_key, cached, cached_directory, load_world
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


def open_world(spec: str | Mapping[str, Any] | WorldSpec, *, cache_dir: str | Path | None = None) -> World | PagesWorld:
    """The world of a spec (`world.spec.world_spec`'s forms): a saved world directory, `synthetic[:SIZE[:SEED]]`,
    `pages:FILE.jsonl` or `atlas[:FR,DE,...]`, built once and then read from the cache."""
    world = world_spec(spec, "")
    if world.source == "saved":
        return load_world(world.path)
    return build_world(
        world.source,
        size=world.size,
        seed=world.seed,
        path=world.path or None,
        countries=world.countries or None,
        cache_dir=cache_dir,
    )
