"""Per-request sampling in the engine (what the server relies on): `sample_rows` against `sample`, seeded
requests that draw the same tokens in any slot and company, and `peek` at a turn in progress."""

import jax
import jax.numpy as jnp
import numpy as np
from serve_support import SHAPE

from jaxseeker.generation import Engine, SamplingConfig
from jaxseeker.generation.sampling import row_keys, sample, sample_rows

ROWS = [
    SamplingConfig(),
    SamplingConfig(temperature=0.5),
    SamplingConfig(temperature=0.5, top_p=0.8),
    SamplingConfig(temperature=2.0, top_k=3),
    SamplingConfig(temperature=1.0, top_k=5, top_p=0.5),
    SamplingConfig(temperature=1.0),
]


def test_each_row_samples_as_sample_does_with_its_own_config():
    logits = jnp.asarray(np.random.default_rng(0).normal(0, 2, (len(ROWS), 50)), jnp.float32)  # [batch, vocab]
    for seed in range(2):
        keys = row_keys(seed, jnp.arange(len(ROWS)), jnp.zeros(len(ROWS), jnp.int32))
        tokens, logprobs = jax.jit(sample_rows)(
            logits,
            keys,
            jnp.asarray([c.temperature for c in ROWS]),
            jnp.asarray([c.top_p for c in ROWS]),
            jnp.asarray([c.top_k for c in ROWS]),
        )
        for i, config in enumerate(ROWS):
            want_tokens, want_logprobs = sample(logits[i : i + 1], keys[i : i + 1], config)
            assert int(tokens[i]) == int(want_tokens[0]), (seed, config)
            np.testing.assert_allclose(float(logprobs[i]), float(want_logprobs[0]), rtol=1e-5)


def test_per_row_seeds_are_the_scalar_seed_broadcast():
    requests, steps = jnp.arange(4), jnp.arange(4)
    scalar = jax.random.key_data(row_keys(5, requests, steps))
    rows = jax.random.key_data(row_keys(jnp.full(4, 5), requests, steps))
    mixed = jax.random.key_data(row_keys(jnp.asarray([5, 6, 5, 6]), requests, steps))
    np.testing.assert_array_equal(scalar, rows)
    assert (mixed[0] == scalar[0]).all() and not (mixed[1] == scalar[1]).all()


def _engine(policy) -> Engine:
    cfg, params, _ = policy
    return Engine(
        params,
        cfg,
        slots=SHAPE.slots,
        max_len=SHAPE.max_len,
        steps_per_call=SHAPE.steps_per_call,
        prefill_chunk=SHAPE.prefill_chunk,
    )


def _run(engine: Engine, requests: list[tuple[str, list[int], SamplingConfig | None]], n: int) -> dict[str, list[int]]:
    for request_id, prompt, sampling in requests:
        engine.submit(request_id, prompt, max_new_tokens=n, sampling=sampling)
    out = {}
    while engine.has_work():
        for event in engine.step():
            out[event.request_id] = event.tokens
            engine.release(event.request_id)
    return out


def test_a_seeded_request_draws_the_same_tokens_in_any_slot_next_to_greedy_ones(policy):
    engine = _engine(policy)
    seeded = SamplingConfig(temperature=1.0, top_p=0.9, seed=7)
    alone = _run(engine, [("a", [5, 6, 7], seeded)], 12)["a"]
    greedy_alone = _run(engine, [("g", [9, 8, 7, 6], None)], 12)["g"]  # the engine's own (static) greedy path
    mixed = _run(
        engine,
        [
            ("g", [9, 8, 7, 6], None),
            ("other", [1, 2], SamplingConfig(temperature=1.0, seed=1)),
            ("b", [5, 6, 7], seeded),
        ],
        12,
    )
    assert mixed["b"] == alone, "same seed, another id and slot: the same tokens"
    assert mixed["g"] == greedy_alone, "greedy rows of a per-row call equal the static greedy path"
    reseeded = _run(engine, [("c", [5, 6, 7], SamplingConfig(temperature=1.0, top_p=0.9, seed=8))], 12)["c"]
    assert reseeded != alone and len(set(alone)) > 3


def test_peek_shows_the_turn_before_its_event(policy):
    engine = _engine(policy)
    engine.submit("p", [3, 4, 5], max_new_tokens=10, sampling=SamplingConfig(temperature=1.0, seed=3))
    assert engine.step() == []
    tokens, logprobs = engine.peek("p")
    assert len(tokens) == len(logprobs) == SHAPE.steps_per_call and all(lp <= 0 for lp in logprobs)
    events = []
    while not events:
        events = engine.step()
    assert events[0].tokens[: len(tokens)] == tokens and len(events[0].tokens) == 10
