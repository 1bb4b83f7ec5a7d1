"""The reasoning expert's search over candidates: a candidate that fits is followed on, and when a later page
contradicts the chain it starts, the expert goes back and tries the next candidate that fits.

`follow` reads a candidate's next entities (a visit or two), checks each against its clues, and goes on from each
that fits, `depth` steps at most, through the route's next hop first and then every edge to a variable not found
yet (the clues off the route too). A chain is ruled out only when every entity a page lists for a step was read
and none fits (the sentence that rules one out is quoted). A step whose page lists more than `WIDE` entities rules
nothing out; one whose page cuts its list short (`… and 1186 more`) is searched once with the page's name in each
query (`search_list`), and a hit that fits confirms it. A candidate the pages can neither confirm nor rule out is
set aside (`ReasonedRun.choose`). Planning knowledge only says how far to follow: the planned entity one step (the
route then goes on from it; at the route's end, every clue left), another candidate as far as the clues go, at most
`MAX_BACKTRACKS` an episode and while the context has room (`ROOM`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from jaxseeker.synthesis import reader, thoughts
from jaxseeker.synthesis.acting import Turns, join
from jaxseeker.synthesis.nameless import screen
from jaxseeker.synthesis.plan import Clue, Hop, clues, need
from jaxseeker.synthesis.qa.hunt import PER_CALL
from jaxseeker.synthesis.qa.render import article
from jaxseeker.world import LabelIs
from jaxseeker.world.schema import RELATIONS

MAX_BACKTRACKS = 10  # candidates followed to a contradiction an episode
FOLLOW_CALLS = 4  # tool calls one candidate is followed for before it counts as not ruled out
ROOM = 50_000  # characters of context read before a candidate that is not the planned entity is no more followed
WIDE = 12  # entities a step's page may list for the step to rule a chain out (three visits of `batch` pages)


class Backtracking:
    """`follow` and the thoughts of going back (mixed into `reasoned.ReasonedRun`, whose `checks`, `verdict` and
    `read_many` it uses)."""

    rest: tuple[Hop, ...] = ()  # the route's hops from the variable whose candidates are being checked
    calls = 0  # tool calls made so far
    backtracks = 0  # candidates followed until a page ruled them out
    confirmed: frozenset[str] = frozenset()  # candidates `follow` confirmed on every clue
    read = 0  # characters of the context so far: observations and turns

    def may_follow(self) -> bool:
        """Whether the episode may still follow a candidate that is not the planned entity (the context's room:
        the rest of the route must still fit)."""
        return self.backtracks < MAX_BACKTRACKS and self.read < ROOM

    @property
    def hop(self) -> Hop | None:
        """The hop after the one being followed (a candidate must lead on to it)."""
        return self.rest[0] if self.rest else None

    def follow(
        self, name: str, var: int, page: reader.SeenPage, names: Mapping[int, str], depth: int, lead: str
    ) -> Turns:
        """Whether candidate `name` for `var` (its page read) fits the clues `depth` hops on: the route's next hop
        only at depth 1 (the route goes on from there), every edge to a variable not found yet deeper (the clues off
        the route too); (True, False when the pages rule it out, None when they cannot tell; the thought not said
        yet)."""
        known = {**names, var: name}
        start, ahead, result = self.calls, self.onward(var, known), True
        hops = [hop for hop in self.branches(var, known) if depth > 1 or hop == ahead]
        hops.sort(key=lambda h: h != ahead)  # the route's way first
        for hop in hops:
            if self.calls - start >= FOLLOW_CALLS:
                return None, lead  # followed far enough: nothing ruled it out
            ok, lead = yield from self.branch(name, hop, page, known, depth, lead)
            if ok is False:
                return False, lead
            result = result if ok else None
        return result, lead

    def onward(self, var: int, known: Mapping[int, str]) -> Hop | None:
        """The route's hop from `var` to a variable not in `known` (None off the route or at its end)."""
        return next((h for h in self.rest + self.plan.hops if h.src == var and h.dst not in known), None)

    def settle(self) -> Turns:
        """Before the answer, with room: the clues still open through entities not found yet, followed from each
        found entity whose page is read (`follow`), and the entities that fit taken as found; (False when a page
        rules one out, the thought not said yet)."""
        lead = ""
        for var, name in list(self.named.items()):
            if not self.ledger.open() or self.read >= ROOM:
                break
            if name not in self.pages or name in self.confirmed or not self.branches(var, self.named):
                continue
            self.settled = {}
            ok, lead = yield from self.follow(name, var, self.pages[name], self.named, len(self.plan.query.vars), lead)
            if ok is False:
                return False, lead
            for v, n in self.settled.items():
                self.named.setdefault(v, n)
        return True, lead

    def prefetch(self, fits: Sequence[str], var: int, pages: Mapping[str, reader.SeenPage], lead: str) -> Turns:
        """Several candidates that fit, to be followed: the entities their pages list one step on, read in one visit
        (`follow` then reads them from memory); the thought not said yet."""
        if len(fits) < 2:
            return lead
        ahead: list[str] = []
        for n in fits:
            known = {**self.named, var: n}
            hop = self.onward(var, known) or next(iter(self.branches(var, known)), None)
            listed, more = ([], 1) if hop is None else self.linked(pages[n], n, hop)
            if not more and len(listed) <= WIDE:
                ahead += [x for x in listed if x not in self.pages]
        ahead = list(dict.fromkeys(ahead))[: self.cfg.batch]
        if len(ahead) < 2:
            return lead
        lead = join(lead, f"{thoughts.preview(fits)} fit so far. Read what each leads to at once.")
        _, lead = yield from self.read_many(ahead, f"what each of {thoughts.preview(fits)} leads to", lead)
        return lead

    def linked(self, page: reader.SeenPage, name: str, hop: Hop) -> tuple[list[str], int]:
        """The entities `name`'s page links along `hop`, and how many more it leaves unnamed; a year is a date the
        page states in the same words (`Barium was discovered in 1808.`), not an entity."""
        listed, more, _ = reader.related(page.text, name, hop.rel, hop.forward)
        return [n for n in listed if not n.isdigit()], more

    def off_route(self, var: int, found: Sequence[Clue]) -> list[Clue]:
        """That a candidate for `var` links to some entity of each variable off the route not found yet (`is served by
        an airport`), for the edges no clue of `found` tests already."""
        onward, out = self.onward(var, self.named), []
        for hop in self.branches(var, self.named):
            if hop != onward and not any((c.rel, c.forward) == (hop.rel, hop.forward) for c in [*found, *out]):
                spec = RELATIONS[hop.rel]
                phrase = (spec.forward if hop.forward else spec.backward).format(article(self.noun(hop.dst)))
                out.append(Clue(phrase, rel=hop.rel, forward=hop.forward))
        return out

    def branches(self, var: int, known: Mapping[int, str]) -> list[Hop]:
        """The edges from `var` to the variables not in `known`, as hops."""
        q = self.plan.query
        ends = [(e, a, b) for e in q.edges for a, b in ((e.src, e.dst), (e.dst, e.src))]
        return [Hop(e.rel, a == e.src, a, b) for e, a, b in ends if a == var and b not in known]

    def branch(
        self, name: str, hop: Hop, page: reader.SeenPage, known: Mapping[int, str], depth: int, lead: str
    ) -> Turns:
        """Whether some entity `name`'s page links along `hop` fits its clues and, `depth - 1` hops on, its own
        (`follow`): (True, or False when every one listed was read and ruled out; the thought not said yet)."""
        listed, more = self.linked(page, name, hop)
        found = self.checks(hop.dst, clues(self.plan, hop.dst, known, skip=name), self.onward(hop.dst, known))
        spec, noun = RELATIONS[hop.rel], self.noun(hop.dst)
        if not listed:  # a whole page that names none rules the candidate out; the route's next hop needs one
            if hop == self.hop or "[…" in page.text:
                return (False if hop == self.hop else None), lead
            none = (spec.forward if hop.forward else spec.backward).format(f"any {noun}")
            return False, join(lead, f"{name}'s page does not say {name} {none}.")
        if not found and (depth <= 1 or not self.branches(hop.dst, {**known, hop.dst: ""})):
            return True, lead
        told = need([c for c in found if not isinstance(c.pred, LabelIs)])  # the noun says the kind
        link = (spec.forward if hop.forward else spec.backward).format(
            article(noun) + (f" that {told}" if told else "")
        )
        lead = join(lead, f"{name} fits so far. If it is the one, {name} {link}.")
        if more or len(listed) > WIDE:  # a list not shown whole, or too long to read: its searches may still find one
            if not more:
                return None, lead
            return (yield from self.search_list(name, hop, known, depth, lead))
        wanted, reason, unsure = need(found), "", False
        for start in range(0, len(listed), self.cfg.batch):
            group = listed[start : start + self.cfg.batch]
            pages, lead = yield from self.read_many(group, f"which one {wanted}", lead)
            for n in group:
                if n not in pages:
                    return None, lead  # a page not shown rules nothing out
                ok, sentences, phrase = self.verdict(pages[n].text, n, found)
                if ok is True:
                    ok, lead = yield from self.follow(n, hop.dst, pages[n], known, depth - 1, lead)
                    if ok:
                        self.settled[hop.dst] = n
                        return True, lead
                    unsure = unsure or ok is None
                    lead = join(lead, f"So {n} is out." if ok is False else "")
                elif not reason:
                    shown = f"“{sentences[0]}” So {n}" if sentences else f"{n}'s page does not show it, so {n}"
                    reason = f"{shown} does not fit: the one I need {phrase}."
        if unsure:
            return None, lead
        return False, join(lead, reason, f"None of {thoughts.preview(listed)} fits." if len(listed) > 1 else "")

    def search_list(self, name: str, hop: Hop, known: Mapping[int, str], depth: int, lead: str) -> Turns:
        """`name`'s page lists only part of the entities along `hop`: one search of the clues of the one wanted with
        `name` in each query (`hunt_listed`), the hits screened by their snippets and the rest read; (True when one
        fits, else None: a search that lists none rules nothing out; the thought not said yet)."""
        queries = self.listed_queries(hop.dst, name)[:PER_CALL]
        if not queries:
            return None, lead
        found = self.checks(hop.dst, clues(self.plan, hop.dst, known), self.onward(hop.dst, known))
        lead = join(lead, f"{name}'s page names only some of them: search for that {self.noun(hop.dst)}.")
        results = yield from self.search(lead, queries)
        hits = list({h.title: h for r in results for h in r.hits if h.title not in known.values()}.values())
        left, _ = screen(hits, found)
        group = [h.title for h in left[: self.cfg.batch]]
        if not group:
            return None, f"No hit fits, which does not rule {name} out."
        pages, lead = yield from self.read_many(group, f"which one {need(found)}", "")
        for n in group:
            if n in pages and self.verdict(pages[n].text, n, found)[0] is True:
                ok, lead = yield from self.follow(n, hop.dst, pages[n], known, depth - 1, lead)
                if ok:
                    self.settled[hop.dst] = n
                    return True, join(lead, f"{n} fits, linked to {name}.")
        return None, join(lead, f"None of {thoughts.preview(group)} fits, which does not rule {name} out.")

    def set_aside(self, name: str) -> str:
        """The thought on a candidate that fits but that the pages can neither confirm nor rule out."""
        return f"The pages can neither confirm nor rule out {name}; set it aside and check the others."

    def backtrack(self, name: str) -> str:
        """The thought of going back once the chain a candidate started is ruled out."""
        return thoughts.pick(
            self.rng,
            (
                "{n} looked right but leads nowhere. Back to the candidates that fit; try the next one.",
                "That rules {n} out after all. Go back to the list and take the next candidate.",
            ),
            n=name,
        )
