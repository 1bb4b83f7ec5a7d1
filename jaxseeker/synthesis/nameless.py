"""The reasoning expert's way into a question that names nothing: the description's clues searched as a searcher
would (`qa.hunt`), the hits screened by their snippets, the candidates left read against every clue.

The searches list the whole profile, then the sharpest date clue a year at a time, a few queries a call, in an
order that does not depend on the answer. Each call's new hits are screened by their snippets (a page's first
sentences show its kind and first dates: a hit whose snippet contradicts a clue is out, quoted); the rest are read a
few pages a visit against every clue a page can show and followed one step on (`ReasonedRun.choose`). Planning
knowledge only chooses which entity to hunt (the one whose searches list it soonest) and gives up on a question
whose searches never list one.
"""

from __future__ import annotations

from collections.abc import Sequence

from jaxseeker.synthesis import reader, thoughts
from jaxseeker.synthesis.acting import Turns, join
from jaxseeker.synthesis.plan import Clue, clues, need, route_from
from jaxseeker.synthesis.qa.hunt import PER_CALL, hunt_start
from jaxseeker.world import LabelIs


class NamelessStart:
    """`find_start` of the reasoning expert (mixed into `reasoned.ReasonedRun`, whose `choose` checks the
    candidates)."""

    def find_start(self) -> Turns:
        """Hunt the variable whose clue searches list it soonest: search the queries a few a call, screen each
        call's new hits by their snippets, check the rest on their pages; (variable, page, thought) or None."""
        q = self.plan.query
        start = hunt_start(q, lambda i, text: self.name(i) in self.know.titles(text))
        if start is None:
            return None
        _, i, queries = start
        hops = route_from(q, i) or ()
        self.hop, self.after = (list(hops[:2]) + [None, None])[:2]
        found = clues(self.plan, i, {})
        wanted = need([c for c in self.checks(i, found) if not isinstance(c.pred, LabelIs)])  # the noun says the kind
        goal = self.goal(hops, 0, self.name(i))
        lead = hunt_plan(self.rng, self.noun(i), wanted)
        shown: set[str] = set()
        for k in range(0, len(queries), PER_CALL):
            results = yield from self.search(lead, queries[k : k + PER_CALL])
            hits = [h for r in results for h in r.hits if h.title not in shown]
            hits = list({h.title: h for h in hits}.values())
            shown.update(h.title for h in hits)
            left, out = screen(hits, found)
            lead = screened(self.rng, self.noun(i), left, out)
            if not left:
                continue
            checked = yield from self.choose([h.title for h in left], self.name(i), found, goal, lead, i)
            if checked is not None:
                return (i, *checked)
            if self.stuck:
                return None
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


def hunt_plan(rng, what: str, wanted: str) -> str:
    """Why the clues are searched as years when nothing is named."""
    return join(
        thoughts.pick(
            rng,
            (
                "No entity is named, so everything hangs on the {w} that {c}.",
                "Nothing is named. The most searchable description is the {w} that {c}.",
            ),
            w=what,
            c=wanted,
        ),
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
