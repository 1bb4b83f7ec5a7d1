"""Style figures of a question set: how varied, how template-like and how exact its text reads.

- openings: distinct first two words (lower-cased, punctuation stripped) among the questions;
- placeholder letters: questions with a lone capital letter standing for an entity (`a city X`, `includes Y`);
- exact numbers: questions stating a figure of three or more digits (`327,167,434`, `1962`, `between 20,000
  and 30,000`); a decade (`1960s`) or an ordinal (`20th`) is no exact figure;
- median words per question.
With a world, a solver and the questions' structured queries (`meta.query`): the share the solver answers
(closed book) and the share whose query is unique in the world (the answer, and nothing else, satisfies it).
"""

from __future__ import annotations

import dataclasses
import re
import statistics
from collections.abc import Sequence

from jaxseeker.synthesis.qa.checks import same_answer
from jaxseeker.synthesis.qa.record import QARecord
from jaxseeker.synthesis.qa.solvers import Solver, SolverTask
from jaxseeker.synthesis.qa.values import reads_exact
from jaxseeker.world import Query, World

# a lone capital that stands for an entity: not an initial (`J. Smith`), not in quotes (a name hint `“S”`)
_LONE = re.compile(r"^[UVWXYZ][,;:?!)]*$")


def has_placeholder(text: str) -> bool:
    """True when `text` names an entity by a placeholder letter (`a city X that …`, `includes Y among …`): a lone
    capital U–Z after a lower-case word, not followed by a capitalised one (`Flying V Ranch`, `Malcolm X` are
    names)."""
    words = text.split()
    for k, w in enumerate(words):
        if not _LONE.match(w):
            continue
        after_lower = k > 0 and words[k - 1][:1].islower()
        before_name = k + 1 < len(words) and w[-1:].isalpha() and words[k + 1][:1].isupper()
        if after_lower and not before_name:
            return True
    return False


def opening(text: str) -> str:
    """The first two words, lower-cased, punctuation stripped: `which city`, `born in`."""
    words = [w.strip("?.,;:!“”\"'()").lower() for w in text.split()[:2]]
    return " ".join(words)


@dataclasses.dataclass(frozen=True)
class StyleFigures:
    """The figures of the module docstring; `solver_pass` and `unique` are None without a world or queries."""

    n: int
    openings: int
    top_openings: list[tuple[str, int]]
    placeholder: int
    exact_number: int
    median_words: float
    solver_pass: float | None = None
    unique: float | None = None
    with_query: int = 0


def _is_unique(world: World, q: Query, record: QARecord) -> bool:
    matches = world.match(q, limit=None if q.count else 2)
    if q.count:
        return str(len(matches)) == record.answer
    return matches == [record.meta.get("answer_id")]


def style_figures(
    records: Sequence[QARecord], world: World | None = None, solver: Solver | None = None
) -> StyleFigures:
    """The style figures of `records`; with `world` (and `solver`), uniqueness (and the solver's pass rate) over
    the records that carry a structured query."""
    texts = [r.question for r in records]
    counts: dict[str, int] = {}
    for t in texts:
        counts[opening(t)] = counts.get(opening(t), 0) + 1
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    solved, unique, with_query = [], [], 0
    if world is not None:
        for r in records:
            if "query" not in r.meta:
                continue
            with_query += 1
            q = Query.from_json(r.meta["query"])
            unique.append(_is_unique(world, q, r))
            if solver is not None:
                solved.append(same_answer(solver(SolverTask(r.question, q, None)), r.answer))
    return StyleFigures(
        n=len(texts),
        openings=len(counts),
        top_openings=top,
        placeholder=sum(has_placeholder(t) for t in texts),
        exact_number=sum(reads_exact(t) for t in texts),
        median_words=float(statistics.median(len(t.split()) for t in texts)) if texts else 0.0,
        solver_pass=sum(solved) / len(solved) if solved else None,
        unique=sum(unique) / len(unique) if unique else None,
        with_query=with_query,
    )


def style_summary(f: StyleFigures) -> str:
    """A few lines of the figures, as `jaxseeker synth stats` prints them."""

    def share(k: int) -> str:
        return f"{k} of {f.n} ({k / max(1, f.n):.0%})"

    lines = [
        f"{f.n} questions, median {f.median_words:g} words",
        f"  distinct two-word openings: {f.openings} (most common: "
        + ", ".join(f"“{o}” {k}" for o, k in f.top_openings)
        + ")",
        f"  placeholder letters: {share(f.placeholder)}",
        f"  an exact number of 3+ digits: {share(f.exact_number)}",
    ]
    if f.unique is not None:
        lines.append(f"  unique under their structured query: {f.unique:.0%} of {f.with_query}")
    if f.solver_pass is not None:
        lines.append(f"  reference solver pass rate: {f.solver_pass:.0%} of {f.with_query}")
    return "\n".join(lines)
