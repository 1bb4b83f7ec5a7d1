"""The `world` of every recipe and of `--world`: a spec string (`synthetic:3000:0`, `atlas:GB,FR`, `pages:FILE.jsonl`,
a saved world's directory) or the mapping {source, size, seed, countries, path}; one parser, `world_spec`, for both
forms, whose result `open_world` builds (or reads from the cache)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jaxseeker.errors import InputError, did_you_mean
from jaxseeker.world.store import is_world_dir
from jaxseeker.world.synthetic import MIN_SIZE

SPEC_SOURCES = ("synthetic", "atlas", "pages", "saved")
MAPPING_KEYS = "{source, size, seed, countries, path}"
WORLD_FORMS = (
    "a spec string (synthetic[:SIZE[:SEED]], atlas[:GB,FR,…], pages:FILE.jsonl or a saved world directory) or a "
    f"mapping {MAPPING_KEYS}"
)


@dataclasses.dataclass(frozen=True)
class WorldSpec:
    """A world to build or open: a seeded synthetic one (`size`, `seed`), the atlas (`countries`), a pages JSONL file
    or a saved world directory (`path`)."""

    # synthetic (a seeded made-up world) | atlas (real facts from PyPI wheels) | pages | saved
    source: str = "synthetic"
    size: int = 2000  # synthetic: entities
    seed: int = 0  # synthetic: the world's seed
    countries: tuple[str, ...] = ()  # atlas: ISO codes to keep (empty: all)
    path: str = ""  # pages: the JSONL file of {url, title, text, links}; saved: the world's directory

    def __post_init__(self) -> None:
        if not isinstance(self.countries, list | tuple) or not all(isinstance(c, str) for c in self.countries):
            raise InputError(f"world.countries: expected a list of ISO codes, got {self.countries!r}")
        object.__setattr__(self, "countries", tuple(self.countries))
        for key, kind in (("source", str), ("size", int), ("seed", int), ("path", str)):
            value = getattr(self, key)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise InputError(f"world.{key}: expected {kind.__name__}, got {value!r}")
        if self.source not in SPEC_SOURCES:
            raise InputError(f"world.source: {self.source!r} is not one of {list(SPEC_SOURCES)}")
        if self.source == "synthetic" and self.size < MIN_SIZE:
            raise InputError(
                f"world.size: {self.size} is too small for a synthetic world (need at least {MIN_SIZE} entities)"
            )
        if bool(self.path) != (self.source in ("pages", "saved")):
            raise InputError(f"world.path: source {self.source!r} {'takes no' if self.path else 'needs a'} path")

    def spec(self) -> str:
        """The world as a spec string (what `--world` and a recipe's `world` take)."""
        if self.source == "atlas":
            return "atlas" + (":" + ",".join(self.countries) if self.countries else "")
        if self.source == "pages":
            return f"pages:{self.path}"
        if self.source == "saved":
            return self.path
        return f"synthetic:{self.size}:{self.seed}"

    def key(self) -> dict[str, Any]:
        """The world as stage fingerprints take it: `path` only when set, so runs from before it keep their
        stages."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "path" or v}


def parse_spec(spec: str, *, or_mapping: bool = False) -> dict[str, Any]:
    """The keys a spec string sets (`synthetic:3000` sets source and size; the rest take the caller's defaults); an
    error names the forms a spec takes (`or_mapping`: and a recipe's mapping)."""
    if is_world_dir(spec):
        return {"source": "saved", "path": spec}
    source, _, rest = spec.partition(":")
    if source == "synthetic":
        parts = [p for p in rest.split(":") if p] if rest else []
        try:
            nums = [int(p) for p in parts]
        except ValueError:
            raise InputError(f"world spec {spec!r}: expected synthetic[:SIZE[:SEED]] with integers") from None
        if len(nums) > 2:
            raise InputError(f"world spec {spec!r}: expected synthetic[:SIZE[:SEED]]")
        return {"source": source} | dict(zip(("size", "seed"), nums, strict=False))
    if source == "pages" and rest:
        return {"source": source, "path": rest}
    if source == "atlas":
        return {"source": source, "countries": tuple(c for c in rest.split(",") if c)}
    if Path(spec).exists():
        raise FileNotFoundError(f"{spec} exists but is not a saved world (no world.json, entities.jsonl, ...)")
    raise InputError(
        f"cannot open world {spec!r}: give a saved world directory, synthetic[:SIZE[:SEED]], pages:FILE.jsonl "
        "or atlas[:CODES]" + (f", or a mapping {MAPPING_KEYS}" if or_mapping else "")
    )


def world_spec(value: Any, where: str = "world", default: WorldSpec = WorldSpec()) -> WorldSpec | None:
    """The WorldSpec of a recipe's `world` (a spec string or a mapping; the keys it leaves out keep `default`'s), or
    None for `null` (no world). Errors name `where` (none: a `--world` flag's spec), the key and the accepted
    forms."""
    prefix = f"{where}: " if where else ""
    if value is None or isinstance(value, WorldSpec):
        return value
    if isinstance(value, str):
        try:
            fields = parse_spec(value, or_mapping=bool(where))
        except InputError as e:
            raise InputError(f"{prefix}{e}") from None
    elif isinstance(value, Mapping):
        fields = dict(value)
        known = [f.name for f in dataclasses.fields(WorldSpec)]
        unknown = sorted(set(fields) - set(known))
        if unknown:
            raise InputError(f"{prefix}unknown keys {unknown}{did_you_mean(unknown, known)}; known keys: {known}")
    else:
        raise InputError(f"{prefix}expected {WORLD_FORMS}, or null, got {value!r} ({type(value).__name__})")
    try:
        return dataclasses.replace(default, **fields)
    except InputError as e:  # WorldSpec's own checks name `world.KEY`
        raise InputError(f"{where or 'world'}{str(e).removeprefix('world')}") from None
