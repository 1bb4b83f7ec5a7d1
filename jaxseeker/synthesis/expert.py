"""The embedded expert: a scripted agent that knows a question's evidence path but must still find it.

It plans a route from a named entity to the answer (`plan.make_plan`; with no name given, from the
entity its sharpest clue finds), then acts only through tool calls (`acting.Actor`): it searches
names, opens pages from hits or links, reads the relation and attribute sentences of what the tools
returned (`reader`) and copies every name and value it uses from those observations. When the
observations do not show what it needs, it gives up (and the trajectory fails the correctness
filter). It checks candidates against the question's clues — one at a time or several pages in one
visit — and makes realistic detours at `detour_rate`: a descriptive first search that finds nothing
useful, and a wrong candidate opened and rejected for a clue its page contradicts. At `slip_rate` it searches a
lookalike name, then recovers (`Actor.slip`; that turn gets `"weight": 0`, so SFT does not train the mistake).
At `snippet_rate` it answers from a search snippet that shows the answer; with `hop_snippets` it also reads a
link from a snippet, and the next page's answer from that page's hit in the same results, so a two-hop question
can end after one search.

In submit mode (WebSeer self-reflection) it proposes answers with `answer_submit`, on purpose a
wrong one first when `wrong_first`, reads the verifier's verdict, reflects, and ends with the
verified answer. World knowledge (`Knowledge`) serves only to plan: which candidate to try, which
query finds something; never as an answer.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from jaxseeker.synthesis import reader, thoughts
from jaxseeker.synthesis.acting import Actor, Turns, join, turn_text
from jaxseeker.synthesis.detours import Detours
from jaxseeker.synthesis.expert_config import ExpertConfig, Knowledge
from jaxseeker.synthesis.plan import (
    Clue,
    Hop,
    Plan,
    answer_goal,
    clues,
    hop_goal,
    need,
    route_from,
    search_words,
)
from jaxseeker.synthesis.qa.render import noun, plural
from jaxseeker.world import NameInitial


def judge_page(text: str, name: str, found: Sequence[Clue]) -> tuple[bool | None, str, str]:
    """(verdict, evidence sentence, clue phrase) of `name`'s page text against the clues: the first clue the page
    contradicts (False), else the first it shows (True), else (None, "", "")."""
    support: tuple[str, str] | None = None
    for clue in found:
        if clue.pred is not None:
            ok, sentence = reader.check_pred(clue.pred, name, text)
            sentence = "" if isinstance(clue.pred, NameInitial) else sentence
        else:
            names, _, said = reader.related(text, name, clue.rel, clue.forward)
            ok, sentence = clue.other in names, next((s for s in said if clue.other in s), "")
        if ok is False:
            return False, sentence, clue.phrase
        if ok and support is None and sentence:
            support = (sentence, clue.phrase)
    return (None, "", "") if support is None else (True, *support)


class ExpertRun(Detours, Actor):
    """One episode of the expert: `program()` is a generator of assistant turns fed with observations."""

    def __init__(
        self,
        plan: Plan,
        knowledge: Knowledge,
        config: ExpertConfig,
        rng: random.Random,
        question: str,
        *,
        submit: bool = False,
        wrong_first: bool = False,
    ):
        super().__init__(rng, config.link_rate, config.snippet_rate, config.slip_rate, knowledge.slips)
        self.plan, self.know, self.cfg, self.question = plan, knowledge, config, question
        self.submit, self.wrong_first = submit, wrong_first
        self.named = {i: knowledge.name(plan.binding[i]) for i in plan.anchors}
        self.jumps = 0  # candidates taken out of several with no page of theirs read (oracle jumps)

    def name(self, var: int) -> str:
        """The true entity name of a variable (what the expert expects to read)."""
        return self.know.name(self.plan.binding[var])

    def noun(self, var: int) -> str:
        """The question's noun for a variable (`painter`, `city`)."""
        return noun(self.plan.query.vars[var])

    # ---- endings --------------------------------------------------------------------------------------------

    def finish(self, thought: str, answer: str) -> Turns:
        """The answer: `<answer>` directly, or (submit mode) submitted, verified, then given."""
        if self.submit:
            bodies = yield from self.act(
                join(thought, "Submit it for verification."), "answer_submit", {"answer": answer}
            )
            upheld = bodies[0].lstrip().upper().startswith("CORRECT")
            thought = (
                f"The verifier confirms {answer}." if upheld else f"The verifier disagrees, but the pages say {answer}."
            )
        yield turn_text(thought, answer=answer)
        return answer

    def give_up(self, what: str) -> Turns:
        """End without the fact: an honest non-answer (it fails the correctness filter)."""
        yield turn_text(thoughts.give_up(self.rng, what), answer="unknown")
        return None

    # ---- judging candidates ---------------------------------------------------------------------------------

    def judge(self, text: str, name: str, found: list[Clue]) -> tuple[bool | None, str, str]:
        """`judge_page` of a candidate's page."""
        return judge_page(text, name, found)

    # ---- the episode ----------------------------------------------------------------------------------------

    def program(self) -> Turns:
        """The whole episode."""
        plan = self.plan
        if plan.start is None:
            found = yield from self.find_start()
            if found is None:
                return (yield from self.give_up("a name to start from"))
            start, page, lead = found
        else:
            start = plan.start
            anchor = self.name(start)
            others = [n for i, n in self.named.items() if i != start and n != anchor]
            lead = thoughts.start(self.rng, anchor, others)
            if self.rng.random() < self.cfg.detour_rate:
                lead = yield from self.vague_search(anchor, lead)
            hops = route_from(plan.query, start) or ()
            page = yield from self.open(
                anchor,
                self.goal(hops, 0, anchor),
                lead,
                noun=self.noun(start),
                enough=self.shows_hop(anchor, hops[0]) if hops else self.shows_answer(anchor),
            )
            if page is None:
                return (yield from self.give_up(f"a page about {anchor}"))
            lead = ""
        hops = route_from(plan.query, start) or ()
        here = self.name(start)
        for k in range(len(hops)):
            result = yield from self.step(hops, k, page, here, lead)
            if result is None:
                return None
            page, here, lead = result
            if page is None:
                return here
        return (yield from self.conclude(page, here, lead))

    def shows_answer(self, name: str) -> Callable[[str], bool] | None:
        """A test that a text about `name` states the answer attribute (None when the answer is a name)."""
        attr = self.plan.query.answer_attr
        if attr is None:
            return None
        return lambda text: reader.attribute(text, name, attr)[0] is not None

    def shows_hop(self, name: str, hop: Hop) -> Callable[[str], bool] | None:
        """With `hop_snippets`, a test that a text about `name` names the hop's one destination (else None)."""
        if not self.cfg.hop_snippets:
            return None
        truth = self.name(hop.dst)
        return lambda text: reader.related(text, name, hop.rel, hop.forward)[:2] == ([truth], 0)

    def goal(self, hops: Sequence[Hop], k: int, here: str) -> str:
        """The visit goal at hop `k` (past the last hop: the answer attribute's)."""
        if k < len(hops):
            return hop_goal(self.plan, hops[k], here)
        attr = self.plan.query.answer_attr
        return answer_goal(attr, here) if attr else f"what {here} is"

    def find_start(self) -> Turns:
        """No name given: search the sharpest clue of some variable; (variable, its page, thought) or None."""
        q = self.plan.query
        options = []
        for i, v in enumerate(q.vars):
            query = search_words(v)
            hops = route_from(q, i)
            if query and hops is not None and self.name(i) in self.know.titles(query):
                options.append((len(hops), self.rng.random(), i, query))
        if not options:
            return None
        _, _, i, query = min(options)
        found = clues(self.plan, i, {})
        results = yield from self.search(thoughts.no_name(self.rng, self.noun(i), need(found)), [query])
        truth = self.name(i)
        hit = next((h for r in results for h in r.hits if h.title == truth), None)
        if hit is None:
            return None
        self.jumps += sum(len(r.hits) for r in results) > 1
        hops = route_from(q, i) or ()
        pages = yield from self.visit(
            thoughts.open_hit(self.rng, truth, hit.rank, self.goal(hops, 0, truth)),
            [hit.url],
            self.goal(hops, 0, truth),
        )
        page = next((p for p in pages if p.title == truth), None)
        if page is None:
            return None
        ok, evidence, _ = self.judge(page.text, truth, found)
        return i, page, thoughts.confirmed(self.rng, truth, evidence if ok else "")

    def step(self, hops: Sequence[Hop], k: int, page: reader.SeenPage, here: str, prev: str) -> Turns:
        """Follow hop `k` from `here`'s page (`prev`: the thought so far): (next page, its name, thought),
        (None, answer, "") when the episode ended, or None when it gave up."""
        q, hop = self.plan.query, hops[k]
        last, truth = k == len(hops) - 1, self.name(hop.dst)
        names, more, said = reader.related(page.text, here, hop.rel, hop.forward)
        if truth not in names:
            yield from self.give_up(f"which {self.noun(hop.dst)} {here} is linked to")
            return None
        if last and q.count:
            answer = yield from self.count(here, names, more, hop.dst)
            return None if answer is None else (None, answer, "")
        found = clues(self.plan, hop.dst, self.named, skip=here)
        final_name = last and q.answer_attr is None
        if len(names) == 1:
            lead = join(prev, thoughts.quote(self.rng, here, said[0]))
            if final_name:
                wrong = self.confusable(page, truth) if self.submit and self.wrong_first else None
                if wrong is not None:
                    lead = yield from self.propose(thoughts.guess(self.rng, wrong), wrong)
                    lead = join(lead, f"Read {here}'s page again.", thoughts.quote(self.rng, here, said[0]))
                return None, (yield from self.finish(join(lead, f"The answer is {truth}."), truth)), ""
            enough = self.shows_answer(truth) if last else self.shows_hop(truth, hops[k + 1])
            hit = self.hits.get(truth) if self.cfg.hop_snippets and truth not in self.pages else None
            if hit is not None and (seen := self.from_snippet(hit, enough)) is not None:
                return seen, truth, join(lead, thoughts.listed_hit(self.rng, truth, hit.rank))
            next_page = yield from self.open(
                truth, self.goal(hops, k + 1, truth), lead, noun=self.noun(hop.dst), enough=enough
            )
            if next_page is None:
                return (yield from self.give_up(f"the page of {truth}"))
            return next_page, truth, ""
        lead = join(prev, thoughts.listed(self.rng, here, names, more, need(found)))
        names, lead = self.by_initial(names, truth, found, lead)
        if final_name and self.submit and self.wrong_first:
            wrong = (self.wrong_ones(names, truth, found, 1) or [n for n in names if n != truth])[:1]
            if wrong:
                lead = yield from self.propose(join(lead, thoughts.guess(self.rng, wrong[0])), wrong[0])
        goal = f"whether {truth} {need(found)}" if final_name and found else self.goal(hops, k + 1, truth)
        checked = yield from self.choose(names, truth, found, goal, lead, hop.dst)
        if checked is None:
            return (yield from self.give_up(f"the page of {truth}"))
        next_page, lead = checked
        if final_name:
            return None, (yield from self.finish(join(lead, f"The answer is {truth}."), truth)), ""
        return next_page, truth, lead

    def by_initial(self, names: list[str], truth: str, found: list[Clue], lead: str) -> tuple[list[str], str]:
        """Narrow a list by the name-initial clues (no page needed for those)."""
        initials = [c for c in found if isinstance(c.pred, NameInitial)]
        if not initials:
            return names, lead
        kept = [n for n in names if all(reader.check_pred(c.pred, n, "")[0] for c in initials)]
        if truth not in kept or len(kept) == len(names):
            return names, lead
        return kept, join(lead, thoughts.by_initial(self.rng, kept, initials[0].phrase))

    def choose(self, names: list[str], truth: str, found: list[Clue], goal: str, lead: str, var: int) -> Turns:
        """Find the candidate that meets the clues: (its page, thought) or None. Several pages in one visit,
        or a wrong one first (detour), or straight to the one that fits."""
        if len(names) == 1:
            page = yield from self.open(truth, goal, lead, noun=self.noun(var))
            return None if page is None else (page, "")
        roll = self.rng.random()
        if found and roll < self.cfg.batch_rate:
            wrong = set(self.wrong_ones(names, truth, found, self.cfg.batch - 1))
            group = [n for n in names if n == truth or n in wrong]
            self.jumps += len(group) < len(names)  # the group was drawn around the truth
            pages = yield from self.open_many(group, f"which one {need(found)}", lead)
            if truth not in pages:
                return None
            out = [n for n in group if n in pages and self.judge(pages[n].text, n, found)[0] is False]
            ok, evidence, _ = self.judge(pages[truth].text, truth, found)
            return pages[truth], thoughts.only_one(self.rng, truth, evidence if ok else "", out)
        if found and roll < self.cfg.batch_rate + self.cfg.detour_rate:
            lead = yield from self.reject_one(names, truth, found, lead)
        self.jumps += 1
        page = yield from self.open(
            truth, goal, join(lead, thoughts.check(self.rng, truth)), noun=self.noun(var), brief=True
        )
        if page is None:
            return None
        ok, evidence, _ = self.judge(page.text, truth, found)
        return page, thoughts.confirmed(self.rng, truth, evidence) if ok else ""

    def count(self, here: str, names: list[str], more: int, var: int) -> Turns:
        """Count the listed entities that meet the clues (checking their pages in batches); the answer or None."""
        found = [c for c in clues(self.plan, var, self.named, skip=here) if c.pred is not None]
        what, total = plural(self.plan.query.vars[var]), len(names) + more
        lead = thoughts.pick(
            self.rng, ("{h}'s page lists {n} {w}.", "There are {n} {w} on {h}'s page."), h=here, n=total, w=what
        )
        if not found:
            if self.submit and self.wrong_first and total > 1:
                lead = yield from self.propose(join(lead, f"I count {total - 1}."), str(total - 1))
                lead = join(lead, "Count the list again.")
            return (yield from self.finish(join(lead, thoughts.counted(self.rng, total, what)), str(total)))
        if more or len(names) > self.cfg.max_checks:
            return (yield from self.give_up(f"all the {what} of {here}"))
        if self.submit and self.wrong_first:
            lead = yield from self.propose(join(lead, f"So the answer is {total}."), str(total))
        lead = join(lead, f"Which of them {need(found)}? Check their pages.")
        fits: list[str] = []
        for start in range(0, len(names), self.cfg.batch):
            batch = names[start : start + self.cfg.batch]
            pages = yield from self.open_many(batch, f"which of them {need(found)}", lead)
            if any(n not in pages for n in batch):
                return (yield from self.give_up("the pages of every candidate"))
            fits += [n for n in batch if self.judge(pages[n].text, n, found)[0]]
            lead = thoughts.so_far(self.rng, fits)
        return (yield from self.finish(thoughts.counted(self.rng, len(fits), what), str(len(fits))))

    def conclude(self, page: reader.SeenPage, here: str, lead: str) -> Turns:
        """Read the answer attribute on the last page (or answer with the name)."""
        attr = self.plan.query.answer_attr
        if attr is None:
            return (yield from self.finish(join(lead, f"The answer is {here}."), here))
        value, sentence = reader.attribute(page.text, here, attr)
        if value is None:
            return (yield from self.give_up(f"the {attr.replace('_', ' ')} of {here}"))
        answer = reader.answer_value(value, attr)
        if self.cfg.restate_goal:
            lead = join(lead, thoughts.asked(self.rng, answer_goal(attr, here)))
        wrong = self.misread(page.text, here, attr, answer) if self.submit and self.wrong_first else None
        if wrong is not None:
            lead = yield from self.propose(join(lead, f"The page gives {wrong}, I think."), wrong)
            lead = join(lead, f"Read {here}'s page again.")
        return (yield from self.finish(join(lead, thoughts.answer_from(self.rng, sentence, answer)), answer))
