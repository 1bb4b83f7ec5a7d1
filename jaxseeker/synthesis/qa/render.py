"""English for structured constraints: a `Query` becomes a question.

Every constraint is a verb phrase (`was born in the early 1960s`, `is located in Tolvania`,
`has a surname starting with "F"`); a variable is its name when it is anchored, else a noun with
its verb phrases (`a painter who ...`). Variables on a cycle get a letter (`a city Y`) so the edge
that closes the cycle can point back at them.
"""

from __future__ import annotations

from jaxseeker.world import DateIn, LabelIs, NameInitial, NumberIn, Query, Var, World
from jaxseeker.world.entities import date_parts
from jaxseeker.world.phrases import MONTHS, indefinite, say_date, say_number
from jaxseeker.world.schema import ATTRIBUTES, RELATIONS, TYPES

STYLES = 3


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 21st ..."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def say_date_range(p: DateIn) -> str:
    """`on 3 March 1962`, `in March 1962`, `in the early 1960s`, `in the mid-5th century` ..."""
    y, m, _ = date_parts(p.lo)
    hy = date_parts(p.hi)[0]
    g = p.grain
    if g == "day":
        return "on " + say_date(p.lo)
    if g == "month":
        return f"in {MONTHS[m - 1]} {y}"
    if g == "year":
        return f"in {y}"
    if g.endswith("-decade"):
        part = g.split("-")[0]
        return f"in the {part}{'-' if part == 'mid' else ' '}{hy // 10 * 10}s"
    if g == "decade":
        return f"in the {hy // 10 * 10}s"
    if g.endswith("-century"):
        part = g.split("-")[0]
        return f"in the {part}{'-' if part == 'mid' else ' '}{ordinal((hy - 1) // 100 + 1)} century"
    if g == "century":
        return f"in the {ordinal((hy - 1) // 100 + 1)} century"
    return f"between {y} and {hy}"


def _scaled(value: float) -> tuple[float, str]:
    for scale, word in ((1e9, " billion"), (1e6, " million")):
        if value >= scale and (value / scale * 10).is_integer():
            return value / scale, word
    return value, ""


def say_number_range(p: NumberIn, unit: str = "") -> str:
    """`1,234`, `between 1 and 2 million`, `more than 500`, `less than 1%`."""
    if p.grain == "exact":
        return say_number(p.lo, unit)
    if p.grain == "above":
        v, word = _scaled(p.lo)
        return f"more than {say_number(v)}{word}{unit}"
    if p.grain == "below":
        v, word = _scaled(p.hi)
        return f"less than {say_number(v)}{word}{unit}"
    (lo, lo_word), (hi, hi_word) = _scaled(p.lo), _scaled(p.hi)
    if lo_word == hi_word:
        return f"between {say_number(lo)} and {say_number(hi)}{hi_word}{unit}"
    return f"between {say_number(p.lo)} and {say_number(p.hi)}{unit}"


def _name_part(var: Var, position: str) -> str:
    if var.type == "person":
        return "surname" if position == "last" else "given name"
    if var.type == "work":
        return "title" if position == "first" else "title whose last word"
    return "name" if position == "first" else "name whose last word"


def pred_phrase(var: Var, p) -> str | None:
    """The verb phrase of one predicate (None for ones said elsewhere: anchors, the kind label)."""
    if isinstance(p, DateIn):
        return ATTRIBUTES[p.attr].verb.format(say_date_range(p))
    if isinstance(p, NumberIn):
        spec = ATTRIBUTES[p.attr]
        return spec.verb.format(say_number_range(p, spec.unit))
    if isinstance(p, NameInitial):
        part = _name_part(var, p.position)
        if part.endswith("last word"):
            return f"has a {part} starts with “{p.letter.upper()}”"
        return f"has a {part} starting with “{p.letter.upper()}”"
    if isinstance(p, LabelIs) and p.key != _kind_key(var):
        return f"has {p.key.replace('_', ' ')} {p.value}"
    return None


def _kind_key(var: Var) -> str | None:
    spec = TYPES.get(var.type or "")
    return spec.kind_label if spec else None


def noun(var: Var) -> str:
    """`painter` when the variable's kind label is fixed, else the type noun (`person`)."""
    key = _kind_key(var)
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


def article(word: str) -> str:
    """`a painter` / `an organisation` / `a university`."""
    return indefinite(word)


def pronoun(var: Var) -> str:
    """`who` for people, `that` otherwise."""
    spec = TYPES.get(var.type or "")
    return spec.pronoun if spec else "that"


def join(parts: list[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


class _Renderer:
    def __init__(self, world: World, q: Query):
        self.world, self.q = world, q
        self.order: list[int] = []
        self.tree: dict[int, list[tuple[object, int]]] = {i: [] for i in range(len(q.vars))}
        self.back: dict[int, list[object]] = {i: [] for i in range(len(q.vars))}
        seen = {q.target}
        stack = [q.target]
        used: set[int] = set()
        while stack:  # depth-first spanning tree from the target, in text order
            i = stack.pop()
            self.order.append(i)
            children = []
            for k, e in enumerate(q.edges):
                if k in used or i not in (e.src, e.dst):
                    continue
                other = e.dst if e.src == i else e.src
                if other not in seen:
                    used.add(k)
                    seen.add(other)
                    children.append((e, other))
            self.tree[i] = children
            stack.extend(o for _, o in reversed(children))
        rank = {v: n for n, v in enumerate(self.order)}
        labelled: set[int] = set()
        for k, e in enumerate(q.edges):
            if k not in used:
                later = e.src if rank.get(e.src, -1) > rank.get(e.dst, -1) else e.dst
                earlier = e.dst if later == e.src else e.src
                self.back[later].append(e)
                if q.vars[earlier].anchor() is None:
                    labelled.add(earlier)
        self.letters = {v: "XYZWVU"[n % 6] for n, v in enumerate(sorted(labelled, key=lambda v: rank.get(v, 0)))}

    def name(self, i: int) -> str:
        anchor = self.q.vars[i].anchor()
        return self.world.entity(anchor).name if anchor is not None else self.letters[i]

    def edge_phrase(self, i: int, e, other_text: str) -> str:
        spec = RELATIONS[e.rel]
        return (spec.forward if e.src == i else spec.backward).format(other_text)

    def vps(self, i: int) -> list[str]:
        var = self.q.vars[i]
        out = [s for p in var.preds if (s := pred_phrase(var, p)) is not None]
        for e in self.back[i]:
            other = e.dst if e.src == i else e.src
            out.append(self.edge_phrase(i, e, self.name(other)))
        for e, child in self.tree[i]:
            out.append(self.edge_phrase(i, e, self.np(child)))
        return out

    def head(self, i: int) -> str:
        letter = self.letters.get(i)
        return noun(self.q.vars[i]) + (f" {letter}" if letter else "")

    def np(self, i: int, definite: bool = False) -> str:
        if self.q.vars[i].anchor() is not None:
            return self.name(i)
        vps = self.vps(i)
        text = "the " + self.head(i) if definite else article(self.head(i))
        return f"{text} {pronoun(self.q.vars[i])} {join(vps)}" if vps else text


def render_question(world: World, q: Query, style: int = 0) -> str:
    """The question for `q` in one of `STYLES` phrasings (the same constraints, different wording)."""
    r = _Renderer(world, q)
    t = q.target
    var = q.vars[t]
    if q.count:
        each = "each of whom" if pronoun(var) == "who" else "each of which"
        return f"How many {plural(var)} are there, {each} {join(r.vps(t))}?"
    if q.answer_attr is not None:
        return ATTRIBUTES[q.answer_attr].ask.format(r.np(t, definite=True))
    vps = join(r.vps(t))
    head = r.head(t)
    if style % STYLES == 1:
        return f"Identify the {head} {pronoun(var)} {vps}."
    if style % STYLES == 2:
        ask = "Who is this person?" if var.type == "person" else f"What is the name of this {noun(var)}?"
        return f"There is {article(head)} {pronoun(var)} {vps}. {ask}"
    return f"Which {head} {vps}?"


def answer_text(world: World, q: Query, truth: str) -> str:
    """The answer string: the entity's name, its attribute (a year for dates), or the count."""
    if q.count:
        return str(len(world.match(q)))
    e = world.entity(truth)
    if q.answer_attr is None:
        return e.name
    if q.answer_attr in e.dates:
        return str(date_parts(e.dates[q.answer_attr])[0])
    value = e.numbers[q.answer_attr]
    return str(int(value)) if float(value).is_integer() else str(value)

