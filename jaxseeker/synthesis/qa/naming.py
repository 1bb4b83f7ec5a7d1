"""Names as a writer says them: no disambiguator in parentheses, `the` before the countries that take it."""

from __future__ import annotations

import collections
import functools
import re

from jaxseeker.world import World

_QUALIFIER = re.compile(r"\s*\(([^)]*)\)\s*$")
# country names said with `the`: plural or common-noun names (`the United States`, `the Netherlands`)
_THE = re.compile(
    r"^(?:United |Republic |Federated |Holy )"
    r"|(?:Republic|Kingdom|States|Islands|Emirates|Federation|Union)$"
    r"|^(?:Netherlands|Philippines|Bahamas|Gambia|Maldives|Comoros|Seychelles|Vatican City)$"
)


def bare_name(name: str) -> str:
    """The name without its parenthesised qualifier: `Richmond` for `Richmond (Kentucky, US)`."""
    return _QUALIFIER.sub("", name)


@functools.lru_cache(maxsize=8)
def _bare_counts(world: World) -> collections.Counter:
    return collections.Counter((e.type, bare_name(e.name)) for e in world.entities.values())


def takes_the(name: str) -> bool:
    """True for a country name said with `the` (`the United States`, `the Czech Republic`, `the Netherlands`)."""
    return _THE.search(name) is not None


def spoken_name(world: World, entity_id: str) -> str:
    """The name as a sentence says it: the bare name when no other entity of its type has it, else the bare name and
    the qualifier's first part after a comma (`Richmond, Kentucky`), a person's before it (`the baseball player Ed
    Walsh`); a country that takes `the` gets it."""
    e = world.entity(entity_id)
    name = bare_name(e.name)
    found = _QUALIFIER.search(e.name)
    if found and _bare_counts(world)[(e.type, name)] > 1:
        qualifier = found.group(1).split(",")[0].strip()
        # a person's qualifier is what they are (`baseball player`): said before the name, not after a comma
        person = e.type == "person" and qualifier.replace(" ", "").isalpha()
        name = f"the {qualifier} {name}" if person else f"{name}, {qualifier}"
    if e.type == "country" and takes_the(name):
        name = f"the {name}"
    return name
