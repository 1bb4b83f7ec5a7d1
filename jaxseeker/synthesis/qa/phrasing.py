"""Noun phrases and clauses for the variables of a `Query`: the realiser's grammar, below the question frames.

The variables are laid out as a depth-first spanning tree from a root (the answer, or any variable a frame
leads with); each variable is said through its clues, its predicates and its edges to its children in the
tree. An edge that closes a cycle joins a variable and one of its ancestors, which the text has already
introduced: it is said at the descendant as `the same city`, so no placeholder letter is needed. A clue is
said as a finite verb phrase, a reduced modifier, a definite description or an opening modifier, each drawn
from `lexicon`; noun phrases mix these (`a city in Algeria that lies …`, `the birthplace of …`), named
variables are their names. Every choice comes from the `random.Random` handed in, so a phrasing is
reproducible.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import random
import re

from jaxseeker.synthesis.qa.lexicon import relation_forms
from jaxseeker.synthesis.qa.lexicon_attributes import attribute_forms
from jaxseeker.synthesis.qa.naming import spoken_name
from jaxseeker.synthesis.qa.values import date_variants, say_quantity
from jaxseeker.world import DateIn, Edge, LabelIs, NameInitial, NumberIn, Query, Var, World
from jaxseeker.world.phrases import indefinite
from jaxseeker.world.schema import RELATIONS, TYPES


class Unsayable(ValueError):
    """A cycle's edge points back at a variable the text cannot name unambiguously (two of the same noun)."""


def kind_key(var: Var) -> str | None:
    """The label key that refines the variable's noun (`occupation` for people), or None."""
    spec = TYPES.get(var.type or "")
    return spec.kind_label if spec else None


def noun(var: Var) -> str:
    """`painter` when the variable's kind label is fixed, else the type noun (`person`)."""
    key = kind_key(var)
    for p in var.preds:
        if isinstance(p, LabelIs) and p.key == key:
            return p.value
    spec = TYPES.get(var.type or "")
    return spec.noun if spec else "entity"


def plural(var: Var) -> str:
    """Plural of `noun(var)`."""
    n = noun(var)
    spec = TYPES.get(var.type or "")
    if spec and n == spec.noun:
        return spec.plural
    return n[:-1] + "ies" if n.endswith("y") and n[-2:-1] not in "aeiou" else n + "s"


def pronoun(var: Var) -> str:
    """`who` for people, `that` otherwise."""
    spec = TYPES.get(var.type or "")
    return spec.pronoun if spec else "that"


def join(parts: list[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


@functools.lru_cache(maxsize=8)
def shortenable(world: World) -> frozenset[str]:
    """Kind labels said by their last word alone without ambiguity (`baseball player` as `player`): no other label
    of the same key ends in that word (`transition metal` stays whole beside `alkali metal`)."""
    values: dict[str, set[str]] = {}
    for e in world.entities.values():
        key = kind_key(Var(e.type))
        if key and key in e.labels:
            values.setdefault(key, set()).add(e.labels[key])
    found = set()
    for labels in values.values():
        last = collections.Counter(v.split()[-1] for v in labels)
        found.update(v for v in labels if last[v.split()[-1]] == 1)
    return frozenset(found)


def capitalise(text: str) -> str:
    """The text with its first letter upper-case (names keep theirs)."""
    return text[:1].upper() + text[1:]


def _initial_forms(var: Var, p: NameInitial) -> tuple[list[str], list[str]]:
    """(verb phrases, modifiers) for `the name starts with L`."""
    letter = f"“{p.letter.upper()}”"
    if var.type == "person":
        part = "surname" if p.position == "last" else "given name"
    else:
        part = "title" if var.type == "work" else "name"
        if p.position == "last":
            return (
                [f"has a {part} whose last word begins with {letter}"],
                [f"with a {part} whose last word begins with {letter}"],
            )
    return (
        [f"has a {part} beginning with {letter}", f"has a {part} starting with {letter}"],
        [f"whose {part} begins with {letter}", f"with a {part} starting with {letter}"],
    )


@dataclasses.dataclass(frozen=True)
class Clue:
    """One thing said of a variable: a predicate, or an edge to `other` (`back`: an ancestor, said by reference)."""

    pred: object | None = None
    edge: Edge | None = None
    other: int = -1
    back: bool = False


class Phraser:
    """The grammar of one query laid out from `root` (see the module docstring); `lenient` says an ambiguous
    cycle reference as `that same city` instead of raising `Unsayable`."""

    def __init__(
        self,
        world: World,
        q: Query,
        rng: random.Random,
        root: int | None = None,
        *,
        lenient: bool = False,
        natural: bool = False,
    ):
        self.world, self.q, self.rng, self.lenient, self.natural = world, q, rng, lenient, natural
        self.root = q.target if root is None else root
        self.children: dict[int, list[tuple[Edge, int]]] = {i: [] for i in range(len(q.vars))}
        self.back: dict[int, list[tuple[Edge, int]]] = {i: [] for i in range(len(q.vars))}
        seen: set[int] = set()
        used: set[int] = set()

        def visit(i: int) -> None:
            # a depth-first tree that never goes on through a name (the name says it all): every other edge joins
            # a variable and one of its ancestors, or reaches a name
            seen.add(i)
            if i != self.root and self.named(i):
                return
            for k, e in enumerate(q.edges):
                if k in used or i not in (e.src, e.dst):
                    continue
                other = e.dst if e.src == i else e.src
                used.add(k)
                if other in seen:
                    self.back[i].append((e, other))
                else:
                    self.children[i].append((e, other))
                    visit(other)

        visit(self.root)
        nouns = [noun(v) for v in q.vars]
        self.unique_noun = [nouns.count(n) == 1 for n in nouns]

    # ---- what is said of a variable --------------------------------------------------------------------------

    def pick(self, options: list[str]) -> str:
        """The shorter of two forms drawn at random: every form stays possible, terse ones come more often."""
        a, b = self.rng.choice(options), self.rng.choice(options)
        return a if len(a) <= len(b) else b

    def named(self, i: int) -> bool:
        """True when variable `i` is said by its name."""
        return self.q.vars[i].anchor() is not None

    def name(self, i: int) -> str:
        """The name of a named variable (natural: as a sentence says it, `naming.spoken_name`)."""
        if self.natural:
            return spoken_name(self.world, self.q.vars[i].anchor())
        return self.world.entity(self.q.vars[i].anchor()).name

    def clues(self, i: int, skip: int | None = None) -> list[Clue]:
        """What is said of `i`: light clues first (values, names, references), then nested descriptions; each
        group in random order. `skip`: leave out the edges to that variable."""
        var = self.q.vars[i]
        key = kind_key(var)
        preds = [
            Clue(pred=p)
            for p in var.preds
            if isinstance(p, (DateIn, NumberIn, NameInitial)) or (isinstance(p, LabelIs) and p.key != key)
        ]
        edges = [Clue(edge=e, other=o, back=True) for e, o in self.back[i] if o != skip]
        edges += [Clue(edge=e, other=o) for e, o in self.children[i] if o != skip]
        light = preds + [c for c in edges if not self.heavy(c)]
        heavy = [c for c in edges if self.heavy(c)]
        self.rng.shuffle(light)
        self.rng.shuffle(heavy)
        return light + heavy

    def heavy(self, c: Clue) -> bool:
        """True for an edge to an unnamed variable said by its own description."""
        return c.edge is not None and not c.back and not self.named(c.other)

    def ref(self, i: int) -> str:
        """A variable already introduced: its name, or `the same city` (Unsayable when the noun is shared)."""
        if self.named(i):
            return self.name(i)
        n = noun(self.q.vars[i])
        if self.unique_noun[i]:
            return self.rng.choice((f"the same {n}", f"that same {n}"))
        if i == self.root:
            return f"the {n} in question"
        if self.lenient:
            return f"that same {n}"
        raise Unsayable(f"variable {i} ({n}) closes a cycle but shares its noun with another variable")

    def _other(self, c: Clue, compact: bool) -> str:
        return self.ref(c.other) if c.back else self.np(c.other, compact=compact)

    def say(self, i: int, c: Clue, kind: str, *, plural: bool = False, compact: bool = False) -> str | None:
        """Clue `c` of variable `i` as a `vp`, `mod` or `lead` (None when the clue has no form of that kind)."""
        var = self.q.vars[i]
        if c.pred is not None:
            p = c.pred
            if isinstance(p, NameInitial):
                vps, mods = _initial_forms(var, p)
                options = {"vp": vps, "mod": mods}.get(kind, [])
                return self.pick(options) if options else None
            if isinstance(p, LabelIs):
                key = p.key.replace("_", " ")
                return {"vp": f"has {key} {p.value}", "mod": f"with {key} {p.value}"}.get(kind)
            forms = attribute_forms(p.attr)
            options = list(getattr(forms, kind))
            if not options:
                return None
            if isinstance(p, DateIn):
                slots = {"v": self.rng.choice(date_variants(p))}
            else:
                slots = {
                    "q": say_quantity(p, forms.word, forms.symbol, scale=forms.scale),
                    "qn": say_quantity(p, before_noun=True),
                }
            return self.pick(options).format(**slots)
        forms = relation_forms(c.edge.rel, c.edge.src == i)
        options = list(getattr(forms, kind))
        if not options:
            return None
        x = self._other(c, compact)
        if self.heavy(c) and any(o.endswith("{x}") for o in options):
            options = [o for o in options if o.endswith("{x}")]  # a long description goes last
        pos = "their" if plural or var.type == "person" else "its"
        return self.pick(options).format(x=x, pos=pos, n=noun(var))

    def definite(self, i: int, c: Clue) -> str | None:
        """`the birthplace of X`: variable `i` fixed by its one clue, an edge from the other end of a functional
        relation (None when there is no such form)."""
        if c.edge is None or c.back or c.edge.src == i or not RELATIONS[c.edge.rel].functional:
            return None
        options = relation_forms(c.edge.rel, False).the
        if self.natural and not self.named(c.other):
            options = tuple(o for o in options if o.endswith("{x}"))  # `the birthplace of …`, no relative around it
        if not options:
            return None
        return self.rng.choice(options).format(x=self.np(c.other, compact=True), n=noun(self.q.vars[i]))

    # ---- noun phrases ----------------------------------------------------------------------------------------

    def head(self, i: int, *, definite: bool = False, plural_: bool = False) -> str:
        """`a city`, `the city`, `cities`; a variable nested in another's description by the last word of its noun
        (`a team` for a baseball team)."""
        var = self.q.vars[i]
        if plural_:
            return plural(var)
        n = noun(var)
        if i != self.root and n in shortenable(self.world):
            n = n.split()[-1]
        return f"the {n}" if definite else indefinite(n)

    def modifiers(self, i: int, clues: list[Clue], *, plural_: bool = False, compact: bool = False) -> str | None:
        """Every clue as a reduced modifier (`born in X and formerly of Y whose … and whose …`): participles and
        phrases first, relative modifiers (`whose …`, `where …`) after them; None when a clue has no modifier, or
        when a relative one would follow a nested description (it would read as the nested one's)."""
        mods = [
            self.say(i, c, "mod", plural=plural_, compact=compact or k < len(clues) - 1) for k, c in enumerate(clues)
        ]
        if any(m is None for m in mods):
            return None
        relative = [m for m in mods if is_relative(m)]
        if relative and any(self.heavy(c) for c in clues):
            return None
        plain = [m for m in mods if not is_relative(m)]
        if len(plain) == 2 and plain[0].startswith(("in ", "of ", "at ")) and len(plain[0].split()) <= 4:
            text = f"{plain[0]} {plain[1]}"  # a short place phrase runs on: `in Algeria with a population of …`
        else:
            text = join(plain)
        return " ".join(t for t in (text, " and ".join(relative)) if t)

    def np(
        self,
        i: int,
        *,
        definite: bool = False,
        plural_: bool = False,
        compact: bool = False,
        clues: list[Clue] | None = None,
    ) -> str:
        """The noun phrase of variable `i`: its name, a definite description, or its head with its clues (drawn
        here unless given) as modifiers, a relative clause or both. `compact` prefers modifiers (a phrase nested
        before more text)."""
        if self.named(i) and not plural_:
            return self.name(i)
        clues = self.clues(i) if clues is None else clues
        head = self.head(i, definite=definite, plural_=plural_)
        if not clues:
            return head
        if len(clues) == 1 and not plural_ and (compact or self.rng.random() < 0.4):
            the = self.definite(i, clues[0])
            if the is not None:
                return the
        rel = "that" if plural_ else pronoun(self.q.vars[i])
        choice = self.rng.random()
        if plural_ or compact or (len(clues) <= 2 and choice < 0.6):
            mods = self.modifiers(i, clues, plural_=plural_, compact=compact)
            if mods is not None:
                return f"{head} {mods}"
        first = self.say(i, clues[0], "mod", plural=plural_, compact=True) if len(clues) >= 2 else None
        if first is not None and not is_relative(first) and choice < 0.8:
            return f"{head} {first} {rel} {join(self.vps(i, clues[1:]))}"
        return f"{head} {rel} {join(self.vps(i, clues))}"

    def vps(self, i: int, clues: list[Clue]) -> list[str]:
        """The clues as finite verb phrases; a nested description is compact unless it is the last clue. Natural
        text says a verb once: `was born in the 1940s` and `was born in a city …` become `was born in the 1940s in a
        city …` (`merge_verbs`)."""
        said = [self.say(i, c, "vp", compact=k < len(clues) - 1) for k, c in enumerate(clues)]
        return merge_verbs(said) if self.natural else said


_VERBS = ("was born", "died", "passed away")  # a time and a place of the same event, said by the same verb
_TIME = re.compile(r"\b\d{3,4}s?\b|\bcentury\b")


def _says_time(rest: str) -> bool:
    return _TIME.search(" ".join(rest.split()[:6])) is not None


def merge_verbs(vps: list[str]) -> list[str]:
    """`[was born during the 1940s, was born in a city …]` as `[was born during the 1940s in a city …]`: a phrase
    that says a time with one of `_VERBS` takes in the phrase that says the place with the same verb."""
    out = list(vps)
    for verb in _VERBS:
        rests = [v[len(verb) + 1 :] if v.startswith(f"{verb} ") else None for v in out]
        when = [k for k, r in enumerate(rests) if r is not None and _says_time(r)]
        where = [k for k, r in enumerate(rests) if r is not None and r.startswith("in ") and not _says_time(r)]
        if when and where:
            k, j = when[0], where[0]
            out[k] = f"{out[k]} {rests[j]}"
            del out[j]
    return out


_RELATIVE = ("whose ", "where ", "that ", "which ", "in which ", "for which ", "who ")


def is_relative(mod: str) -> bool:
    """True for a modifier that is a relative clause (`whose capital is X`, `where X was born`)."""
    return mod.startswith(_RELATIVE)


def also(vp: str) -> str:
    """`is also …`, `was also …`, `also played …`: the verb phrase with `also` where English puts it."""
    first, _, rest = vp.partition(" ")
    return f"{first} also {rest}" if first in ("is", "was", "are", "were") else f"also {vp}"


def determined(q: Query, i: int, c: Clue) -> bool:
    """True when clue `c` alone fixes variable `i` (an edge from the other end of a functional relation: the
    birthplace of X), so `the cities where X was born` would be a set of one."""
    return c.edge is not None and c.edge.dst == i and c.edge.src != i and RELATIONS[c.edge.rel].functional
