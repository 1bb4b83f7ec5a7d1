"""Per-recipe reward shaping: small functions of one episode's judged outcome, chosen by name in config."""

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


def webdancer(outcome: EpisodeOutcome, *, format_weight: float = 0.1, answer_weight: float = 0.9) -> float:
    """R = 0.1 * score_format + 0.9 * score_answer (WebDancer arXiv 2505.22648; WebSailor uses the same)."""
    return format_weight * float(outcome.format_ok) + answer_weight * float(outcome.correct)


def websailor(outcome: EpisodeOutcome, *, format_weight: float = 0.1, answer_weight: float = 0.9) -> float:
    """R = 0.1 * score_format + 0.9 * score_answer (WebSailor arXiv 2507.02592, as WebDancer)."""
    return webdancer(outcome, format_weight=format_weight, answer_weight=answer_weight)


def webexplorer(outcome: EpisodeOutcome, *, format_weight: float = 0.2) -> float:
    """R = 0.2 * R_format + R_correct (WebExplorer arXiv 2509.06501)."""
    return format_weight * float(outcome.format_ok) + float(outcome.correct)


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
    """DAPO's soft overlong punishment (arXiv 2503.14476, eq. 13), added to any recipe's reward.

    0 for |y| <= L_max - L_cache; -penalty * (|y| - (L_max - L_cache)) / L_cache up to L_max; -penalty beyond,
    with L_max = `max_tokens`, L_cache = `buffer` and |y| the tokens the policy wrote (observations not counted).
    The paper's penalty is 1 (verl: `overlong_buffer.penalty_factor`).
    """
    if not 0 < buffer < max_tokens:
        raise ValueError(f"need 0 < buffer < max_tokens, got buffer={buffer}, max_tokens={max_tokens}")
    if penalty < 0:
        raise ValueError(f"penalty must be >= 0, got {penalty}")
    excess = n_tokens - (max_tokens - buffer)
    if excess <= 0:
        return 0.0
    return -penalty * min(excess / buffer, 1.0)


def webseer(outcome: EpisodeOutcome, *, l_expect: int = 4096, l_max: int = 8192, alpha: float = 0.9) -> float:
    """R = R_format + F1 * alpha^T (WebSeer SRRL, ICLR 2026).

    R_format is `length_penalty(|y|)` for a well-formatted episode and -1 otherwise; the correctness
    term is the token F1 of the answer, discounted by alpha per submission T (T = 1 gives F1 * alpha).
    A badly formatted episode gets no correctness term.
    """
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    if outcome.n_submissions < 0:
        raise ValueError(f"n_submissions must be >= 0, got {outcome.n_submissions}")
    if not outcome.format_ok:
        return -1.0
    format_term = length_penalty(outcome.n_tokens, l_expect=l_expect, l_max=l_max)
    return format_term + outcome.f1 * alpha**outcome.n_submissions


def evidence(outcome: EpisodeOutcome, *, evidence_weight: float = 0.3) -> float:
    """R = score_answer + 0.3 * evidence recall, or -1 for a broken format (this project's process reward).

    A wrong answer after visiting the pages the question's chain runs through still earns part of the reward,
    so a group whose answers are all wrong can still tell the second hop from a guess. The -1 is WebSeer's.
    """
    if not outcome.format_ok:
        return -1.0
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
