"""Which tokens of a rejected turn to make unlikely: the ones that repeat an n-gram of their own turn again.

Sequence-level unlikelihood training (Welleck et al., "Neural Text Generation with Unlikelihood Training",
arXiv 1908.04319) fine-tunes a model on its own degenerate continuations with the loss -log(1 - p(y_t)) on
every token that completes an n-gram already seen earlier in the continuation. Here the continuations are
the policy's turns that broke the episode format (`train.rl.rejection.rejected_trajectories`): a small policy
sampled at temperature loops ("Airport Airport Airport …") until the per-turn limit cuts it. Only the
repeats are penalised, so the turn's well-formed start is left alone. Welleck penalises an n-gram's second
occurrence; a copying policy writes a name two or three times in a good turn ("X's page says: “X was born …”"
then a search for X), so here a token counts once its n-gram has been seen `min_seen` times before it in the
turn: with n = 4 and min_seen = 3, 36% of the tokens of the demo policy's malformed turns and 0.2% of those of
its right episodes' turns (51% and 10% with min_seen = 1). The loss itself is `losses.nll`'s negative weights.
"""

from collections import Counter

import numpy as np

from jaxseeker.data.chat import REJECTED


def repeated_ngrams(ids: np.ndarray, roles: np.ndarray, n: int, min_seen: int = 1) -> np.ndarray:
    """True on each token of a ``REJECTED`` turn that ends an n-gram of ids seen at least `min_seen` times earlier
    in the same turn.

    ids, roles: ``[tokens]`` (``data.chat.token_roles``); a turn is a maximal run of ``REJECTED`` tokens.
    Returns a bool ``[tokens]``, False outside rejected turns and on each turn's first ``n - 1`` tokens.
    """
    if n < 1 or min_seen < 1:
        raise ValueError(f"n and min_seen must be >= 1, got n={n}, min_seen={min_seen}")
    ids, roles = np.asarray(ids), np.asarray(roles)
    if ids.shape != roles.shape or ids.ndim != 1:
        raise ValueError(f"ids {ids.shape} and roles {roles.shape} must be the same [tokens] shape")
    repeats = np.zeros(ids.shape, dtype=bool)  # [tokens]
    rejected = np.concatenate([[False], roles == REJECTED, [False]])
    edges = np.flatnonzero(np.diff(rejected.astype(np.int8)))  # run starts and ends, alternating
    for start, end in zip(edges[::2], edges[1::2], strict=True):
        seen: Counter[tuple[int, ...]] = Counter()
        for t in range(start + n - 1, end):
            gram = tuple(ids[t - n + 1 : t + 1].tolist())
            repeats[t] = seen[gram] >= min_seen
            seen[gram] += 1
    return repeats
