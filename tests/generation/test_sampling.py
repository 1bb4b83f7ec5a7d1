"""Sampling: greedy, temperature, top-k, top-p distributions, log-probs and per-request keys."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxseeker.generation import SamplingConfig
from jaxseeker.generation.keys import request_hash
from jaxseeker.generation.sampling import row_keys, sample, truncate

LOGITS = np.log(np.array([0.30, 0.20, 0.15, 0.12, 0.10, 0.08, 0.05]))  # probabilities at temperature 1
N = 10_000
sample_jit = jax.jit(sample, static_argnames="sampling")
TRUNCATED = SamplingConfig(temperature=0.7, top_p=0.5)


@functools.partial(jax.jit, static_argnames="sampling")
def _draw_jit(logits, seed, sampling):
    batch = jnp.broadcast_to(logits, (N, logits.shape[0]))  # [N, vocab]
    keys = row_keys(seed, jnp.arange(N), jnp.zeros(N, jnp.int32))
    return sample(batch, keys, sampling)[0]


def _draw(sampling: SamplingConfig) -> np.ndarray:
    """N tokens drawn from LOGITS, one row (one request) each (one compile per config, whatever the seed)."""
    return np.asarray(_draw_jit(jnp.asarray(LOGITS, jnp.float32), sampling.seed, sampling.static))


def _chi_square_p(tokens: np.ndarray, probs: np.ndarray) -> float:
    support = probs > 0
    counts = np.bincount(tokens, minlength=len(probs))
    assert counts[~support].sum() == 0, f"tokens outside the support were drawn: {counts}"
    return stats.chisquare(counts[support], probs[support] * len(tokens)).pvalue


def test_top_p_matches_the_renormalised_nucleus():
    # cumulative 0.30, 0.50, 0.65, 0.77 ≥ 0.7: the nucleus is the first four tokens
    tokens = _draw(SamplingConfig(temperature=1.0, top_p=0.7, seed=1))
    nucleus = np.array([0.30, 0.20, 0.15, 0.12, 0, 0, 0]) / 0.77
    assert _chi_square_p(tokens, nucleus) > 1e-3


def test_top_p_with_temperature_and_top_k():
    # temperature 0.5 squares the probabilities; top_k 5 then top_p 0.8 of the renormalised top-5
    sq = np.array([0.30, 0.20, 0.15, 0.12, 0.10]) ** 2
    top5 = sq / sq.sum()  # 0.482, 0.214, 0.121, 0.077, 0.054 → cumulative ≥ 0.8 after 3 tokens
    expected = np.zeros(7)
    expected[:3] = top5[:3] / top5[:3].sum()
    tokens = _draw(SamplingConfig(temperature=0.5, top_k=5, top_p=0.8, seed=2))
    assert _chi_square_p(tokens, expected) > 1e-3


def test_plain_temperature_and_the_power_of_the_check():
    tokens = _draw(SamplingConfig(temperature=1.0, seed=3))
    probs = np.exp(LOGITS) / np.exp(LOGITS).sum()
    assert _chi_square_p(tokens, probs) > 1e-3
    nucleus = np.array([0.30, 0.20, 0.15, 0.12, 0, 0, 0]) / 0.77
    with pytest.raises(AssertionError, match="outside the support"):  # the untruncated draw fails top-p
        _chi_square_p(tokens, nucleus)
    skewed = probs * np.array([1.1, 1, 1, 1, 1, 1, 0.5])
    assert _chi_square_p(tokens, skewed / skewed.sum()) < 1e-3  # and a slightly wrong distribution


def test_truncate_keeps_the_top_k_and_the_smallest_nucleus_per_row():
    logits = jnp.log(jnp.array([[0.5, 0.3, 0.2], [0.2, 0.3, 0.5]]))
    kept = np.isfinite(np.asarray(truncate(logits, top_k=2, top_p=1.0)))
    np.testing.assert_array_equal(kept, [[True, True, False], [False, True, True]])
    kept = np.isfinite(np.asarray(truncate(logits, top_k=0, top_p=0.75)))
    np.testing.assert_array_equal(kept, [[True, True, False], [False, True, True]])
    kept = np.isfinite(np.asarray(truncate(logits, top_k=0, top_p=0.5)))  # 0.5 alone reaches 0.5
    np.testing.assert_array_equal(kept, [[True, False, False], [False, False, True]])


def test_greedy_and_log_probs():
    logits = jax.random.normal(jax.random.key(0), (4, 50)) * 3
    tokens, logprobs = sample_jit(logits, None, sampling=SamplingConfig())
    np.testing.assert_array_equal(tokens, np.argmax(logits, axis=-1))
    expected = jax.nn.log_softmax(logits)[jnp.arange(4), tokens]
    np.testing.assert_allclose(logprobs, expected, rtol=1e-6)

    keys = row_keys(0, jnp.arange(4), jnp.zeros(4, jnp.int32))
    tokens, logprobs = sample_jit(logits, keys, sampling=TRUNCATED)
    expected = jax.nn.log_softmax(logits / 0.7)[jnp.arange(4), tokens]  # before top-p truncation
    np.testing.assert_allclose(logprobs, expected, rtol=1e-6)


def test_keys_depend_on_request_and_step_not_on_row():
    logits = jnp.zeros((4, 50))  # uniform: every draw is decided by the key alone
    requests = jnp.array([request_hash(r) for r in "abcd"])
    steps = jnp.array([0, 5, 9, 2])
    tokens, _ = sample_jit(logits, row_keys(7, requests, steps), sampling=TRUNCATED)
    order = jnp.array([2, 0, 3, 1])
    permuted, _ = sample_jit(logits, row_keys(7, requests[order], steps[order]), sampling=TRUNCATED)
    np.testing.assert_array_equal(np.asarray(permuted), np.asarray(tokens)[order])
    other_seed, _ = sample_jit(logits, row_keys(8, requests, steps), sampling=TRUNCATED)
    assert not np.array_equal(other_seed, tokens)


def test_bad_config_names_the_field():
    with pytest.raises(ValueError, match="top_p"):
        SamplingConfig(top_p=0.0)
    with pytest.raises(ValueError, match="temperature"):
        SamplingConfig(temperature=-1.0)
