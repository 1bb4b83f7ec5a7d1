"""Names `jaxseeker.world` exports, each imported from its module on first use (lazy_loader reads this stub)."""

from .atlas import atlas_world
from .build import SOURCES, build_world, open_world
from .corpus import Corpus, Hit, Page
from .entities import Entity, Relation, date_parts, iso_date
from .graph import Neighbour, World
from .pages_source import pages_world, read_pages_jsonl
from .query import DateIn, Edge, Is, LabelIs, NameInitial, NumberIn, Pred, Query, Var, match
from .spec import WorldSpec, world_spec
from .store import load_world, save_world
from .synthetic import synthetic_world

__all__ = [
    "SOURCES",
    "atlas_world",
    "Corpus",
    "DateIn",
    "Edge",
    "Entity",
    "Hit",
    "Is",
    "LabelIs",
    "NameInitial",
    "Neighbour",
    "NumberIn",
    "Page",
    "Pred",
    "Query",
    "Relation",
    "Var",
    "World",
    "WorldSpec",
    "build_world",
    "date_parts",
    "iso_date",
    "load_world",
    "match",
    "open_world",
    "pages_world",
    "read_pages_jsonl",
    "save_world",
    "synthetic_world",
    "world_spec",
]
