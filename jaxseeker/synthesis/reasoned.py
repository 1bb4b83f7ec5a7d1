"""The reasoning expert: the embedded expert's route, with thoughts that weigh evidence and candidates it checks.

`ReasonedRun` follows the same plan as `expert.ExpertRun` but
- every thought after an observation quotes the observation's sentence that bears on the next step, names the clue
  the next call tests and the clues still unchecked (`ledger.Ledger`), then says the call;
- it starts from the named entity whose route's pages list each next entity (planning knowledge, as the route is);
- a list of candidates is checked in the order the page lists it, several pages a visit, against every clue a
  page can show (its own facts, its links to entities already found, that it leads on to the next hop, and a link
  to one of the entities a named one's page lists, read first: `side_clues`); a candidate that fits is followed
  one step on (`lookahead`), and the first that passes is taken. Nothing is picked unseen: when that first fit is
  not the planned entity (the clues seen so far do not single it out), the run gives up and the trajectory is
  dropped;
- before the answer, the clues still unchecked are read off the pages seen, or one or two more visits;
- a question that names nothing starts from the searches of its clues (`nameless.NamelessStart`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from jaxseeker.synthesis import reader, thoughts
from jaxseeker.synthesis.acting import Turns, join, turn_text
from jaxseeker.synthesis.expert import ExpertRun
from jaxseeker.synthesis.ledger import NEXT, UNCHECKED, Ledger, clue_key, edge_key
from jaxseeker.synthesis.nameless import NamelessStart
from jaxseeker.synthesis.plan import Clue, Hop, Plan, clues, hop_goal, need, route_from
from jaxseeker.synthesis.qa.render import article, noun, plural
from jaxseeker.tools.extract import split_sentences
from jaxseeker.world import Edge
from jaxseeker.world.schema import RELATIONS

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


class ReasonedRun(NamelessStart, ExpertRun):
    """One episode of the reasoning expert (see the module docstring)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.plan = self.replan()
        self.ledger = Ledger(self.plan, self.named)
        self.seen: list[str] | None = None  # the last observation's tool responses
        self.hop: Hop | None = None  # the hop after the one being followed (a candidate must lead on to it)
        self.after: Hop | None = None  # the hop after that (what the candidate's own next entity must lead on to)
        self.focus: list[tuple] = []  # ledger keys of the clues the next call tests (empty: the route's next)
        self.unsure = 0  # first fits that were not the planned entity (the run gave up)
        self.testing = ""  # the clue the candidate checks test, when the ledger has no entry of its own for it
        self.side: set[tuple] = set()  # ledger keys of the clues the side lists (`side_clues`) test
        self.stuck = ""  # why the run cannot go on, when a first fit is not the planned entity
        self.passed_over = ""  # the thought on the last candidates `choose` ruled out, when none fitted

    def replan(self) -> Plan:
        """The plan from the named entity whose route's pages list each next entity among the fewest others
        (planning knowledge: which way in the pages can show), then the shortest."""
        q, best = self.plan.query, None
        for i in self.plan.anchors:
            hops = route_from(q, i)
            if hops is None:
                continue
            missing = listed = 0
            for hop in hops:
                text = self.know.peek(self.name(hop.src)) or ""
                names, more, _ = reader.related(text, self.name(hop.src), hop.rel, hop.forward)
                missing += self.name(hop.dst) not in names
                listed += len(names) + more
            score = (missing, len(hops), listed, i)
            if best is None or score < best[0]:
                best = (score, dataclasses.replace(self.plan, start=i, hops=hops))
        return self.plan if best is None else best[1]

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

    def act(self, thought: str, tool: str, arguments: dict, *, trained: bool = True) -> Turns:
        """One tool call whose thought reasons (`reason`); remembers the observation for the next thought."""
        target = arguments.get("query", [""])[0] if tool == "search" else ""
        if tool == "visit":
            by_url = {u: t for t, u in self.urls.items()}
            target = by_url.get(arguments["url"][0], "")
        bodies = yield from super().act(self.reason(thought, target), tool, arguments, trained=trained)
        self.seen = bodies
        return bodies

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
        self.hop, self.after = (list(hops[k + 1 : k + 3]) + [None, None])[:2]
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
        self.hop = self.after = None
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

    def lookahead(self, name: str, var: int, page: reader.SeenPage) -> Turns:
        """Whether a candidate that fits its own clues leads on to an entity that fits the next one's: its next
        entities' pages read in one visit; (True or False, the thought that says why)."""
        hop = self.hop
        if hop is None or hop.src != var:
            return True, ""
        ahead = reader.related(page.text, name, hop.rel, hop.forward)[0][: self.cfg.batch]
        found = self.checks(hop.dst, clues(self.plan, hop.dst, {**self.named, var: name}, skip=name), self.after)
        if not found or not ahead:
            return bool(ahead), ""
        wanted = need(found)
        lead = f"{name} fits so far. One step on, its {self.noun(hop.dst)} must be one that {wanted}."
        pages, _ = yield from self.read_many(ahead, f"which one {wanted}", lead)
        judged = [(n, self.verdict(pages[n].text, n, found)) for n in ahead if n in pages]
        if any(v[0] is True for _, v in judged):
            return True, ""
        said = next((f"“{v[1][0]}” " for _, v in judged if v[1]), "")
        return False, f"{said}So {name} fails one step on: none of {thoughts.preview(ahead)} {wanted}."

    def verdict(self, text: str, name: str, found: list[Clue]) -> tuple[bool | None, list[str], str]:
        """(True when the page shows every clue / False when it contradicts one / None, the sentences that decided,
        the first clue it fails or leaves unsaid)."""
        said: list[str] = []
        for clue in found:
            if clue.pred is not None:
                ok, sentence = reader.check_pred(clue.pred, name, text)
            else:
                names, _, sentences = reader.related(text, name, clue.rel, clue.forward)
                wanted = clue.among or ({clue.other} if clue.other is not None else set(names))
                ok = bool(wanted & set(names))
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
        if len(names) == 1 and not found:
            return (yield from super().choose(names, truth, found, goal, lead, var))
        if not found:
            return None
        self.focus = [k for c in found if (k := clue_key(self.plan, var, c, self.named)) is not None]
        wanted = need(found)
        self.testing = "" if self.focus else f"which {self.noun(var)} {wanted}"
        lead = join(lead, "Check them in the listed order." if len(names) > 1 else "")
        for start in range(0, min(len(names), self.cfg.max_checks), self.cfg.batch):
            group = names[start : start + self.cfg.batch]
            pages, unsaid = yield from self.read_many(group, f"which one {wanted}", lead)
            judged = {n: self.verdict(pages[n].text, n, found) for n in group if n in pages}
            fits = [n for n in group if n in judged and judged[n][0] is True]
            taken = None
            for n in fits:
                ok, why = yield from self.lookahead(n, var, pages[n])
                if ok:
                    taken = n
                    break
                lead = join(unsaid, why)
            if taken is not None:
                if taken != truth:
                    self.unsure += 1
                    self.stuck = f"one {self.noun(var)} the clues single out ({taken} fits them as well)"
                    return None
                for key in [*self.focus, *self.side]:
                    self.ledger.tick(key)
                self.focus, self.testing = [], ""
                out = [n for n in group if n != truth and n in judged]
                quotes = "” “".join(judged[truth][1])  # each sentence in its own quotes: the page has them apart
                return pages[truth], join(unsaid, thoughts.only_one(self.rng, truth, quotes, out))
            if not fits:
                lead = join(unsaid, self.rejected(group, judged, wanted))
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
