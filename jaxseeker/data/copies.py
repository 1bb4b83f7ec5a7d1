"""Copy-task examples: a run of random token ids, optionally a gap of filler, then the same run again.

The only way to predict the second run is to find the current token earlier and emit the one after it: the copying
(induction) heads an agent needs to carry a name from the question into its search, or a number from a page into
its answer. `train.sft.copy_warmup` trains a fresh model on rows of nothing else; `DataConfig.copy_rate` mixes the same
examples into agent SFT, where 1,200 updates on trajectories alone wear the warmed-up copying down
(docs/results.md).
"""

from __future__ import annotations

import numpy as np


def copy_shape(
    rng: np.random.Generator, *, min_tokens: int = 4, max_tokens: int = 24, digit_rate: float = 0.0, max_gap: int = 0
) -> tuple[int, int, int]:
    """The sizes of one copy example: (ordinary ids, digit ids after them, filler ids between the runs).

    A `digit_rate` fraction of the runs are number-like: one to three ordinary ids, then 3–8 digits; the others are
    `min_tokens`..`max_tokens` ordinary ids. The gap is 0..`max_gap` filler ids."""
    number = digit_rate > 0 and rng.random() < digit_rate
    k = int(rng.integers(1, 4)) if number else int(rng.integers(min_tokens, max_tokens + 1))
    m = int(rng.integers(3, 9)) if number else 0
    gap = int(rng.integers(0, max_gap + 1)) if max_gap else 0
    return k, m, gap


def copy_tokens(
    rng: np.random.Generator, shape: tuple[int, int, int], vocab: np.ndarray, digits: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The ids `[2 n + gap]` of a copy example of `shape` (`copy_shape`) and its loss mask: 1 on the second run after
    its first token (the first is not predictable), 0 elsewhere."""
    k, m, gap = shape
    x = rng.choice(vocab, size=k)
    if m:
        if digits is None:
            raise ValueError("copy_tokens: a number-like run needs the digit ids")
        x = np.concatenate([x, rng.choice(digits, size=m)])
    ids = np.concatenate([x, rng.choice(vocab, size=gap), x]).astype(np.int32)
    mask = np.zeros(len(ids), np.float32)
    mask[len(x) + gap + 1 :] = 1.0
    return ids, mask


def ordinary_ids(tokenizer) -> np.ndarray:
    """The ids of the tokenizer's ordinary (not special) tokens: what copy runs are drawn from."""
    special = set(tokenizer.all_special_ids)
    return np.asarray([i for i in range(len(tokenizer)) if i not in special], np.int32)


def digit_ids(tokenizer) -> np.ndarray:
    """The ids of the all-digit tokens: `0` … `9`, and the digit groups of the `numbers` split."""
    ids = [tokenizer.convert_tokens_to_ids(str(d)) for d in range(10)]
    if None in ids or (tokenizer.unk_token_id is not None and tokenizer.unk_token_id in ids):
        raise ValueError("digit_ids: the tokenizer has no single token for every digit 0-9")
    groups = [i for t, i in tokenizer.get_vocab().items() if t.isascii() and t.isdigit() and len(t) > 1]
    return np.asarray(ids + sorted(groups), np.int32)
