"""Train / RL / test split of synthesised questions with no test entity (other than hubs) seen in training."""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence

from jaxseeker.synthesis.qa.apart import evidence_entities


def split_questions(
    records: Sequence[dict], *, n_test: int, n_rl: int, hub_ids: Collection[str], seed: int = 0
) -> dict[str, list[dict]]:
    """Pick `n_test` test questions at random, then `n_rl` RL questions, then the rest for training; any RL or
    training question whose evidence (`meta.entities`) shares a non-hub entity with a test question is dropped,
    and likewise RL is kept apart from training. Returns {"train", "rl", "test", "dropped"}."""
    order = list(records)
    random.Random(seed).shuffle(order)

    test, test_ents = order[:n_test], set()
    for r in test:
        test_ents |= evidence_entities(r, hub_ids)
    rest = [r for r in order[n_test:] if not evidence_entities(r, hub_ids) & test_ents]
    rl, rl_ents, train = [], set(), []
    for r in rest:
        if len(rl) < n_rl:
            rl.append(r)
            rl_ents |= evidence_entities(r, hub_ids)
    for r in rest[len(rl) :]:
        if not evidence_entities(r, hub_ids) & rl_ents:
            train.append(r)
    return {"train": train, "rl": rl, "test": test, "dropped": len(records) - len(train) - len(rl) - len(test)}
