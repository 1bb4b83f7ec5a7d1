"""The reasoning expert: the embedded expert's route, with thoughts that weigh evidence and candidates it checks.

`ReasonedRun` follows the same plan as `expert.ExpertRun` but
- every thought after an observation quotes the observation's sentence that bears on the next step, names the clue
  the next call tests and the clues still unchecked (`ledger.Ledger`), then says the call;
- it starts from the named entity whose route's pages list each next entity, else from a described entity its
  searches find (`nameless`: planning knowledge, as the route is);
- a list of candidates is checked in the order the page lists it, several pages a visit, against every clue a
  page can show (its own facts, its links to entities already found, that it leads on to the next hop and to the
  entities off the route, and a link to one of the entities a named one's page lists, read first: `side_clues`); a
  candidate that fits is followed on (`backtrack.Backtracking.follow`): when a later page rules it out (quoted),
  the expert goes back and tries the next one; one the pages cannot settle is set aside, and the answer is a
  candidate confirmed on every clue. Nothing is picked unseen: when the clues seen do not single one out, the run
  gives up and the trajectory is dropped;
- before the answer, the clues still unchecked are read off the pages seen, or a few more visits;
- the episode ends before the context runs out (`CONTEXT`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from jaxseeker.synthesis import reader, thoughts
from jaxseeker.synthesis.acting import Turns, join, turn_text
from jaxseeker.synthesis.backtrack import ROOM, Backtracking
from jaxseeker.synthesis.expert import ExpertRun
from jaxseeker.synthesis.ledger import NEXT, UNCHECKED, Ledger, clue_key, edge_key
from jaxseeker.synthesis.nameless import NamelessStart
from jaxseeker.synthesis.plan import Clue, Hop, hop_goal, need
from jaxseeker.synthesis.qa.render import article, noun, plural
from jaxseeker.tools.extract import split_sentences
from jaxseeker.world import Edge
from jaxseeker.world.schema import RELATIONS

CONTEXT = 55_000  # characters of context an episode may fill (a token is about two characters; 32,768 tokens at most)


class OutOfRoom(Exception):
    """The context read so far leaves no room for another observation and the answer."""


_KIND = re.compile(r"\A.+ is an? [\w ]+\.\Z")
_LAYOUT = re.compile(r"^(\[\d+\] |https?://|Page: |URL: |Goal: |Evidence in page:|Links on this page:|- |Search res)")


def evidence(bodies: Sequence[str], target: str, words: str) -> str:
    """The observation's sentence that bears most on the next step: one that names `target` and shares the most
    words with `words` (the clue); a "No results" line when that is all there is; "" when nothing is quotable."""
    lines = [ln.strip() for body in bodies for ln in body.splitlines()]
    empty = next((ln for ln in lines if ln.startswith("No results for")), "")
    text = " ".join(ln for ln in lines if ln and not _LAYOUT.match(ln))
    sentences = [s for s in split_sentences(text) if s.endswith(".") and "…" not in s]
    if not sentences:
        return empty
    keys = {w.lower() for w in re.findall(r"\w{4,}", words)}

    def score(s: str) -> int:  # the target named, the clue's words; a bare `X is a city.` says least
        named = 2 * (bool(target) and target in s) - bool(_KIND.match(s))
        return named + len(keys & {w.lower() for w in re.findall(r"\w{4,}", s)})

    return max(sentences, key=score)


class ReasonedRun(NamelessStart, Backtracking, ExpertRun):
    """One episode of the reasoning expert (see the module docstring)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.plan = self.replan()
        self.ledger = Ledger(self.plan, self.named)
        self.seen: list[str] | None = None  # the last observation's tool responses
        self.focus: list[tuple] = []  # ledger keys of the clues the next call tests (empty: the route's next)
        self.testing = ""  # the clue the candidate checks test, when the ledger has no entry of its own for it
        self.side: set[tuple] = set()  # ledger keys of the clues the side lists (`side_clues`) test
        self.stuck = ""  # why the run cannot go on, when a first fit is not the planned entity
        self.passed_over = ""  # the thought on the last candidates `choose` ruled out, when none fitted
        self.biggest = 0  # characters of the longest call and observation so far
        self.settled: dict[int, str] = {}  # variable → the entity `follow` found fitting on the way

    # ---- thoughts -------------------------------------------------------------------------------------------

    def reason(self, action: str, target: str, *, final: bool = False) -> str:
        """A thought: the quoted evidence of the last observation, the clue the next call tests and what stays
        unchecked (at the end: what the pages left unchecked), then the action."""
        entries = [e for e in self.ledger.all if e.key not in self.ledger.done]
        entries.sort(key=lambda e: e.key not in self.focus)
        left = [e.text for e in entries]
        if self.testing and not final:
            left = [self.testing, *(t for t in left if t != self.testing)]
        quote = ""
        if self.seen is not None and "“" not in action:
            sentence = evidence(self.seen, target, left[0] if left else action)
            searched = any(b.lstrip().startswith(("Search results", "No results")) for b in self.seen)
            quote = f"{'The results say' if searched else 'The page says'}: “{sentence}”" if sentence else ""
        if not left:
            return join(quote, action, UNCHECKED[2])
        if final:
            return join(quote, action, f"{thoughts.pick(self.rng, UNCHECKED[:2])} {'; '.join(left)}.")
        rest = f"{thoughts.pick(self.rng, UNCHECKED[:2])} {'; '.join(left[1:])}." if left[1:] else UNCHECKED[2]
        return join(quote, f"{thoughts.pick(self.rng, NEXT)} {left[0]}.", rest, action)

    def program(self) -> Turns:
        """The episode (`ExpertRun.program`), ended with an honest non-answer when the context has no room left."""
        try:
            return (yield from super().program())
        except OutOfRoom:
            return (yield from self.give_up("the answer within the room the context leaves"))

    def act(self, thought: str, tool: str, arguments: dict, *, trained: bool = True) -> Turns:
        """One tool call whose thought reasons (`reason`); remembers the observation for the next thought. Raises
        `OutOfRoom` when the context read so far leaves no room for the call's observation (`expected`)."""
        if self.read + self.expected(tool, arguments) > CONTEXT:
            raise OutOfRoom
        target = arguments.get("query", [""])[0] if tool == "search" else ""
        if tool == "visit":
            by_url = {u: t for t, u in self.urls.items()}
            target = by_url.get(arguments["url"][0], "")
        said = self.reason(thought, target)
        bodies = yield from super().act(said, tool, arguments, trained=trained)
        self.seen, self.calls = bodies, self.calls + 1
        size = len(said) + len(json.dumps(arguments)) + sum(map(len, bodies))
        self.read, self.biggest = self.read + size, max(self.biggest, size)
        return bodies

    def open(self, name: str, goal: str, lead: str, **how) -> Turns:
        """The page of `name` (`Actor.open`); when its searches do not list it, the link to it a page read before
        showed."""
        page = yield from super().open(name, goal, lead, **how)
        if page is None and name in self.urls and name not in self.pages:
            said = f"The searches do not list {name}'s page, but a page read before links to it: follow that link."
            pages = yield from self.visit(said, [self.urls[name]], goal)
            page = next((p for p in pages if p.title == name), None)
        return page

    def expected(self, tool: str, arguments: dict) -> int:
        """About how many characters a call's observation adds: a visit its pages' (planning knowledge: their texts,
        each cut to the tool's 8,000) and a line for each of their links, else as many as the longest so far."""
        if tool != "visit":
            return self.biggest
        by_url = {u: t for t, u in self.urls.items()}
        texts = [self.know.peek(by_url.get(u, "")) or "" for u in arguments["url"]]
        links = [min(20, t.count(", ") + t.count(". ")) for t in texts]  # the tool lists 20 links a page at most
        return sum(min(len(t), 8000) + 70 * n + 250 for t, n in zip(texts, links, strict=True))

    def finish(self, thought: str, answer: str) -> Turns:
        """The answer, after the clues left unchecked are checked on the pages of the entities found (a visit for
        one whose page is not read yet) and what the pages left unchecked."""
        if self.plan.query.answer_attr is None and not self.plan.query.count:
            self.named[self.plan.query.target] = answer
        said = self.cross_check()
        for _ in range(self.cfg.verify_visits):
            unread = self.to_read()
            if not unread:
                break
            self.testing = ""
            page = yield from self.open(unread[0], f"what {unread[0]}'s page says of {self.ledger.open()[0]}", "")
            if page is None:
                break
            said += self.cross_check()
        ok, lead = yield from self.settle()
        if not ok:
            self.stuck = f"{answer} ruled out by a page read before the answer"
            return (yield from self.give_up(lead))
        said += self.cross_check()
        thought = join(lead, thought)
        quotes = " ".join(f"“{s}”" for s in dict.fromkeys(said))
        checked = "That settles the rest of the clues." if quotes else ""
        return (yield from super().finish(self.reason(join(quotes, checked, thought), answer, final=True), answer))

    def found(self) -> dict[int, reader.SeenPage]:
        """The pages read of the entities found so far, by variable."""
        return {i: self.pages[n] for i, n in self.named.items() if n in self.pages}

    def to_read(self) -> list[str]:
        """Entities found whose pages would show an unchecked clue but have not been read."""
        q, names = self.plan.query, self.named
        wanted = []
        for key in (e.key for e in self.ledger.all if e.key not in self.ledger.done):
            ends = (q.edges[key[1]].src, q.edges[key[1]].dst) if key[0] == "edge" else (key[1],)
            wanted += [names[i] for i in ends if i in names and names[i] not in self.pages]
        return list(dict.fromkeys(wanted))

    def cross_check(self) -> list[str]:
        """Tick the open clues the pages read already show, reading an unnamed entity's name off a found one's
        page when the page gives one; the sentences that showed them."""
        q, said, changed = self.plan.query, [], True
        while changed:
            changed = False
            pages = self.found()
            for entry in [e for e in self.ledger.all if e.key not in self.ledger.done]:
                if entry.key[0] == "pred":
                    _, i, j = entry.key
                    if i in pages:
                        ok, sentence = reader.check_pred(q.vars[i].preds[j], self.named[i], pages[i].text)
                        if ok and sentence:
                            self.ledger.tick(entry.key)
                            said.append(sentence)
                            changed = True
                    continue
                e = q.edges[entry.key[1]]
                for a, b, forward in ((e.src, e.dst, True), (e.dst, e.src, False)):
                    if a not in pages:
                        continue
                    names, _, sentences = reader.related(pages[a].text, self.named[a], e.rel, forward)
                    if b not in self.named and len(names) == 1:
                        self.named[b] = names[0]
                    if self.named.get(b) in names:
                        self.ledger.tick(entry.key)
                        said.append(next(s for s in sentences if self.named[b] in s))
                        changed = True
                        break
        return said

    def give_up(self, what: str) -> Turns:
        """End without the fact: the evidence last seen, then the honest non-answer."""
        yield turn_text(self.reason(thoughts.give_up(self.rng, self.stuck or what), "", final=True), answer="unknown")
        return None

    # ---- the route ------------------------------------------------------------------------------------------

    def step(self, hops: Sequence[Hop], k: int, page: reader.SeenPage, here: str, prev: str) -> Turns:
        """Hop `k`, with the entity reached so far known for the clues of the next (`ExpertRun.step`)."""
        self.named[hops[k].src] = here
        self.rest = tuple(hops[k + 1 :])
        hop, truth, last = hops[k], self.name(hops[k].dst), k == len(hops) - 1
        names, more, _ = reader.related(page.text, here, hop.rel, hop.forward)
        if truth in names:
            self.ledger.tick(edge_key(self.plan, hop))
        elif more and not (last and self.plan.query.count):  # a long list cut short: search the clues instead
            checked = yield from self.hunt_listed(hop.dst, here, more, prev)
            if checked is not None:
                self.ledger.tick(edge_key(self.plan, hop))
                next_page, lead = checked
                if last and self.plan.query.answer_attr is None:
                    return None, (yield from self.finish(join(lead, f"The answer is {truth}."), truth)), ""
                return next_page, truth, lead
        return (yield from super().step(hops, k, page, here, prev))

    def conclude(self, page: reader.SeenPage, here: str, lead: str) -> Turns:
        """Read the answer attribute on the last page (`ExpertRun.conclude`)."""
        self.rest = ()
        return (yield from super().conclude(page, here, lead))

    # ---- candidates -----------------------------------------------------------------------------------------

    def checks(self, var: int, found: list[Clue], hop: Hop | None = None) -> list[Clue]:
        """What a candidate for `var` must show: the clues, and (mid-route) a link on to the next hop."""
        hop = self.hop if hop is None else hop
        if hop is None or hop.src != var:
            return found
        spec = RELATIONS[hop.rel]
        phrase = (spec.forward if hop.forward else spec.backward).format(article(noun(self.plan.query.vars[hop.dst])))
        return [*found, Clue(phrase, rel=hop.rel, forward=hop.forward, other=None)]

    def side_clues(self, var: int) -> Turns:
        """Clues through an unnamed entity off the route that a named one fixes (`played for a team for which X
        played`): X's page read for its list (X's teams), then a candidate must link to one of them."""
        q, found = self.plan.query, []
        route = {h.dst for h in self.plan.hops} | {h.src for h in self.plan.hops}
        for e in q.edges:
            for a, w, forward in ((e.src, e.dst, True), (e.dst, e.src, False)):
                if a != var or w in self.named or w in route:
                    continue
                via = [(f, n) for f in q.edges if f is not e for n in (f.src, f.dst) if w in (f.src, f.dst) and n != w]
                for f, n in via:
                    if n not in self.named or len(found) >= 2:
                        continue
                    name, goal = self.named[n], self.goal_to(f, n, w)
                    page = yield from self.open(
                        name, goal, f"To test that clue I need the {plural(q.vars[w])} of {name}."
                    )
                    listed = [] if page is None else reader.related(page.text, name, f.rel, f.src == n)[0]
                    if listed:
                        spec = RELATIONS[e.rel]
                        phrase = (spec.forward if forward else spec.backward).format(
                            f"one of {thoughts.preview(listed)}"
                        )
                        found.append(Clue(phrase, rel=e.rel, forward=forward, among=frozenset(listed)))
                        self.side.update({("edge", q.edges.index(e)), ("edge", q.edges.index(f))})
        return found

    def goal_to(self, edge: Edge, src: int, dst: int) -> str:
        """The visit goal for the entities `src`'s page lists along `edge`."""
        return hop_goal(self.plan, Hop(edge.rel, edge.src == src, src, dst), self.named[src])

    def verdict(self, text: str, name: str, found: list[Clue]) -> tuple[bool | None, list[str], str]:
        """(True when the page shows every clue / False when it contradicts one / None, the sentences that decided,
        the first clue it fails or leaves unsaid)."""
        said: list[str] = []
        for clue in found:
            if clue.pred is not None:
                ok, sentence = reader.check_pred(clue.pred, name, text)
            else:
                names, more, sentences = reader.related(text, name, clue.rel, clue.forward)
                wanted = clue.among or ({clue.other} if clue.other is not None else set(names))
                ok = bool(wanted & set(names))
                if not ok and clue.other in self.pages:  # the named entity's page, read before, may list this one
                    back, more_back, sentences = reader.related(
                        self.pages[clue.other].text, clue.other, clue.rel, not clue.forward
                    )
                    ok, wanted, more = name in back, {name}, min(more, more_back)
                ok = ok or (None if more else False)  # a list cut short that leaves it out does not say
                sentence = next((s for s in sentences if any(w in s for w in wanted)), "")
            if ok is not True:
                return ok, [sentence] if sentence else [], clue.phrase
            if sentence:
                said.append(sentence)
        return True, said, ""

    def choose(self, names: list[str], truth: str, found: list[Clue], goal: str, lead: str, var: int) -> Turns:
        """The candidate whose page shows every clue, checked in the listed order a few pages a visit:
        (its page, thought) or None."""
        found = self.checks(var, found) + (yield from self.side_clues(var))
        found += self.off_route(var, found)
        if len(names) == 1 and not found:
            return (yield from super().choose(names, truth, found, goal, lead, var))
        if not found:
            return None
        self.focus = [k for c in found if (k := clue_key(self.plan, var, c, self.named)) is not None]
        wanted = need(found)
        self.testing = "" if self.focus else f"which {self.noun(var)} {wanted}"
        lead = join(lead, "Check them in the listed order." if len(names) > 1 else "")
        aside: list[str] = []  # candidates that fit but that the pages can neither confirm nor rule out
        for start in range(0, min(len(names), self.cfg.max_checks), self.cfg.batch):
            group = names[start : start + self.cfg.batch]
            pages, unsaid = yield from self.read_many(group, f"which one {wanted}", lead)
            judged = {n: self.verdict(pages[n].text, n, found) for n in group if n in pages}
            fits = [n for n in group if n in judged and judged[n][0] is True]
            taken, lead = None, unsaid
            end = self.onward(var, self.named) is None  # at the route's end, with room: every clue before the answer
            depths = {
                n: len(self.plan.query.vars) if self.may_follow() or (end and self.read < ROOM) else 1 for n in fits
            }
            lead = yield from self.prefetch([n for n in fits if depths[n] > 1], var, pages, lead)
            for n in fits:
                deep = n != truth and self.may_follow()  # a wrong fit: followed on until a page rules it out
                whole = deep or ((end or aside) and self.read < ROOM)
                depth = len(self.plan.query.vars) if whole else 1
                self.settled = {}
                ok, lead = yield from self.follow(n, var, pages[n], self.named, depth, lead)
                if ok is None and deep:
                    self.backtracks += 1
                    aside.append(n)
                    lead = join(lead, self.set_aside(n))
                    continue
                if ok is False:
                    if deep:
                        self.backtracks += 1
                        lead = join(lead, self.backtrack(n))
                    continue
                if aside and (ok is None or depth == 1):  # an unconfirmed fit besides the ones set aside
                    taken = aside[0]
                    break
                if aside:
                    lead = join(lead, f"Unlike {thoughts.preview(aside)}, {n} is confirmed on every clue.")
                if depth > 1 and ok:  # the entities its chain went through are found too
                    self.confirmed |= {n}
                    self.named.update((v, e) for v, e in self.settled.items() if v not in self.named)
                taken = n
                break
            if taken is not None:
                if taken != truth:
                    self.stuck = f"one {self.noun(var)} the clues single out ({taken} fits them as well)"
                    return None
                for key in [*self.focus, *self.side]:
                    self.ledger.tick(key)
                self.focus, self.testing = [], ""
                out = [n for n in group if n != truth and n in judged]
                quotes = "” “".join(judged[truth][1])  # each sentence in its own quotes: the page has them apart
                return pages[truth], join(lead, thoughts.only_one(self.rng, truth, quotes, out))
            if not fits:
                lead = join(lead, self.rejected(group, judged, wanted))
        self.testing, self.passed_over = "", lead
        return None

    def read_many(self, names: list[str], goal: str, lead: str) -> Turns:
        """The pages of `names`: those read before from memory (a page is not visited twice), the rest in one visit;
        (the pages, `lead` when no call said it)."""
        pages = {n: self.pages[n] for n in names if n in self.pages}
        unread = [n for n in names if n not in pages]
        if not unread:
            return pages, lead
        pages.update((yield from self.open_many(unread, goal, lead)))
        return pages, ""

    def rejected(self, group: list[str], judged: dict, wanted: str) -> str:
        """The thought after a visit where no candidate fits: one quoted reason, then the rest ruled out."""
        reason = next(((n, v) for n, v in judged.items() if v[1]), None)
        head = ""
        if reason is not None:
            name, (_, sentences, phrase) = reason
            head = f"“{sentences[0]}” So {name} fails: the one I need {phrase}."
        return join(head, f"None of {thoughts.preview(group)} {wanted}; go on down the list.")
