"""Per-recipe reward shaping: small functions of one episode's judged outcome, chosen by name in config.

The rule every built-in reward keeps: correctness decides the sign of a rollout's group-relative advantage. A reward
is a correctness score in [0, 1] that format (and length) terms only discount (`gated`), so a wrong answer gets 0,
the least any rollout gets, and under GRPO, Dr. GRPO and RLOO its advantage is never above 0 (`evidence` adds credit
for the evidence pages an episode itself visited, and only that lifts a wrong answer).
"""

import dataclasses
from collections.abc import Callable

from jaxseeker.resolve import resolve_function


@dataclasses.dataclass(frozen=True)
class EpisodeOutcome:
    """What the reward functions see of one episode.

    format_ok: `check_format(...).ok`. correct: judge verdict (bool) or a score in [0, 1].
    f1: token F1 of the (last) submitted answer. n_tokens: |y|, tokens the policy wrote.
    n_submissions: T, answers submitted (SRRL; 1 for plain ReAct).
    evidence: the fraction of the question's evidence pages (its record's `meta.urls`) the episode visited.
    """

    format_ok: bool
    correct: bool | float = False
    f1: float = 0.0
    n_tokens: int = 0
    n_submissions: int = 1
    evidence: float = 0.0


def gated(score: float, form: float, weight: float) -> float:
    """score · (1 − weight · (1 − form)): a correctness `score` in [0, 1] discounted by a format `form` in [0, 1].

    This is the shape of every built-in reward, so that correctness decides the sign of a rollout's advantage: a
    wrong answer (score 0) gets 0 whatever its format, the least any rollout can get, so under GRPO, Dr. GRPO and
    RLOO (each subtracts a mean of its group's rewards) its advantage is never above 0, and a group whose answers
    are all wrong is flat (A = 0 for every rollout). The papers' additive `w·format + answer` breaks this: in an
    all-wrong group with one malformed rollout the other, wrong but well-formed answers get A > 0 (+0.58 each at
    G = 4 under GRPO). Format only ever discounts a right answer, by at most `weight`.
    """
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"format_weight must lie in [0, 1], got {weight}")
    if not (0.0 <= score <= 1.0 and 0.0 <= form <= 1.0):
        raise ValueError(f"correctness ({score}) and format ({form}) scores must lie in [0, 1]")
    return score * (1.0 - weight * (1.0 - form))


def webdancer(outcome: EpisodeOutcome, *, format_weight: float = 0.1) -> float:
    """R = answer · (1 − 0.1·(1 − format)) (`gated`): WebDancer's (arXiv 2505.22648) 0.1·format + 0.9·answer with
    the format term a discount of right answers, so it never lifts a wrong answer's advantage above 0."""
    return gated(float(outcome.correct), float(outcome.format_ok), format_weight)


def websailor(outcome: EpisodeOutcome, *, format_weight: float = 0.1) -> float:
    """R = answer · (1 − 0.1·(1 − format)) (WebSailor arXiv 2507.02592 weighs as WebDancer; `gated`)."""
    return webdancer(outcome, format_weight=format_weight)


def webexplorer(outcome: EpisodeOutcome, *, format_weight: float = 0.2) -> float:
    """R = correct · (1 − 0.2·(1 − format)) (`gated`): WebExplorer's (arXiv 2509.06501) 0.2·format + correct with
    the format term a discount of right answers, so it never lifts a wrong answer's advantage above 0."""
    return gated(float(outcome.correct), float(outcome.format_ok), format_weight)


def length_penalty(n_tokens: int, *, l_expect: int, l_max: int) -> float:
    """0 for |y| <= L_expect, -(|y| - L_expect) / (L_max - L_expect) up to L_max, -1 beyond (WebSeer)."""
    if not 0 < l_expect < l_max:
        raise ValueError(f"need 0 < l_expect < l_max, got l_expect={l_expect}, l_max={l_max}")
    if n_tokens <= l_expect:
        return 0.0
    if n_tokens <= l_max:
        return -(n_tokens - l_expect) / (l_max - l_expect)
    return -1.0


def overlong_penalty(n_tokens: int, *, max_tokens: int, buffer: int, penalty: float = 1.0) -> float:
    """DAPO's soft overlong punishment (arXiv 2503.14476, eq. 13); the RL scorer multiplies a recipe's reward by
    1 + this, so that it discounts a right answer and leaves a wrong one at 0 (DAPO adds it to a ±1 reward, which
    would lift the other rollouts of a group above an overlong wrong one: `gated`).

    0 for |y| <= L_max - L_cache; -penalty * (|y| - (L_max - L_cache)) / L_cache up to L_max; -penalty beyond,
    with L_max = `max_tokens`, L_cache = `buffer` and |y| the tokens the policy wrote (observations not counted).
    The paper's penalty is 1 (verl: `overlong_buffer.penalty_factor`); it lies in [0, 1].
    """
    if not 0 < buffer < max_tokens:
        raise ValueError(f"need 0 < buffer < max_tokens, got buffer={buffer}, max_tokens={max_tokens}")
    if not 0 <= penalty <= 1:
        raise ValueError(f"penalty must lie in [0, 1], got {penalty}")
    excess = n_tokens - (max_tokens - buffer)
    if excess <= 0:
        return 0.0
    return -penalty * min(excess / buffer, 1.0)


def webseer(outcome: EpisodeOutcome, *, l_expect: int = 4096, l_max: int = 8192, alpha: float = 0.9) -> float:
    """R = F1 · alpha^T · (1 + length_penalty(|y|)) for a well-formatted episode, 0 otherwise (WebSeer SRRL, ICLR
    2026, with its format terms as discounts, `gated`).

    The correctness score is the token F1 of the answer, discounted by alpha per submission T (T = 1 gives
    F1 · alpha). WebSeer adds the length penalty and gives a broken format -1; here both scale the score down
    (a broken format to 0), so an answer with F1 0 gets 0, the least any rollout gets, and its advantage is never
    above 0.
    """
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    if outcome.n_submissions < 0:
        raise ValueError(f"n_submissions must be >= 0, got {outcome.n_submissions}")
    form = 1.0 + length_penalty(outcome.n_tokens, l_expect=l_expect, l_max=l_max) if outcome.format_ok else 0.0
    return gated(outcome.f1 * alpha**outcome.n_submissions, form, 1.0)


def evidence(outcome: EpisodeOutcome, *, evidence_weight: float = 0.3) -> float:
    """R = answer + 0.3 · evidence recall for a well-formatted episode, 0 otherwise (this project's process reward).

    A wrong answer after visiting the pages the question's chain runs through still earns part of the reward,
    so a group whose answers are all wrong can still tell the second hop from a guess: here a wrong answer's
    advantage may be above 0, but only for evidence it gathered itself. A broken format earns nothing (WebSeer's
    -1 as a discount, `gated`): a malformed episode gets the least any rollout gets, never lifting the others.
    """
    if evidence_weight < 0:
        raise ValueError(f"evidence_weight must be >= 0, got {evidence_weight}")
    if not outcome.format_ok:
        return 0.0
    return float(outcome.correct) + evidence_weight * outcome.evidence


REWARD_FNS: dict[str, Callable[..., float]] = {
    "webdancer": webdancer,
    "websailor": websailor,
    "webexplorer": webexplorer,
    "webseer": webseer,
    "evidence": evidence,
}


def get_reward_fn(name: str) -> Callable[..., float]:
    """The reward function `name` names: a key of `REWARD_FNS` or a user's "package.module:function"."""
    return resolve_function(name, REWARD_FNS, "reward function")
