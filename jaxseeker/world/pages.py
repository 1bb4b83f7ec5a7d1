"""Pages written from facts: one page per entity, its text saying every fact, linked to its neighbours."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence

from jaxseeker.world.corpus import Page
from jaxseeker.world.entities import Entity, Relation
from jaxseeker.world.phrases import indefinite, say_date, say_number
from jaxseeker.world.schema import ATTRIBUTES, RELATIONS, TYPES

MAX_LISTED = 40  # at most this many incoming facts of one relation are written on a page


def wiki_slug(name: str) -> str:
    """The last part of the url of the page about `name`: `Some_Name`, percent-escaped."""
    return urllib.parse.quote(re.sub(r"\s+", "_", name.strip()), safe="_-.()'")


def entity_url(host: str, name: str) -> str:
    """The url of the page about `name` on `host`: `https://HOST/wiki/Some_Name`."""
    return f"https://{host}/wiki/{wiki_slug(name)}"


def _join(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def entity_noun(e: Entity) -> str:
    """The noun for `e`: its kind label (painter, university) when it has one, else its type noun."""
    spec = TYPES.get(e.type)
    if spec is None:
        return e.type
    if spec.kind_label and spec.kind_label in e.labels:
        return e.labels[spec.kind_label]
    return spec.noun


def say_attribute(e: Entity, attr: str) -> str:
    """The verb phrase for one exact attribute: `was born on 3 March 1962`, `has a population of 1,200`."""
    spec = ATTRIBUTES[attr]
    if spec.kind == "date" and spec.precision == "year":
        return spec.verb.format("in " + e.dates[attr][:4].lstrip("0"))
    if spec.kind == "date":
        return spec.verb.format("on " + say_date(e.dates[attr]))
    return spec.verb.format(say_number(e.numbers[attr], spec.unit))


def write_page(
    e: Entity,
    out_edges: Sequence[Relation],
    in_edges: Sequence[Relation],
    entities: Mapping[str, Entity],
) -> Page:
    """The page of `e`: an opening line, its attributes, one sentence per relation, links to neighbours."""
    sentences = [f"{e.name} is {indefinite(entity_noun(e))}."]
    for attr in sorted(list(e.dates) + list(e.numbers)):
        if attr in ATTRIBUTES:
            sentences.append(f"{e.name} {say_attribute(e, attr)}.")
    links: list[str] = []
    for r in out_edges:
        other = entities[r.dst]
        sentences.append(f"{e.name} {RELATIONS[r.rel].forward.format(other.name)}.")
        links.append(other.url)
    by_rel: dict[str, list[Relation]] = {}
    for r in in_edges:
        by_rel.setdefault(r.rel, []).append(r)
    for rel, rels in sorted(by_rel.items()):
        names = [entities[r.src].name for r in rels[:MAX_LISTED]]
        more = len(rels) - len(names)
        listed = _join(names) if not more else ", ".join(names) + f" and {more} more"
        sentences.append(f"{e.name} {RELATIONS[rel].backward.format(listed)}.")
        links.extend(entities[r.src].url for r in rels[:MAX_LISTED])
    unique_links = tuple(dict.fromkeys(u for u in links if u != e.url))
    return Page(url=e.url, title=e.name, text=" ".join(sentences), links=unique_links)


def write_pages(entities: Mapping[str, Entity], relations: Iterable[Relation]) -> list[Page]:
    """One page per entity, in entity order."""
    out: dict[str, list[Relation]] = {i: [] for i in entities}
    inn: dict[str, list[Relation]] = {i: [] for i in entities}
    for r in relations:
        out[r.src].append(r)
        inn[r.dst].append(r)
    return [write_page(e, out[i], inn[i], entities) for i, e in entities.items()]
