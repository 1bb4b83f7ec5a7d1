"""Copy-task examples: a run, a gap of filler, the run again; loss only where the copy can be predicted."""

import numpy as np
import pytest

from jaxseeker.data import train_tokenizer
from jaxseeker.data.copies import copy_shape, copy_tokens, digit_ids, ordinary_ids


def test_an_example_is_a_run_a_gap_and_the_run_again_trained_after_its_first_token():
    vocab, digits = np.arange(10, 4000, dtype=np.int32), np.arange(0, 10, dtype=np.int32)
    rng = np.random.default_rng(0)
    for _ in range(50):
        k, m, gap = shape = copy_shape(rng, digit_rate=0.5, max_gap=40)
        ids, mask = copy_tokens(rng, shape, vocab, digits)
        n = k + m
        assert ids.shape == mask.shape == (2 * n + gap,) and 0 <= gap <= 40
        np.testing.assert_array_equal(ids[n + gap :], ids[:n])
        np.testing.assert_array_equal(np.nonzero(mask)[0], np.arange(n + gap + 1, 2 * n + gap))
        assert np.isin(ids[k:n], digits).all() and not np.isin(ids[:k], digits).any()
        assert (1 <= k <= 3 and 3 <= m <= 8) or (4 <= k <= 24 and m == 0)


def test_a_number_like_run_needs_the_digit_ids():
    rng = np.random.default_rng(1)
    with pytest.raises(ValueError, match="digit ids"):
        copy_tokens(rng, (2, 4, 0), np.arange(10, 60, dtype=np.int32))


def test_digit_ids_are_the_all_digit_tokens():
    tokenizer = train_tokenizer(["Sherwin Field lies at 494 m, 1,277 people."] * 10, 300)
    assert [tokenizer.decode([i]) for i in digit_ids(tokenizer)] == [str(d) for d in range(10)]
    groups = train_tokenizer(["Sherwin Field lies at 494 m, 1,277 people."] * 10, 1500, split="numbers")
    pieces = [groups.decode([i]) for i in digit_ids(groups)]
    assert pieces[:10] == [str(d) for d in range(10)] and len(pieces) == 1110 and {"494", "277", "07"} < set(pieces)


def test_ordinary_ids_leave_out_special_tokens():
    tokenizer = train_tokenizer(["Sherwin Field lies at 494 m."] * 10, 300)
    ids = ordinary_ids(tokenizer)
    assert len(ids) == len(tokenizer) - len(tokenizer.all_special_ids)
    assert not set(ids.tolist()) & set(tokenizer.all_special_ids)
