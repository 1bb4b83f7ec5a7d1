"""The embedded expert's thoughts: short, varied sentences that say what it saw and why it acts next.

Each function picks one of a few phrasings with the caller's `random.Random`, so trajectories do not
all read alike. Names and quoted sentences are passed in exactly as the observations showed them.
"""

from __future__ import annotations

import random
from collections.abc import Sequence


def pick(rng: random.Random, options: Sequence[str], **values: object) -> str:
    """One of `options`, formatted with `values`."""
    return rng.choice(list(options)).format(**values)


def preview(names: Sequence[str], more: int = 0, limit: int = 4) -> str:
    """`A, B, C and 5 others` (the first `limit` names of a list)."""
    shown = list(names[:limit])
    rest = len(names) - len(shown) + more
    if rest > 0:
        return ", ".join(shown) + f" and {rest} other{'s' if rest > 1 else ''}"
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


def start(rng: random.Random, anchor: str, others: Sequence[str]) -> str:
    """Why the search starts from `anchor`."""
    if others:
        return pick(
            rng,
            (
                "The question names {all}; {a} is the shortest way in.",
                "Named here: {all}. Starting from {a} needs the fewest steps.",
            ),
            a=anchor,
            all=preview([anchor, *others], limit=6),
        )
    return pick(
        rng,
        (
            "{a} is the one entity the question names, so start from it.",
            "The only name given is {a}.",
            "Everything hangs on {a}.",
            "Begin at {a} and follow the clues from there.",
        ),
        a=anchor,
    )


def no_name(rng: random.Random, noun: str, clue: str) -> str:
    """Why a clue is searched when the question names nothing."""
    return pick(
        rng,
        (
            "No entity is named. The sharpest clue is the {n} that {c}; search for that.",
            "Nothing is named, so search the most specific clue: a {n} that {c}.",
        ),
        n=noun,
        c=clue,
    )


def start_vague(rng: random.Random, words: str) -> str:
    """Why a first, descriptive search is tried."""
    return pick(
        rng,
        (
            "Try a quick search on the description first: {w}.",
            "Maybe the description alone finds it: search {w}.",
            "First a broad search with key words of the question.",
        ),
        w=words,
    )


def after_vague(rng: random.Random, empty: bool, anchor: str) -> str:
    """The reaction to a descriptive search that found nothing useful."""
    if empty:
        return pick(
            rng,
            (
                "No results for that.",
                "Nothing came back; the name {a} is a better query.",
                "That search found nothing. Go through {a} instead.",
            ),
            a=anchor,
        )
    return pick(
        rng,
        (
            "None of these results fits the description.",
            "These hits are unrelated pages. Better to start from {a}.",
            "Too vague: nothing relevant. Use the name {a} instead.",
        ),
        a=anchor,
    )


def search_name(rng: random.Random, name: str) -> str:
    """Why a name is searched."""
    return pick(
        rng, ("Search for {n}.", "Look up {n}.", "Find the page of {n}.", "Search {n} to get its page."), n=name
    )


def retry_search(rng: random.Random, name: str) -> str:
    """Why a name is searched again with other words."""
    return pick(
        rng,
        (
            "No page titled {n} among these results. Search again with more words.",
            "The results do not include {n}'s page. Try another query.",
        ),
        n=name,
    )


def slipped(rng: random.Random, name: str, query: str, titles: Sequence[str]) -> str:
    """Why a name is searched again after a query that miscopied it."""
    shown = preview(titles) if titles else "nothing"
    return pick(
        rng,
        (
            "The results show {t}, not {n}: my query said {q}. Search {n} exactly.",
            "I searched {q} instead of {n}; the results ({t}) are about something else. Search {n}.",
        ),
        n=name,
        q=query,
        t=shown,
    )


def open_hit(rng: random.Random, name: str, rank: int, goal: str) -> str:
    """Why a search hit is visited."""
    return pick(
        rng,
        (
            "Result [{r}] is the page of {n}. Open it to find {g}.",
            "[{r}] is {n}'s page; read it for {g}.",
            "{n}'s page is result [{r}]. Visit it: I need {g}.",
        ),
        n=name,
        r=rank,
        g=goal,
    )


def open_link(rng: random.Random, name: str, goal: str) -> str:
    """Why a page is visited by a link seen earlier."""
    return pick(
        rng,
        (
            "The page links to {n}; open it to find {g}.",
            "Follow the link to {n} and look for {g}.",
            "Open {n}'s page (linked above) for {g}.",
        ),
        n=name,
        g=goal,
    )


def listed_hit(rng: random.Random, name: str, rank: int) -> str:
    """The next page is a search hit already shown."""
    return pick(rng, ("{n} is result [{r}].", "Result [{r}] is {n}.", "[{r}] shows {n}."), n=name, r=rank)


def quote(rng: random.Random, owner: str, sentence: str) -> str:
    """What a page says, quoted."""
    return pick(
        rng, ("{o}'s page says: “{s}”", "From {o}'s page: “{s}”", "The page of {o}: “{s}”"), o=owner, s=sentence
    )


def listed(rng: random.Random, owner: str, names: Sequence[str], more: int, need: str) -> str:
    """A page lists several candidates; which one is needed (`need`: the clues, may be empty)."""
    if not need:
        return pick(
            rng,
            (
                "{o}'s page lists {l}; see which one leads on.",
                "Candidates from {o}'s page: {l}. Check them in turn.",
            ),
            o=owner,
            l=preview(names, more),
        )
    return pick(
        rng,
        (
            "{o}'s page lists {l}. I need the one that {w}.",
            "Candidates from {o}'s page: {l}. Which one {w}?",
            "{o} is linked to {l}; only one {w}.",
        ),
        o=owner,
        l=preview(names, more),
        w=need,
    )


def by_initial(rng: random.Random, kept: Sequence[str], clue: str) -> str:
    """Candidates narrowed by a name initial."""
    if len(kept) == 1:
        return pick(rng, ("Only {k} {c}.", "Of these, only {k} {c}."), k=kept[0], c=clue)
    return pick(rng, ("{k} {c}.", "That leaves {k}: they {c}."), k=preview(kept), c=clue)


def check(rng: random.Random, name: str) -> str:
    """Why a candidate's page is opened."""
    return pick(rng, ("Check {n}.", "Check {n} first.", "Look at {n}.", "Try {n}."), n=name)


def find_pages(rng: random.Random, names: Sequence[str]) -> str:
    """Why several names are searched at once."""
    return pick(rng, ("Find their pages: search {n}.", "Search {n} to get their pages."), n=preview(names, limit=8))


def open_pages(rng: random.Random, names: Sequence[str]) -> str:
    """Why several pages are opened in one visit."""
    return pick(rng, ("Open {n} together.", "Read the pages of {n}.", "Visit {n} at once."), n=preview(names, limit=8))


def only_one(rng: random.Random, name: str, evidence: str, out: Sequence[str]) -> str:
    """The outcome of checking several candidates at once."""
    ruled = f"{preview(out)} {'does' if len(out) == 1 else 'do'} not fit. " if out else ""
    if evidence:
        return ruled + pick(rng, ("Only {n} does: “{e}”", "{n} fits: “{e}”"), n=name, e=evidence)
    return ruled + pick(rng, ("{n} is the one.", "That leaves {n}."), n=name)


def guess(rng: random.Random, name: str) -> str:
    """A hasty pick (reflection trajectories propose one on purpose)."""
    return pick(rng, ("{n} looks likely.", "Probably {n}.", "I would guess {n}."), n=name)


def reflect(rng: random.Random, verdict: str, wrong: str) -> str:
    """The thought after the verifier rejected a proposal."""
    return pick(
        rng,
        (
            "The verifier says: “{v}” So {w} does not hold; check properly.",
            "Rejected: “{v}” I took {w} without checking. Go through the evidence.",
            "“{v}” My answer {w} was wrong. Look again.",
        ),
        v=verdict,
        w=wrong,
    )


def so_far(rng: random.Random, fits: Sequence[str]) -> str:
    """Progress while checking a list."""
    if not fits:
        return pick(rng, ("None fits so far.", "No match yet."))
    return pick(
        rng,
        ("So far {k} fit{s}: {n}.", "Matches so far: {n}."),
        k=len(fits),
        s="s" if len(fits) == 1 else "",
        n=preview(fits, limit=6),
    )


def rejected(rng: random.Random, name: str, evidence: str, need: str) -> str:
    """A candidate whose page contradicts a clue."""
    if evidence:
        return pick(
            rng,
            (
                "“{e}” That does not fit: the question says it {w}. Not {n}.",
                "{n} is out: “{e}”, but it must be one that {w}.",
                "No: “{e}” The clue is that it {w}.",
            ),
            n=name,
            e=evidence,
            w=need,
        )
    return pick(
        rng,
        (
            "{n}'s page does not show that it {w}. Not this one.",
            "Nothing on {n}'s page says it {w}; move on.",
        ),
        n=name,
        w=need,
    )


def confirmed(rng: random.Random, name: str, evidence: str) -> str:
    """A candidate whose page agrees with the clues."""
    if evidence:
        return pick(
            rng, ("“{e}” {n} fits.", "{n} matches: “{e}”", "“{e}” That fits, so it is {n}."), n=name, e=evidence
        )
    return pick(rng, ("{n} fits the clues.", "So it is {n}."), n=name)


def asked(rng: random.Random, goal: str) -> str:
    """What the question asks, said before the sentence that answers it."""
    return pick(rng, ("The question asks {g}.", "Wanted: {g}.", "I am asked {g}."), g=goal)


def answer_from(rng: random.Random, evidence: str, answer: str) -> str:
    """The final thought: where the answer was read."""
    return pick(
        rng,
        (
            "“{e}” The answer is {a}.",
            "The page says: “{e}” So the answer is {a}.",
            "Found it: “{e}” Answer: {a}.",
        ),
        e=evidence,
        a=answer,
    )


def counted(rng: random.Random, n: int, what: str) -> str:
    """The final thought of a count."""
    return pick(rng, ("That makes {n} {w}.", "Counting them: {n} {w}.", "In all, {n} {w}."), n=n, w=what)


def give_up(rng: random.Random, what: str) -> str:
    """The final thought when the tools did not show what was needed."""
    return pick(
        rng,
        (
            "I could not find {w} in what the tools returned; I cannot answer reliably.",
            "The pages do not show {w}. No reliable answer.",
        ),
        w=what,
    )
