"""Question frames: how a question opens and asks, over the clauses of `phrasing`.

An entity question asks `Which city …?`, `Name the city that …`, `Born in …, which player …?`, `Among the
cities in …, which one …?`, `I am looking for a city … . What is it called?`, says a long description in
sentences (`A player born in … played for … . This player also … . Who is it?`), or leads with another
variable (`Kos Airport serves a city in … . Which city is it?`) when the answer's noun is the only one of its
kind in the question. An attribute question asks of a name or a description (`In what year was …?`, `Give the
birth year of …`, `A player was born in … . In what year did this player …?`); a count asks `How many … are
there?`. Every frame says every clue of the query exactly once.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from jaxseeker.synthesis.qa.lexicon import relation_forms
from jaxseeker.synthesis.qa.lexicon_attributes import asks
from jaxseeker.synthesis.qa.phrasing import Clue, Phraser, also, capitalise, determined, join, noun, plural, pronoun
from jaxseeker.world import Query, World
from jaxseeker.world.phrases import indefinite

P_LEAD_OTHER = 0.3  # share of entity questions that lead with another variable when one can
LONG = 12  # words of a description too long to stand inside a question (`In what year was … born?`)


def short(n: str) -> str:
    """The noun said again, its last word: `player` for `baseball player` (the noun is said in full before)."""
    return n.split()[-1]


def _ask_entity(rng: random.Random, n: str, person: bool, that: str = "that", natural: bool = False) -> str:
    """The closing question of a description: `Which city is it?`, `Who is that player?` ... (natural: a question
    that says the answer's noun)."""
    n = short(n)
    if natural:
        if person:
            return f"Who is {that} {n}?"
        return rng.choice((f"Which {n} is it?", f"What is {that} {n} called?", f"What is the name of {that} {n}?"))
    if person:
        return rng.choice((f"Who is {that} {n}?", "Who is it?", f"Name {that} {n}."))
    return rng.choice(
        (
            f"Which {n} is it?",
            f"What is {that} {n} called?",
            f"Name {that} {n}.",
            f"What is the name of {that} {n}?",
            f"Which {n} is meant?",
        )
    )


def _lead_other(ph: Phraser, rng: random.Random, ask: Callable[[str], str] | None = None) -> str | None:
    """A question that leads with a variable next to the answer: `Kos Airport serves a city … . Which city is
    it?`; `ask(noun)` closes it instead of `Which city is it?` (None when the answer's noun is shared, so `that
    city` would be unclear)."""
    q, t = ph.q, ph.q.target
    if not ph.unique_noun[t]:
        return None
    natural = ph.natural
    near = sorted({e.dst if e.src == t else e.src for e in q.edges if t in (e.src, e.dst)} - {t})
    if natural:  # a scene led by another unnamed entity asks about a noun the reader has not met
        near = [i for i in near if ph.named(i)]
    if not near:
        return None
    lead = Phraser(ph.world, q, rng, root=rng.choice(near), lenient=ph.lenient, natural=ph.natural)
    root = lead.root
    clues = lead.clues(root)
    n, person = noun(q.vars[t]), q.vars[t].type == "person"
    closing = ask(n) if ask is not None else _ask_entity(rng, n, person, natural=natural)
    if lead.named(root):
        return f"{lead.name(root)} {join(lead.vps(root, clues))}. {closing}"
    return f"{_introduce(lead, root, clues)} {closing}"


def _from_name(ph: Phraser, what: str, plural_: bool = False) -> str | None:
    """`Kos Airport serves which city in Greece?`, `Italy includes how many cities?`: a named neighbour of the answer
    opens, the answer is asked where the relation puts it (`what`: `which`, `how many`) with its other clues as
    modifiers (None without such a neighbour, a form ending in the answer, or modifiers for every other clue)."""
    q, t, rng = ph.q, ph.q.target, ph.rng
    links = [(e, e.dst if e.src == t else e.src) for e in q.edges if t in (e.src, e.dst)]
    named = [(e, o) for e, o in links if o != t and ph.named(o) and q.degree(o) == 1]
    if not named:
        return None
    e, lead = rng.choice(named)
    forms = [f for f in relation_forms(e.rel, e.src == lead).vp if f.endswith("{x}")]
    rest = [c for c in ph.clues(t) if c.edge is not e]
    mods = ph.modifiers(t, rest, plural_=plural_, compact=True) if rest else ""
    if not forms or mods is None:
        return None
    n = plural(q.vars[t]) if plural_ else noun(q.vars[t])
    asked = " ".join(w for w in (what, n, mods) if w)
    return f"{ph.name(lead)} {rng.choice(forms).format(x=asked)}?"


def _subject(ph: Phraser, i: int, clues: list[Clue]) -> tuple[str, list[Clue]]:
    """(`a baseball player born in the 1960s`, the clues left for the verb phrases): an unnamed variable as the
    subject of a sentence, with one light clue in the noun phrase when one has a modifier."""
    light = [c for c in clues if not ph.heavy(c)]
    if light and len(clues) >= 2 and ph.rng.random() < 0.7:
        mod = ph.say(i, light[0], "mod", compact=True)
        if mod is not None:
            return f"{ph.head(i)} {mod}", [c for c in clues if c is not light[0]]
    return ph.head(i), clues


def _introduce(ph: Phraser, i: int, clues: list[Clue]) -> str:
    """The sentence that introduces unnamed variable `i` by `clues` (at least one): `A player born in … played for
    … .`, `There is a player who …`, `Consider a city that …`, `Born in …, a player …`, `One city …` ..."""
    rng, var = ph.rng, ph.q.vars[i]
    n, rel = noun(var), pronoun(var)
    way = rng.randrange(5)  # 0, 1: a clue opens; 2, 3: a phrase opens; 4: the noun opens
    if way <= 1 and len(clues) >= 2:
        order = list(range(len(clues)))
        rng.shuffle(order)
        for k in order:
            opening = ph.say(i, clues[k], "lead", compact=True)
            if opening is not None:
                rest = clues[:k] + clues[k + 1 :]
                return f"{opening}, {indefinite(n)} {join(ph.vps(i, rest))}."
    if way <= 3 and ph.natural:
        start = rng.choice(("There is", "We know of", "Somewhere there is", "Here is", "There exists"))
        return f"{start} {indefinite(n)} {rel} {join(ph.vps(i, clues))}."
    if way <= 3:
        start = rng.choice(
            (
                "There is",
                "Consider",
                "Picture",
                "Imagine",
                "Take",
                "We know of",
                "Think of",
                "Somewhere there is",
                "Suppose there is",
                "Here is",
            )
        )
        return f"{start} {indefinite(n)} {rel} {join(ph.vps(i, clues))}."
    subject, rest = _subject(ph, i, clues)
    if rest == clues and rng.random() < 0.5:
        subject = rng.choice(("One", "Some", "A certain")) + f" {n}"
    if not rest:
        return f"There is {subject}."
    return f"{capitalise(subject)} {join(ph.vps(i, rest))}."


def declaration(ph: Phraser, clues: list[Clue]) -> str:
    """SailorFog's form: the answer described in one to three sentences, then the question (`A player born in …
    played for … . This player also … . Who is this player?`): each nested description gets its own sentence, the
    light clues go with the first, and two or more light clues alone are said in two sentences."""
    t, rng = ph.q.target, ph.rng
    var = ph.q.vars[t]
    n, person = noun(var), var.type == "person"
    light, heavy = [c for c in clues if not ph.heavy(c)], [c for c in clues if ph.heavy(c)]
    if heavy:
        groups = [light + heavy[:1]] + [[c] for c in heavy[1:]]
    else:
        cut = (len(light) + 1) // 2 if len(light) >= 2 and rng.random() < 0.5 else len(light)
        groups = [light[:cut], light[cut:]]
    groups = [g for g in groups if g]
    groups = groups[:2] + ([[c for g in groups[2:] for c in g]] if len(groups) > 2 else [])  # three at most
    sentences = [_introduce(ph, t, groups[0])]
    for g in groups[1:]:
        again = rng.choice((f"This {short(n)}", f"The same {short(n)}") + (("It",) if not person else ()))
        sentences.append(f"{again} {also(join(ph.vps(t, g)))}.")
    return " ".join(sentences + [_ask_entity(rng, n, person, "this", natural=True)])


def entity_question(
    world: World,
    q: Query,
    rng: random.Random,
    *,
    lenient: bool = False,
    natural: bool = False,
    declarative: bool = False,
) -> str:
    """A question whose answer is the target entity, in one of the frames above; `declarative`: a description in
    sentences that ends in the question (`declaration`, or a named neighbour's sentence leading)."""
    ph = Phraser(world, q, rng, lenient=lenient, natural=natural or declarative)
    if declarative:
        clues = ph.clues(q.target)
        if not clues:  # nothing to say of the answer but its noun: a lead sentence says the rest
            return _lead_other(ph, rng) or f"Which {noun(q.vars[q.target])} is it?"
        return (rng.random() < P_LEAD_OTHER and _lead_other(ph, rng)) or declaration(ph, clues)
    if rng.random() < P_LEAD_OTHER:
        found = _lead_other(ph, rng)
        if found is not None:
            return found
    t = q.target
    var = q.vars[t]
    n, person, rel = noun(var), var.type == "person", pronoun(var)
    who = person and n == "person"  # `Who …?` says no noun: only when the noun is no clue (no occupation)
    clues = ph.clues(t)

    def vps() -> str:
        return join(ph.vps(t, clues))

    # (weight, frame): a frame that opens with the answer's noun or a name reads differently for every noun or
    # name, so it weighs thrice a frame whose opening is always the same words
    frames: list[tuple[int, Callable[[], str | None]]] = [
        (3, f)
        for f in (
            lambda: f"Which {n} {vps()}?",
            lambda: f"What {n} {vps()}?",
            lambda: f"The {n} I have in mind {vps()}. {_ask_entity(rng, n, person, 'this', ph.natural)}",
            lambda: _opening(ph, clues, "lead"),
            lambda: _split(ph, clues),
            lambda: _from_name(ph, "which"),
            lambda: f"Who {vps()}?" if who else None,
        )
    ] + [
        (1, f)
        for f in (
            lambda: f"Name the {n} {rel} {vps()}.",
            lambda: f"Identify the {n} {rel} {vps()}.",
            lambda: f"Can you name {ph.np(t, definite=True, clues=clues)}?",
            lambda: f"What is the name of {ph.np(t, definite=True, clues=clues)}?",
            lambda: f"Find {ph.np(t, definite=True, clues=clues)}.",
            lambda: f"Tell me which {n} {vps()}.",
            lambda: f"Do you know which {n} {vps()}?",
            lambda: f"Could you identify the {n} {rel} {vps()}?",
            lambda: f"Please name the {n} {rel} {vps()}.",
            lambda: f"Which is the {n} {rel} {vps()}?",
            lambda: f"Guess the {n}: it {vps()}." if not person else f"Guess the {n}: this person {vps()}.",
            lambda: f"My question is about {ph.np(t, clues=clues)}. {_ask_entity(rng, n, person, 'this', ph.natural)}",
            lambda: f"What do we call the {n} {rel} {vps()}?" if not person else None,
            lambda: f"I am looking for {ph.np(t, clues=clues)}. {_ask_entity(rng, n, person, 'this', ph.natural)}",
            lambda: f"There is {ph.np(t, clues=clues)}. {_ask_entity(rng, n, person, 'this', ph.natural)}",
            lambda: _opening(ph, clues, "among"),
        )
    ]
    if sum(ph.heavy(c) for c in clues) >= 2:  # two nested descriptions read best in sentences of their own
        frames = [(1, lambda: _split(ph, clues))] * 3
    drafts = []
    for _, frame in sorted(frames, key=lambda wf: -(rng.random() ** (1 / wf[0]))):  # a weighted random order
        text = frame()
        if text is not None:
            drafts.append(text)
        if len(drafts) == 3:
            break
    # of three frames the shortest: a long description is not made longer still by a wordy frame
    return min(drafts, key=lambda t: len(t.split())) if drafts else f"Which {n} {vps()}?"


def _opening(ph: Phraser, clues: list[Clue], how: str) -> str | None:
    """`Born in …, which player …?` (`lead`) or `Among the cities in …, which one …?` (`among`): one clue opens,
    the others follow (None without a clue that can open or without others to follow)."""
    if len(clues) < 2:
        return None
    t, rng = ph.q.target, ph.rng
    var = ph.q.vars[t]
    n = noun(var)
    order = list(range(len(clues)))
    rng.shuffle(order)
    for k in order:
        c, rest = clues[k], clues[:k] + clues[k + 1 :]
        if how == "lead":
            opening = ph.say(t, c, "lead", compact=True)
            if opening is not None:
                ask = "who" if n == "person" and rng.random() < 0.5 else rng.choice(("which", "what")) + f" {n}"
                return f"{opening}, {ask} {join(ph.vps(t, rest))}?"
        elif not ph.heavy(c) and not determined(ph.q, t, c):
            mod = ph.say(t, c, "mod", plural=True, compact=True)
            if mod is not None:
                opening = rng.choice(("Among the", "Of all the", "Of the"))
                return f"{opening} {plural(var)} {mod}, which one {join(ph.vps(t, rest))}?"
    return None


def _split(ph: Phraser, clues: list[Clue]) -> str | None:
    """A description in sentences, one nested description each: `A player born in … played for … . This player
    also … . Who is it?` (None for fewer than three clues and one nested description)."""
    t, rng = ph.q.target, ph.rng
    heavy = [c for c in clues if ph.heavy(c)]
    if len(clues) < 3 and len(heavy) < 2:
        return None
    var = ph.q.vars[t]
    n, person = noun(var), var.type == "person"
    light = [c for c in clues if not ph.heavy(c)]
    groups = [light + heavy[:1]] + [[c] for c in heavy[1:]] if heavy else [light[:2], light[2:]]
    groups = [g for g in groups if g]
    if len(groups) < 2:
        return None
    sentences = [_introduce(ph, t, groups[0])]
    for g in groups[1:]:
        again = rng.choice((f"This {short(n)}", f"The same {short(n)}") + (("It",) if not person else ()))
        sentences.append(f"{again} {also(join(ph.vps(t, g)))}.")
    return " ".join(sentences + [_ask_entity(rng, n, person, "this", ph.natural)])


def attribute_question(
    world: World, q: Query, rng: random.Random, *, lenient: bool = False, natural: bool = False
) -> str:
    """A question for an attribute of the target: `In what year was X born?`, `Give the birth year of …`, `A
    player was born in … . In what year did this player …?`"""
    ph = Phraser(world, q, rng, lenient=lenient, natural=natural)
    t = q.target
    options = asks(q.answer_attr)
    if ph.named(t):
        first = [a for a in options if a.startswith("{x}")]
        return capitalise(rng.choice(first if first and rng.random() < 0.3 else options).format(x=ph.name(t)))
    n = noun(q.vars[t])
    if rng.random() < P_LEAD_OTHER:
        found = _lead_other(ph, rng, lambda n: capitalise(rng.choice(options).format(x=f"that {short(n)}")))
        if found is not None:
            return found
    clues = ph.clues(t)
    this = capitalise(rng.choice(options).format(x=f"this {short(n)}"))
    if clues and rng.random() < 0.3:
        return f"{_introduce(ph, t, clues)} {this}"
    described = ph.np(t, definite=True, clues=clues)
    if rng.random() < 0.15:
        return f"{rng.choice(('Consider', 'Think of', 'Take'))} {described}. {this}"
    if len(described.split()) > LONG:  # a long description only at either end of the question
        options = tuple(a for a in options if a.startswith("{x}") or a.endswith(("{x}?", "{x}."))) or options
    return capitalise(rng.choice(options).format(x=described))


def count_question(world: World, q: Query, rng: random.Random, *, lenient: bool = False, natural: bool = False) -> str:
    """`How many airports serving X are there?` and its variants."""
    ph = Phraser(world, q, rng, lenient=lenient, natural=natural)
    if rng.random() < 0.3:
        found = _from_name(ph, "how many", plural_=True)
        if found is not None:
            return found
    group = ph.np(q.target, plural_=True)
    return rng.choice(
        (
            f"How many {group} are there?",
            f"What is the number of {group}?",
            f"Give the number of {group}.",
            f"Count the {group}.",
            f"In total, how many {group} are there?",
            f"Tell me how many {group} there are.",
            f"Do you know how many {group} there are?",
            f"Can you count the {group}?",
            f"Find the number of {group}.",
            f"Determine how many {group} exist.",
        )
    )
