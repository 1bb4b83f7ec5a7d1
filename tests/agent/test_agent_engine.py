"""The rollout loop on the real generation Engine: a random model, and a tiny model that calls `search`."""

import dataclasses
import random
import time

import jax
import numpy as np
from agent_support import CALL, DATE, MAX_LEN, QUESTION, SLOTS

from jaxseeker import model
from jaxseeker.agent import TERMINATIONS, RolloutConfig, rollout, run_episodes
from jaxseeker.agent.engine import make_engine
from jaxseeker.data import tokenize_chat
from jaxseeker.generation import SamplingConfig
from jaxseeker.tools import ToolRegistry

forward = jax.jit(model.forward, static_argnames="cfg")


def engine_for(params, cfg, tokenizer):
    return make_engine(
        params,
        cfg,
        tokenizer,
        slots=SLOTS,
        max_len=MAX_LEN,
        sampling=SamplingConfig(temperature=1.0, seed=1),
    )


def test_random_model_episodes_hold_the_engine_context_and_its_logprobs(call_model, registry):
    tokenizer, cfg, _ = call_model
    params = model.init_params(cfg, jax.random.key(0))
    config = RolloutConfig(date=DATE, max_tokens_per_turn=24, max_context_tokens=MAX_LEN, answer_reserve_tokens=100)
    result = rollout(
        engine_for(params, cfg, tokenizer), tokenizer, registry, [QUESTION], config, n_per_question=3, progress=False
    )

    assert len(result.episodes) == 3 and result.stats.sampled_tokens == sum(e.num_sampled for e in result.episodes)
    for episode in result.episodes:
        assert episode.termination in TERMINATIONS and episode.turns >= 2
        ids = np.asarray(episode.token_ids)
        mask = np.asarray(episode.loss_mask, bool)
        # Recompute log p of every sampled token from the recorded context: it is exactly what the engine held.
        padded = np.zeros((1, MAX_LEN), np.int32)  # [1, seq]: right padding does not change causal logits
        padded[0, : len(ids)] = ids
        logp = np.asarray(jax.nn.log_softmax(forward(params, padded, cfg)[0], axis=-1))  # [seq, vocab]
        recomputed = logp[np.arange(len(ids) - 1), ids[1:]]  # [seq - 1]
        np.testing.assert_allclose(np.asarray(episode.logprobs)[1:][mask[1:]], recomputed[mask[1:]], atol=1e-4)
        assert not np.any(np.asarray(episode.logprobs)[~mask])


def test_tool_calling_model_runs_search_through_the_engine(call_model, registry):
    tokenizer, cfg, params = call_model
    config = RolloutConfig(date=DATE, max_tool_calls=2, max_context_tokens=MAX_LEN, answer_reserve_tokens=100)
    episodes = run_episodes(
        engine_for(params, cfg, tokenizer), tokenizer, registry, [QUESTION], config, n_per_question=2, progress=False
    )

    for episode in episodes:
        assert episode.termination == "max_tool_calls" and episode.turns == 3
        assert [(c.name, c.arguments, c.error) for c in episode.tool_calls] == [
            ("search", {"query": ["Velmora bridge arches"]}, None)
        ] * 2
        turn = episode.messages[2]["content"]
        assert turn.startswith("<think> the") and turn.endswith("</think><tool_call>" + CALL + "</tool_call>")
        assert "nine arches" in episode.messages[3]["content"]
        ids, mask = tokenize_chat(episode.messages, tokenizer)
        assert episode.token_ids == ids.tolist() and episode.loss_mask == mask.tolist()
        logprobs = np.asarray(episode.logprobs)
        assert np.all(logprobs <= 1e-6) and np.all(logprobs[~mask.astype(bool)] == 0)
    assert episodes[0].messages[2] != episodes[1].messages[2]  # thoughts of random length


def test_lockstep_tools_repeat_the_engines_schedule_whatever_the_tools_latency(call_model, registry):
    """Each call's result enters at the next engine step, so two runs whose search answers after random delays (0–30
    ms, against engine steps of a few ms) send the engine the same batches: the same turns end at the same steps and
    every episode, log-probs included, is the same to the bit."""
    tokenizer, cfg, params = call_model
    search = registry["search"]

    def late(arguments: dict) -> str:  # the real search, answering after a random delay
        time.sleep(random.uniform(0, 0.03))
        return search.fn(arguments)

    slow = ToolRegistry([dataclasses.replace(search, fn=late)])
    config = RolloutConfig(
        date=DATE, max_tool_calls=3, max_context_tokens=MAX_LEN, answer_reserve_tokens=100, lockstep_tools=True
    )

    def run() -> tuple[list, list, int]:
        engine, schedule = engine_for(params, cfg, tokenizer), []
        step = engine.step

        def recorded():  # the real step, its turn endings written down
            events = step()
            schedule.append([(e.request_id, len(e.tokens)) for e in events])
            return events

        engine.step = recorded
        result = rollout(engine, tokenizer, slow, [QUESTION], config, n_per_question=SLOTS, progress=False)
        return schedule, result.episodes, engine.tally.decode_steps

    (schedule, episodes, steps), again = run(), run()
    assert sum(map(len, schedule)) >= 3 * SLOTS  # every episode's turns ended in some step
    assert (schedule, steps) == again[0::2]
    for a, b in zip(episodes, again[1], strict=True):
        assert a.token_ids == b.token_ids and a.logprobs == b.logprobs and a.messages == b.messages
