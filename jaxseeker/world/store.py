"""Saving and loading worlds (a directory of JSON / JSONL files), and build-once caching."""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jaxseeker.cache_dir import cache_root
from jaxseeker.errors import InputError
from jaxseeker.jsonl import json_lines
from jaxseeker.world.corpus import Page
from jaxseeker.world.entities import Entity, Relation
from jaxseeker.world.graph import World
from jaxseeker.world.pages_on_disk import PagesWorld, is_pages_world_dir, open_pages_world

FORMAT_VERSION = 1
_FILES = ("world.json", "entities.jsonl", "relations.jsonl", "pages.jsonl")


def check_output(path: str | Path, flag: str, *, directory: bool = False) -> Path:
    """`path` as an output file (or `directory`) that a command can write, checked before any work is done;
    InputError naming `flag` when it, or a folder above it, is the wrong kind."""
    p = Path(path)
    want = "directory" if directory else "file"
    if p.exists() and p.is_dir() != directory:
        raise InputError(f"{flag} {p}: is a {'directory' if p.is_dir() else 'file'}, not a {want}")
    above = next((a for a in p.parents if a.exists()), None)
    if above is not None and not above.is_dir():
        raise InputError(f"{flag} {p}: {above} is a file, not a directory")
    return p


def save_world(world: World | PagesWorld, directory: str | Path) -> Path:
    """Write `world` to `directory` (created): world.json, entities.jsonl, relations.jsonl, pages.jsonl
    (a pages world: a copy of its files)."""
    if isinstance(world, PagesWorld):
        return world.copy_to(directory)
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    info = {
        **world.info,
        "format": FORMAT_VERSION,
        "entities": len(world.entities),
        "relations": len(world.relations),
        "pages": len(world.pages),
    }
    (d / "world.json").write_text(json.dumps(info, indent=1, sort_keys=True))
    with open(d / "entities.jsonl", "w") as f:
        for e in world.entities.values():
            f.write(json.dumps(e.to_json(), ensure_ascii=False) + "\n")
    with open(d / "relations.jsonl", "w") as f:
        for r in world.relations:
            f.write(json.dumps(r.to_json(), ensure_ascii=False) + "\n")
    with open(d / "pages.jsonl", "w") as f:
        for p in world.pages:
            f.write(
                json.dumps({"url": p.url, "title": p.title, "text": p.text, "links": list(p.links)}, ensure_ascii=False)
                + "\n"
            )
    return d


def _parse(path: Path, parse: Callable[[Any], Any]) -> list[Any]:
    out = []
    for n, obj in json_lines(path):
        try:
            out.append(parse(obj))
        except KeyError as err:  # its message names the missing key
            raise InputError(f"{path}:{n}: {err.args[0]}") from None
        except (TypeError, ValueError) as err:
            raise InputError(f"{path}:{n}: {err}") from None
    return out


def _info(path: Path) -> dict[str, Any]:
    """The JSON object of a world.json; InputError naming the file when it is not one."""
    try:
        info = json.loads(path.read_bytes())
    except ValueError as err:  # not UTF-8, or not JSON
        raise InputError(f"{path}: not a JSON file: {err}") from None
    if not isinstance(info, dict):
        raise InputError(f"{path}: expected a JSON object, got {type(info).__name__}")
    return info


def _page(d: dict[str, Any]) -> Page:
    for key in ("url", "title", "text"):
        if key not in d:
            raise KeyError(f"page is missing key {key!r}")
    return Page(url=d["url"], title=d["title"], text=d["text"], links=tuple(d.get("links", ())))


def is_world_dir(directory: str | Path) -> bool:
    """True when `directory` holds a saved world (or a pages world)."""
    return all((Path(directory) / name).is_file() for name in _FILES) or is_pages_world_dir(directory)


def load_world(directory: str | Path) -> World | PagesWorld:
    """Read a world written by `save_world` (a pages world opens from disk); a bad file or line raises InputError
    naming FILE:LINE."""
    d = Path(directory)
    if is_pages_world_dir(d):
        return open_pages_world(d)
    missing = [name for name in _FILES if not (d / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{d} is not a saved world: missing {', '.join(missing)}")
    info = _info(d / "world.json")
    if info.get("format") != FORMAT_VERSION:
        raise InputError(f"{d / 'world.json'}: format {info.get('format')!r}, expected {FORMAT_VERSION}")
    for key in ("format", "entities", "relations", "pages"):
        info.pop(key, None)
    return World(
        _parse(d / "entities.jsonl", Entity.from_json),
        _parse(d / "relations.jsonl", Relation.from_json),
        _parse(d / "pages.jsonl", _page),
        info=info,
    )


def default_cache_dir() -> Path:
    """$JAXSEEKER_CACHE/worlds, else ~/.cache/jaxseeker/worlds."""
    return cache_root() / "worlds"


def cache_key(source: str, **params: Any) -> str:
    """A directory name for a world built from `source` with `params` (e.g. size, seed, file stamp)."""
    body = json.dumps(params, sort_keys=True, default=str)
    digest = hashlib.sha1(f"{FORMAT_VERSION}:{source}:{body}".encode()).hexdigest()[:12]
    readable = "-".join(f"{k}{v}" for k, v in sorted(params.items()) if isinstance(v, int))
    return f"{source}-{readable}-{digest}" if readable else f"{source}-{digest}"


def _publish(target: Path, write: Callable[[Path], Any]) -> None:
    """Call `write(tmp)` on a new directory beside `target`, then rename it to `target` (atomic)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        write(tmp)
        try:
            tmp.rename(target)
        except OSError:  # another process saved it first
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _cache_root(cache_dir: str | Path | None) -> Path:
    return Path(cache_dir) if cache_dir is not None else default_cache_dir()


def cached(key: str, build: Callable[[], World], cache_dir: str | Path | None = None) -> World | PagesWorld:
    """The world saved under `key` in the cache, building and saving it (atomically) the first time."""
    target = _cache_root(cache_dir) / key
    if is_world_dir(target):
        return load_world(target)
    world = build()
    world.info["key"] = key
    _publish(target, lambda d: save_world(world, d))
    return world


def cached_directory(key: str, write: Callable[[Path], Any], cache_dir: str | Path | None = None) -> Path:
    """The cache directory of `key`, written (atomically) by `write(directory)` the first time: for sources
    that build straight onto disk (pages)."""
    target = _cache_root(cache_dir) / key
    if not is_world_dir(target):
        _publish(target, write)
    return target
