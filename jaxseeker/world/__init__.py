"""The embedded offline web: an entity graph, pages written from its facts, and a BM25 index over them."""

from jaxseeker.world.atlas import atlas_world
from jaxseeker.world.build import SOURCES, build_world, open_world
from jaxseeker.world.corpus import Corpus, Hit, Page
from jaxseeker.world.entities import Entity, Relation, date_parts, iso_date
from jaxseeker.world.graph import Neighbour, World
from jaxseeker.world.pages_source import pages_world, read_pages_jsonl
from jaxseeker.world.query import DateIn, Edge, Is, LabelIs, NameInitial, NumberIn, Pred, Query, Var, match
from jaxseeker.world.store import load_world, save_world
from jaxseeker.world.synthetic import synthetic_world

__all__ = [
    "SOURCES", "atlas_world", "Corpus", "DateIn", "Edge", "Entity", "Hit", "Is", "LabelIs", "NameInitial", "Neighbour",
    "NumberIn", "Page", "Pred", "Query", "Relation", "Var", "World", "build_world", "date_parts", "iso_date",
    "load_world", "match", "open_world", "pages_world", "read_pages_jsonl", "save_world", "synthetic_world",
]
