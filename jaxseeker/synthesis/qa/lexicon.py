"""The realiser's phrase book of relations: several constructions for every relation of the world's schema.

A relation is said of one of its ends (`forward`: of the source) in four kinds of construction:
- `vp`: a finite verb phrase (`was born in {x}`), for `Which player was born in …?` and relative clauses;
- `mod`: a reduced post-modifier without verb agreement (`born in {x}`, `with {x} among {pos} players`), for noun
  phrases (`a player born in …`) and plural counts (`How many players born in …`); `{pos}` is `its` / `their`;
- `the`: a definite description of the end fixed by the other (a relation is functional: a person has one
  birthplace, so the city is `the birthplace of {x}`); `{n}` is the noun of the described end;
- `lead`: an opening modifier (`Born in {x}, which …`, `In {x}, which …`).
`{x}` is the other end's noun phrase. The attributes' phrase book is `lexicon_attributes`. A relation missing here
falls back to the schema's own phrase (`world.schema`).
"""

from __future__ import annotations

import dataclasses

from jaxseeker.world.schema import RELATIONS


@dataclasses.dataclass(frozen=True)
class RelForms:
    """The constructions of one relation said of one end (see the module docstring)."""

    vp: tuple[str, ...]
    mod: tuple[str, ...] = ()
    the: tuple[str, ...] = ()
    lead: tuple[str, ...] = ()


def _r(vp, mod=(), the=(), lead=()) -> RelForms:
    return RelForms(tuple(vp), tuple(mod), tuple(the), tuple(lead))


RELATIONS_SAID: dict[tuple[str, bool], RelForms] = {
    ("located_in", True): _r(
        ["is located in {x}", "lies in {x}", "is in {x}"], ["in {x}", "located in {x}"], lead=["In {x}"]
    ),
    ("located_in", False): _r(
        ["contains {x}", "is home to {x}"],
        ["containing {x}", "where {x} lies", "home to {x}"],
        ["the {n} where {x} lies", "the {n} that contains {x}"],
        lead=["Home to {x}"],
    ),
    ("capital_of", True): _r(
        ["is the capital of {x}", "serves as the capital of {x}"], ["serving as the capital of {x}"]
    ),
    ("capital_of", False): _r(
        ["has {x} as its capital", "is governed from {x}"],
        ["whose capital is {x}", "with {x} as {pos} capital", "governed from {x}"],
        ["the {n} whose capital is {x}", "the {n} governed from {x}"],
        lead=["With {x} as its capital", "Governed from {x}"],
    ),
    ("borders", True): _r(
        ["borders {x}", "shares a border with {x}"],
        ["bordering {x}", "sharing a border with {x}"],
        lead=["Bordering {x}"],
    ),
    ("borders", False): _r(
        ["borders {x}", "shares a border with {x}"],
        ["bordering {x}", "sharing a border with {x}"],
        lead=["Bordering {x}"],
    ),
    ("born_in", True): _r(
        ["was born in {x}", "is a native of {x}"], ["born in {x}", "whose birthplace is {x}"], lead=["Born in {x}"]
    ),
    ("born_in", False): _r(
        ["is the birthplace of {x}"], ["where {x} was born"], ["the birthplace of {x}", "the {n} where {x} was born"]
    ),
    ("died_in", True): _r(
        ["died in {x}", "passed away in {x}"], ["whose place of death is {x}"], lead=["Having died in {x}"]
    ),
    ("died_in", False): _r(
        ["is the place where {x} died", "is the place of death of {x}"],
        ["where {x} died"],
        ["the {n} where {x} died", "the place where {x} died"],
    ),
    ("citizen_of", True): _r(
        ["is a citizen of {x}", "holds the citizenship of {x}"],
        ["holding the citizenship of {x}", "with the citizenship of {x}"],
    ),
    ("citizen_of", False): _r(
        ["is the country of citizenship of {x}", "counts {x} among its citizens"],
        ["whose citizens include {x}"],
        ["the country of citizenship of {x}"],
    ),
    ("studied_at", True): _r(["studied at {x}", "was educated at {x}"], ["educated at {x}"]),
    ("studied_at", False): _r(
        ["counts {x} among its alumni", "educated {x}"], ["where {x} studied", "with {x} among {pos} alumni"]
    ),
    ("member_of", True): _r(["is a member of {x}", "belongs to {x}"], ["belonging to {x}"]),
    ("member_of", False): _r(
        ["has {x} as a member", "counts {x} among its members"],
        ["whose members include {x}", "with {x} among {pos} members"],
    ),
    ("founded_by", True): _r(
        ["was founded by {x}", "was established by {x}"],
        ["founded by {x}", "established by {x}"],
        lead=["Founded by {x}"],
    ),
    ("founded_by", False): _r(["founded {x}", "established {x}"], ["credited with founding {x}"]),
    ("headquartered_in", True): _r(
        ["is headquartered in {x}", "has its headquarters in {x}", "is based in {x}"],
        ["headquartered in {x}", "based in {x}"],
        lead=["Based in {x}"],
    ),
    ("headquartered_in", False): _r(
        ["hosts the headquarters of {x}", "is the home city of {x}"],
        ["where {x} is based", "hosting the headquarters of {x}"],
        ["the {n} where {x} is based"],
    ),
    ("created_by", True): _r(["was created by {x}", "is a work by {x}"], ["created by {x}", "by {x}"]),
    ("created_by", False): _r(
        ["created {x}", "is the creator of {x}"], ["credited with creating {x}"], ["the creator of {x}"]
    ),
    ("published_by", True): _r(["was published by {x}"], ["published by {x}"], lead=["Published by {x}"]),
    ("published_by", False): _r(
        ["published {x}", "is the publisher of {x}"], ["behind the publication of {x}"], ["the publisher of {x}"]
    ),
    ("set_in", True): _r(["is set in {x}", "takes place in {x}"], ["set in {x}"], lead=["Set in {x}"]),
    ("set_in", False): _r(
        ["is the setting of {x}"], ["where {x} is set"], ["the setting of {x}", "the {n} where {x} is set"]
    ),
    ("took_place_in", True): _r(["took place in {x}", "was held in {x}"], ["held in {x}"], lead=["Held in {x}"]),
    ("took_place_in", False): _r(
        ["hosted {x}", "was the venue of {x}"],
        ["where {x} took place"],
        ["the {n} that hosted {x}", "the {n} where {x} took place"],
    ),
    ("organised_by", True): _r(["was organised by {x}", "was run by {x}"], ["organised by {x}", "run by {x}"]),
    ("organised_by", False): _r(["organised {x}", "is the organiser of {x}"], ["behind {x}"], ["the organiser of {x}"]),
    ("participated_in", True): _r(["took part in {x}", "participated in {x}"], ["among the participants of {x}"]),
    ("participated_in", False): _r(
        ["had {x} among its participants", "counted {x} among its participants"],
        ["with {x} among {pos} participants", "in which {x} took part"],
    ),
    ("links_to", True): _r(["links to {x}"], ["linking to {x}"]),
    ("links_to", False): _r(["is linked from {x}"], ["linked from {x}"]),
    ("in_subdivision", True): _r(
        ["lies in {x}", "is in {x}", "is part of {x}"], ["in {x}", "located in {x}"], lead=["In {x}"]
    ),
    ("in_subdivision", False): _r(
        ["includes {x}", "contains {x}"],
        ["containing {x}", "where {x} lies"],
        ["the {n} where {x} lies", "the {n} containing {x}"],
        lead=["Containing {x}"],
    ),
    ("subdivision_of", True): _r(
        ["belongs to {x}", "is one of the first-level divisions of {x}"],
        ["in {x}", "forming part of {x}"],
        lead=["In {x}"],
    ),
    ("subdivision_of", False): _r(
        ["has {x} among its subdivisions", "has {x} among its first-level divisions"],
        ["with {x} among {pos} subdivisions", "that {x} belongs to"],
        ["the {n} that {x} belongs to", "the {n} {x} is part of"],
        lead=["With {x} among its subdivisions"],
    ),
    ("serves", True): _r(["serves {x}", "provides air service to {x}"], ["serving {x}"], lead=["Serving {x}"]),
    ("serves", False): _r(
        ["is served by {x}", "gets air service from {x}"],
        ["served by {x}"],
        ["the {n} served by {x}", "the {n} that {x} serves"],
        ["Served by {x}"],
    ),
    ("airport_in", True): _r(["is located in {x}", "lies in {x}"], ["in {x}", "located in {x}"], lead=["In {x}"]),
    ("airport_in", False): _r(
        ["has {x} among its airports", "is home to {x}"],
        ["with {x} among {pos} airports", "home to {x}"],
        ["the {n} where {x} is located", "the {n} that {x} lies in"],
        lead=["Home to {x}"],
    ),
    ("flows_through", True): _r(["flows through {x}", "runs through {x}"], ["flowing through {x}"]),
    ("flows_through", False): _r(["is crossed by {x}"], ["crossed by {x}"]),
    ("lake_in", True): _r(["lies in {x}", "is located in {x}"], ["in {x}"], lead=["In {x}"]),
    ("lake_in", False): _r(["has {x} on its territory", "contains {x}"], ["containing {x}", "where {x} lies"]),
    ("spoken_in", True): _r(["is spoken in {x}"], ["spoken in {x}"], lead=["Spoken in {x}"]),
    ("spoken_in", False): _r(
        ["has {x} among its languages", "counts {x} among its languages"], ["where {x} is spoken"]
    ),
    ("uses_currency", True): _r(
        ["uses {x} as its currency", "pays in {x}"], ["using {x}", "paying in {x}"], lead=["Using {x}"]
    ),
    ("uses_currency", False): _r(["is the currency of {x}", "is used in {x}"], ["used in {x}"]),
    ("used_currency", True): _r(["formerly used {x}", "once paid in {x}"], ["where {x} was once legal tender"]),
    ("used_currency", False): _r(
        ["was formerly used in {x}", "was once legal tender in {x}"], ["once used in {x}", "formerly used in {x}"]
    ),
    ("in_region", True): _r(["lies in {x}", "is part of {x}"], ["in {x}"], lead=["In {x}"]),
    ("in_region", False): _r(["includes {x}"], ["including {x}"], ["the {n} that includes {x}", "the {n} {x} lies in"]),
    ("highest_point_of", True): _r(
        ["is the highest point of {x}", "is the highest peak of {x}"], ["rising highest of all in {x}"]
    ),
    ("highest_point_of", False): _r(
        ["has {x} as its highest point", "is topped by {x}"], ["whose highest point is {x}", "topped by {x}"]
    ),
    ("played_for", True): _r(
        ["played for {x}", "once played for {x}", "was on the roster of {x}"],
        ["formerly of {x}", "with a stint at {x}"],
        lead=["Once on the roster of {x}"],
    ),
    ("played_for", False): _r(
        ["had {x} among its players", "fielded {x}", "counted {x} on its roster"],
        ["with {x} among {pos} players", "whose players included {x}", "for which {x} played"],
        lead=["With {x} on its roster"],
    ),
    ("won_award", True): _r(["won {x}", "received {x}"], ["awarded {x}"], lead=["Awarded {x}"]),
    ("won_award", False): _r(["was won by {x}", "went to {x}"], ["won by {x}"]),
    ("home_park", True): _r(["played home games at {x}", "called {x} home"], ["playing home games at {x}"]),
    ("home_park", False): _r(
        ["was a home ground of {x}", "hosted home games of {x}"],
        ["where {x} played home games"],
        lead=["Home ground of {x}"],
    ),
    ("ballpark_in", True): _r(["stands in {x}", "is located in {x}"], ["in {x}"], lead=["In {x}"]),
    ("ballpark_in", False): _r(
        ["has {x} among its ballparks", "is home to {x}"], ["home to {x}"], ["the {n} where {x} stands"]
    ),
    ("discovered_by", True): _r(
        ["was discovered by {x}", "was first identified by {x}"], ["discovered by {x}"], lead=["Discovered by {x}"]
    ),
    ("discovered_by", False): _r(
        ["discovered {x}", "is credited with discovering {x}"], ["credited with discovering {x}"]
    ),
    ("discovered_in", True): _r(["was discovered in {x}", "was first identified in {x}"], ["discovered in {x}"]),
    ("discovered_in", False): _r(["is the country where {x} was discovered"], ["where {x} was discovered"]),
}


def relation_forms(rel: str, forward: bool) -> RelForms:
    """The forms of `rel` said of its source (`forward`) or destination; the schema's phrase when not listed."""
    found = RELATIONS_SAID.get((rel, forward))
    if found is not None:
        return found
    spec = RELATIONS[rel]
    return RelForms(((spec.forward if forward else spec.backward).format("{x}"),))
