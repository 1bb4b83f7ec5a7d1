"""The embedded expert's detours and deliberate mistakes: a vague first search, a wrong candidate opened and
rejected, and the wrong answers a reflection trajectory proposes before the verified one.

`Detours` is a part of `expert.ExpertRun` (it uses the run's random source, knowledge, tools and judge); the
wrong candidates and values are chosen with planning knowledge, as mistakes a hasty reader would make.
"""

from __future__ import annotations

from collections.abc import Sequence

from jaxseeker.synthesis import reader, thoughts
from jaxseeker.synthesis.acting import Turns, join
from jaxseeker.synthesis.plan import Clue, need
from jaxseeker.world.schema import ATTRIBUTES

_VAGUE_STOP = frozenset(
    "what which does have that there this with from whose whom were been each many much when where their them they "
    "than more less between among".split()
)


class Detours:
    """Detours and wrong picks of an expert run (mixed into `expert.ExpertRun`)."""

    def propose(self, thought: str, wrong: str) -> Turns:
        """Reflection: submit a wrong answer, read the verdict; the reflecting thought."""
        bodies = yield from self.act(join(thought, "Submit it for verification."), "answer_submit", {"answer": wrong})
        verdict = " ".join(bodies[0].split())
        note = verdict.partition("Verification:")[2].partition(" (checked:")[0].strip() or verdict[:200]
        return thoughts.reflect(self.rng, note, wrong)

    def wrong_ones(self, names: Sequence[str], truth: str, found: list[Clue], k: int) -> list[str]:
        """Up to `k` candidates other than the truth whose pages contradict a clue (planning knowledge)."""
        others = [n for n in names if n != truth]
        self.rng.shuffle(others)
        picked = []
        for other in others[: 3 * k + 3]:
            text = self.know.peek(other)
            if text is not None and self.judge(text, other, found)[0] is False:
                picked.append(other)
                if len(picked) == k:
                    break
        return picked

    def vague_search(self, anchor: str, lead: str) -> Turns:
        """Detour: a descriptive first search (aimed at no results or at unrelated hits); the thought after it."""
        words = [w.strip("?,.“”") for w in self.question.split()]
        names = " ".join(self.named.values()).split()
        content = list(
            dict.fromkeys(
                w for w in words if len(w) > 3 and w not in names and w[:1].islower() and w not in _VAGUE_STOP
            )
        )
        empties = [w for w in content if not self.know.titles(w)]
        pool = empties if empties and self.rng.random() < self.cfg.empty_share else content
        if not pool:
            return lead
        start = self.rng.randrange(max(1, len(pool) - 2))
        query = " ".join(pool[start : start + self.rng.randint(2, 4)])
        results = yield from self.search(thoughts.start_vague(self.rng, query), [query])
        hits = [h for r in results for h in r.hits]
        if any(h.title == anchor for h in hits):
            return thoughts.pick(self.rng, ("{a} shows up among the results.",), a=anchor)
        return thoughts.after_vague(self.rng, not hits, anchor)

    def confusable(self, page: reader.SeenPage, truth: str) -> str | None:
        """Reflection: another name of the same kind linked from the page (a hasty reader's pick)."""
        kind = self.know.kind(truth)
        others = [t for t in page.links if t != truth and t != page.title and self.know.kind(t) == kind]
        return self.rng.choice(others) if others else None

    def reject_one(self, names: list[str], truth: str, found: list[Clue], lead: str) -> Turns:
        """Detour: open a wrong candidate, read the clue its page contradicts, reject it; the thought after."""
        wrong = self.wrong_ones(names, truth, found, 1)
        if not wrong:
            return lead
        page = yield from self.open(
            wrong[0], f"whether {wrong[0]} {need(found)}", join(lead, thoughts.check(self.rng, wrong[0])), brief=True
        )
        if page is None:
            return thoughts.pick(self.rng, ("No page for {w}; try another.",), w=wrong[0])
        ok, evidence, phrase = self.judge(page.text, wrong[0], found)
        return thoughts.rejected(self.rng, wrong[0], evidence if ok is False else "", phrase or need(found))

    def misread(self, text: str, here: str, attr: str, answer: str) -> str | None:
        """Reflection: a value a hasty reader might take for the answer: another value of the same kind on the
        page, else one on a page read on the way."""
        kind = ATTRIBUTES[attr].kind
        pages = [(here, text)] + [(t, p.text) for t, p in self.pages.items() if t != here]
        for title, body in pages:
            for other in sorted(ATTRIBUTES):
                if (title, other) == (here, attr) or ATTRIBUTES[other].kind != kind:
                    continue
                value, _ = reader.attribute(body, title, other)
                if value is not None and (wrong := reader.answer_value(value, other)) != answer:
                    return wrong
        return None
