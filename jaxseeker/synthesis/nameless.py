"""The reasoning expert's way in: the named entity whose route the pages list (`replan`), else a described entity
hunted from its clues as a searcher would (`qa.hunt`), the hits screened by their snippets, the candidates left
read against every clue.

A question that names nothing, or whose names lead only through lists that leave out the next entity (a team's
2,000 players), starts from the described entity whose searches list it soonest. The searches list the whole
profile, then the sharpest date clue a year at a time, a few queries a call, in an order that does not depend on
the answer. Each call's new hits are screened by their snippets (a page's first sentences show its kind and first
dates: a hit whose snippet contradicts a clue is out, quoted); the rest are read a few pages a visit against every
clue a page can show and followed on (`ReasonedRun.choose`). Planning knowledge only chooses the way in and gives
up on a question whose searches never list one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from jaxseeker.synthesis import reader, thoughts
from jaxseeker.synthesis.acting import Turns, join
from jaxseeker.synthesis.plan import Clue, Hop, Plan, clues, need, route_from
from jaxseeker.synthesis.qa.hunt import PER_CALL, hunt_queries, hunt_start
from jaxseeker.synthesis.qa.render import plural
from jaxseeker.world import LabelIs

LISTED_QUERIES = 4 * PER_CALL  # the searches of an entity a long list leaves out (`hunt_listed`)
HUNT_CHECKS = 12  # candidates a hunt reads before it gives up (more would leave no room in the context for the route)


class NamelessStart:
    """`find_start` of the reasoning expert (mixed into `reasoned.ReasonedRun`, whose `choose` checks the
    candidates)."""

    def replan(self) -> Plan:
        """The plan from the named entity whose route's pages list each next entity among the fewest others
        (planning knowledge: which way in the pages can show), then the shortest; when no such route is listed all
        the way and the searches of a described entity's clues list it (`nameless`), none: that entity is hunted."""
        q, best = self.plan.query, None
        for i in self.plan.anchors:
            hops = route_from(q, i)
            if hops is None:
                continue
            missing, listed = self.shown(hops)
            score = (missing, len(hops), listed, i)
            if best is None or score < best[0]:
                best = (score, dataclasses.replace(self.plan, start=i, hops=hops))
        if best is not None and best[0][0]:  # no named entity's route is listed all the way: hunt a described one
            start = hunt_start(q, lambda i, text: self.name(i) in self.know.titles(text))
            if start is not None and not self.shown(route_from(q, start[1]) or ())[0]:
                return dataclasses.replace(self.plan, start=None, hops=())
        return self.plan if best is None else best[1]

    def shown(self, hops: Sequence[Hop]) -> tuple[int, int]:
        """(hops whose page does not list the next entity, nor a search of its clues with the page's name, entities
        the route's pages list)."""
        missing = listed = 0
        for hop in hops:
            text = self.know.peek(self.name(hop.src)) or ""
            names, more, _ = reader.related(text, self.name(hop.src), hop.rel, hop.forward)
            missing += self.name(hop.dst) not in names and not (more and self.listed_by_search(hop.dst, hop.src))
            listed += len(names) + more
        return missing, listed

    def find_start(self) -> Turns:
        """Hunt the variable whose clue searches list it soonest (`hunt`); (variable, page, thought) or None."""
        q = self.plan.query
        start = hunt_start(q, lambda i, text: self.name(i) in self.know.titles(text))
        if start is None:
            return None
        _, i, queries = start
        hops = route_from(q, i) or ()
        self.rest = hops
        found = clues(self.plan, i, {})
        lead = hunt_plan(self.rng, self.noun(i), self.wanted(i, found), named=bool(self.plan.anchors))
        checked = yield from self.hunt(i, queries, found, self.goal(hops, 0, self.name(i)), lead)
        return None if checked is None else (i, *checked)

    def hunt_listed(self, var: int, here: str, more: int, lead: str) -> Turns:
        """A page that lists only part of its entities (`… and 950 more`) and not the one wanted: search the
        variable's clues with `here`'s name (`baseball player born 1890 1891 … Pittsburgh Pirates`), as `hunt`, four
        calls at most (a detour inside a route must leave room in the context for the rest); (page, thought) or None
        when those searches never list it."""
        queries = self.listed_queries(var, here)
        if not any(self.name(var) in self.know.titles(text) for text in queries):
            return None
        found = clues(self.plan, var, self.named)
        lead = join(
            lead,
            f"{here}'s page names only some of its {plural(self.plan.query.vars[var])} ({more} more unlisted), and "
            f"not one that {self.wanted(var, found)}. Search for that {self.noun(var)} with {here} in the query.",
        )
        hops = route_from(self.plan.query, var) or ()
        return (yield from self.hunt(var, queries, found, self.goal(hops, 0, self.name(var)), lead))

    def listed_queries(self, var: int, here: str) -> list[str]:
        """The searches of `var`'s clues with the name of the page whose list leaves it out (`hunt_listed`)."""
        return [f"{text} {here}" for text in hunt_queries(self.plan.query.vars[var], LISTED_QUERIES)]

    def listed_by_search(self, var: int, via: int) -> bool:
        """Whether those searches, with the name of `via`'s entity, list `var`'s page (planning knowledge)."""
        return any(self.name(var) in self.know.titles(text) for text in self.listed_queries(var, self.name(via)))

    def wanted(self, var: int, found: list[Clue]) -> str:
        """What a candidate for `var` must show, said without its kind (the noun says it)."""
        return need([c for c in self.checks(var, found) if not isinstance(c.pred, LabelIs)])

    def hunt(self, var: int, queries: list[str], found: list[Clue], goal: str, lead: str) -> Turns:
        """Search the queries a few a call, screen each call's new hits by their snippets and check the rest on
        their pages (`choose`), `HUNT_CHECKS` candidates at most; (page, thought) or None."""
        shown: set[str] = set()
        read = 0
        for k in range(0, len(queries), PER_CALL):
            results = yield from self.search(lead, queries[k : k + PER_CALL])
            hits = [h for r in results for h in r.hits if h.title not in shown]
            hits = list({h.title: h for h in hits}.values())
            shown.update(h.title for h in hits)
            left, out = screen(hits, found)
            if left and read >= HUNT_CHECKS:
                return None
            left = left[: HUNT_CHECKS - read]  # in rank order
            read += len(left)
            lead = screened(self.rng, self.noun(var), left, out)
            if not left:
                continue
            checked = yield from self.choose([h.title for h in left], self.name(var), found, goal, lead, var)
            if checked is not None or self.stuck:
                return checked
            lead = join(self.passed_over, "Search the next years.")
        return None


def screen(hits: Sequence[reader.SeenHit], found: Sequence[Clue]) -> tuple[list, list[tuple[str, str]]]:
    """The hits whose snippets contradict none of the predicate clues (in rank order), and (title, the sentence that
    rules it out) of the others."""
    left, out = [], []
    for hit in hits:
        why = ""
        for clue in found:
            if clue.pred is None:
                continue
            ok, sentence = reader.check_pred(clue.pred, hit.title, hit.snippet)
            if ok is False:
                why = sentence or f"{hit.title} is not one"
                break
        if why:
            out.append((hit.title, why))
        else:
            left.append(hit)
    return left, out


def hunt_plan(rng, what: str, wanted: str, *, named: bool = False) -> str:
    """Why the clues are searched as years: nothing is named, or (`named`) the names lead through long lists."""
    if named:
        why = (
            "Starting from the names would mean reading long lists (a team's players, a region's towns); the {w} "
            "that {c} can be searched directly.",
            "The names lead through long lists. The most searchable description is the {w} that {c}.",
        )
    else:
        why = (
            "No entity is named, so everything hangs on the {w} that {c}.",
            "Nothing is named. The most searchable description is the {w} that {c}.",
        )
    return join(
        thoughts.pick(rng, why, w=what, c=wanted),
        thoughts.pick(
            rng,
            (
                "Pages give exact dates, so search the years: the whole profile at once, then the sharpest clue year "
                "by year, and screen what comes back.",
                "A page states a full date. Search every year the clues allow in one query, then one year at a time "
                "for the sharpest clue, and check the hits.",
            ),
        ),
    )


def screened(rng, what: str, left: Sequence, out: Sequence[tuple[str, str]]) -> str:
    """The thought after a call's hits were screened by their snippets."""
    ruled = ""
    if out:
        title, sentence = out[0]
        rest = [t for t, _ in out[1:]]
        ruled = f"“{sentence}” So {title} is out" + (f", and so are {thoughts.preview(rest)}." if rest else ".")
    if not left:
        return join(ruled, f"No {what} among these results fits; search the next years.")
    names = [h.title for h in left]
    return join(ruled, f"To read next: {thoughts.preview(names, limit=6)}.")
