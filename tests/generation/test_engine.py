"""The engine against a plain argmax loop over `model.forward`: batching, refills, stops, rollback, params.

Every test uses the same engine shape (2 slots × 64, 4 steps per call, prefill chunks of 8) so that the
whole file compiles a handful of programs.
"""

import jax
import numpy as np
import pytest

from jaxseeker.generation import Engine, SamplingConfig, generate, roofline, warmup
from jaxseeker.generation import steps as device_steps
from jaxseeker.generation.keys import episode_key

from .reference import numpy_params, random_prompts, reference_greedy, reference_logits

SHAPE = {"slots": 2, "steps_per_call": 4, "prefill_chunk": 8}  # generate() rounds max_len up to 64
MAX_LEN = 64
SAMPLED = SamplingConfig(temperature=0.8, top_p=0.9, seed=3)


def _text(ids: list[int]) -> str:
    """A stand-in detokenizer: token 17 reads '[17]'."""
    return "".join(f"[{i}]" for i in ids)


def _engine(tiny, **kw) -> Engine:
    cfg, params = tiny
    return Engine(params, cfg, **{**SHAPE, "max_len": MAX_LEN, **kw})


def _run(engine: Engine) -> dict:
    """Step until idle; every event by request id."""
    events = {}
    while engine.has_work():
        for e in engine.step():
            events[e.request_id] = e
    return events


def _first_new(tokens: list[int], start: int) -> int:
    """Index ≥ start of the first token that did not occur before it (so a stop on it is unambiguous)."""
    return next(i for i in range(start, len(tokens)) if tokens[i] not in tokens[:i])


def test_greedy_equals_an_argmax_loop_with_more_prompts_than_slots(tiny):
    cfg, params = tiny
    prompts = random_prompts([5, 19, 1, 30, 9])  # longer than a prefill chunk, shorter, a single token
    out = generate(params, cfg, prompts, max_new_tokens=13, **SHAPE)
    for result, want in zip(out, reference_greedy(params, prompts, 13), strict=True):
        assert (result.tokens, result.reason) == (want, "length")


def test_refilled_slots_do_not_recompile(tiny):
    cfg, params = tiny
    prompts = random_prompts([7, 12, 3, 10], seed=1)
    first = generate(params, cfg, prompts, max_new_tokens=6, **SHAPE)
    compiled = device_steps.decode._cache_size(), device_steps.prefill._cache_size()
    assert generate(params, cfg, prompts[::-1], max_new_tokens=6, **SHAPE)[::-1] == first
    assert (device_steps.decode._cache_size(), device_steps.prefill._cache_size()) == compiled


def test_stop_string_pauses_rolls_back_and_extend_continues(tiny):
    _, params = tiny
    prompt = random_prompts([6], seed=2)[0]
    greedy = reference_greedy(params, [prompt], 12)[0]
    j = _first_new(greedy, 5)  # inside a 4-step call: the tokens sampled after it are discarded
    stop = f"[{greedy[j - 1]}][{greedy[j]}]"  # spans two tokens
    engine = _engine(tiny, stop_strings=[stop, "[never]"], decode=_text)
    engine.submit("r", prompt, max_new_tokens=20)
    (event,) = _run(engine).values()
    assert (event.tokens, event.reason, event.stop) == (greedy[: j + 1], "stop", stop)
    assert engine.context_left("r") == MAX_LEN - len(prompt) - (j + 1)

    observation = random_prompts([7], seed=3)[0]
    engine.extend("r", observation, max_new_tokens=6)
    (event,) = _run(engine).values()
    fresh = reference_greedy(params, [prompt + greedy[: j + 1] + observation], 6)[0]
    assert (event.tokens, event.reason) == (fresh, "length")


def test_eos_id_pauses_and_a_full_context_ends(tiny):
    _, params = tiny
    prompt = random_prompts([40], seed=4)[0]
    greedy = reference_greedy(params, [prompt], 10)[0]
    j = _first_new(greedy, 6)
    engine = _engine(tiny, eos_ids=[greedy[j]])
    engine.submit("a", prompt, max_new_tokens=30)
    engine.submit("b", prompt[:20], max_new_tokens=0)  # nothing to sample: paused at once
    events = _run(engine)
    assert (events["a"].tokens, events["a"].reason, events["a"].stop) == (greedy[: j + 1], "eos", str(greedy[j]))
    assert (events["b"].tokens, events["b"].reason) == ([], "length")

    engine = _engine(tiny)
    engine.submit("c", prompt, max_new_tokens=100)  # the context fills first: 64 - 40 tokens can be sampled
    (event,) = _run(engine).values()
    assert (len(event.tokens), event.reason, engine.context_left("c")) == (24, "context", 0)
    assert event.tokens[:10] == greedy


def test_log_probs_are_log_softmax_of_the_forward_logits(tiny):
    cfg, params = tiny
    prompts = random_prompts([5, 11, 8], seed=5)
    kw = dict(max_new_tokens=9, temperature=SAMPLED.temperature, top_p=SAMPLED.top_p, **SHAPE)
    out = generate(params, cfg, prompts, seed=SAMPLED.seed, **kw)
    for prompt, result in zip(prompts, out):
        logits = reference_logits(params, [prompt + result.tokens])[0][len(prompt) - 1 : -1]
        expected = np.asarray(jax.nn.log_softmax(logits / SAMPLED.temperature))[np.arange(9), result.tokens]
        np.testing.assert_allclose(result.logprobs, expected, atol=2e-4)
    assert [r.tokens for r in generate(params, cfg, prompts, seed=SAMPLED.seed + 1, **kw)] != [r.tokens for r in out]


def test_samples_do_not_depend_on_the_slot(tiny):
    prompts = {"x": random_prompts([5], seed=6)[0], "y": random_prompts([9], seed=7)[0]}
    runs = []
    for order in ("xy", "yx"):
        engine = _engine(tiny, sampling=SAMPLED)
        for rid in order:
            engine.submit(rid, prompts[rid], max_new_tokens=8)
        runs.append({k: e.tokens for k, e in _run(engine).items()})
    assert runs[0] == runs[1]
    assert runs[0]["x"] != runs[0]["y"]


def test_an_episode_key_draws_the_same_tokens_in_any_order_slot_count_or_request_id(tiny):
    """Three sampled episodes keyed by (question id, sample index): submitted in another order, under other request
    ids, on 3 slots or 2 (the third then waits for a free slot), each draws the same tokens; another key does not."""
    prompts = dict(zip("abc", random_prompts([5, 9, 3], seed=16)))
    keys = {q: episode_key(f"question-{q}", 1) for q in prompts}

    def run(order: str, slots: int, prefix: str) -> dict:
        engine, queue, out = _engine(tiny, slots=slots, sampling=SAMPLED), list(order), {}
        while queue or engine.has_work():
            while queue and engine.free_slots():
                q = queue.pop(0)
                engine.submit(prefix + q, prompts[q], max_new_tokens=10, key=keys[q])
            for event in engine.step():
                out[event.request_id[-1]] = event.tokens
                engine.release(event.request_id)
        return out

    first = run("abc", 3, "x")
    assert run("cba", 2, "y") == first
    assert len({tuple(t) for t in first.values()}) == 3
    keys["a"] = episode_key("question-a", 2)
    assert run("abc", 3, "x")["a"] != first["a"]


def test_after_warm_up_requests_of_any_length_compile_nothing(tiny):
    """4 slots: decode buckets 4 and 2, prefill buckets 1, 2 and 4, the prefix copy. Prompts of 1 to 50 tokens (one
    and several prefill chunks, contexts up to the cache's end) and an extension then run on those programs only."""
    _, params = tiny
    engine = _engine(tiny, slots=4)
    assert engine.warm_up().programs == 2 + 3 + 1
    before = warmup.counts()
    prompts = random_prompts([50, 1, 12, 30, 7], seed=8)
    for i, prompt in enumerate(prompts[:4]):
        engine.submit(str(i), prompt, max_new_tokens=40)
    out = _run(engine)
    engine.release("1")
    engine.submit("4", prompts[4], max_new_tokens=5)
    engine.extend("2", prompts[4], max_new_tokens=6)
    out |= _run(engine)
    assert (warmup.counts() - before).compiled == 0
    assert out["0"].reason == "context" and out["0"].tokens == reference_greedy(params, [prompts[0]], 14)[0]
    assert out["4"].tokens == reference_greedy(params, [prompts[4]], 5)[0]
    assert engine.decode_calls > 0 and engine.host_s > 0


def test_the_tally_of_two_rows_is_the_workload_of_their_generation(tiny):
    """Two distinct 13-token prompts (two prefill chunks each) and 6 new tokens a row (calls of 4, then 2): what the
    engine counts is `roofline.generate_workload` of the same run, term by term."""
    cfg, _ = tiny
    engine = _engine(tiny)
    for i, prompt in enumerate(random_prompts([13, 13], seed=4)):
        engine.submit(str(i), prompt, max_new_tokens=6)
    _run(engine)
    assert engine.tally.workload() == roofline.generate_workload(
        cfg, rows=2, prompt_len=13, new_tokens=6, distinct_prompts=2
    )
    assert engine.tally.decode_steps == 6 and engine.tally.prefill_tokens == 24


def test_a_warm_up_for_fewer_requests_than_slots_compiles_only_the_buckets_they_use(tiny):
    """8 slots (decode buckets 2 and 8, prefill 1, 2, 4 and 8) warmed up for 2 requests: decode 2, prefill 1 and 2,
    the prefix copy; two requests of several prefill chunks then run on those programs only."""
    engine = _engine(tiny, slots=8)
    assert engine.warm_up(rows=2).programs == 1 + 2 + 1
    before = warmup.counts()
    for i, prompt in enumerate(random_prompts([30, 3], seed=9)):
        engine.submit(str(i), prompt, max_new_tokens=9)
    _run(engine)
    assert (warmup.counts() - before).compiled == 0


def test_a_warm_up_in_a_fresh_process_loads_its_programs_and_compiles_none(tiny):
    """The tests' persistent compilation cache holds every program a warm-up compiled; with jax's in-memory caches
    cleared (as in a new process), an engine of the same shapes loads all of them and XLA compiles none."""
    first = _engine(tiny, slots=2).warm_up()
    jax.clear_caches()
    again = _engine(tiny, slots=2).warm_up()
    assert first.programs == again.programs == 1 + 2 + 1
    assert (again.counts.compiled, again.counts.loaded) == (0, again.programs)


@pytest.mark.parametrize("on_mesh", [False, True], ids=["no mesh", "a one-device mesh, as an RL run's engine"])
def test_a_few_late_requests_decode_in_calls_of_few_rows(tiny, monkeypatch, on_mesh):
    """8 slots: short requests end early, the long ones left in rows 5 and 7 decode in calls of 2 rows, the last one
    too (buckets 8, 2: one row decodes no faster than two), with the tokens an argmax loop gives. A mesh whose
    devices each hold every slot changes nothing (only one that splits the slots decodes all of them each call)."""
    from jaxseeker.parallel import MeshConfig, make_mesh

    _, params = tiny
    prompts = random_prompts([4, 6, 3, 5, 7, 2, 8, 3], seed=12)
    budgets = [3, 3, 3, 3, 3, 20, 3, 24]
    rows_per_call = []
    decode = device_steps.decode

    def counted(params, cache, rows, tokens, *args, **kw):
        rows_per_call.append(len(tokens))
        return decode(params, cache, rows, tokens, *args, **kw)

    monkeypatch.setattr(device_steps, "decode", counted)
    mesh = make_mesh(MeshConfig(1, 1, 1, 1), jax.devices()[:1]) if on_mesh else None
    engine = _engine(tiny, slots=8, mesh=mesh)
    assert not engine.rows_split
    for i, (prompt, budget) in enumerate(zip(prompts, budgets)):
        engine.submit(f"r{i}", prompt, max_new_tokens=budget)
    events = _run(engine)
    for i, (prompt, budget) in enumerate(zip(prompts, budgets)):
        assert events[f"r{i}"].tokens == reference_greedy(params, [prompt], budget)[0]
    assert rows_per_call[0] == 8 and set(rows_per_call[1:]) == {2}


def test_rows_of_very_different_lengths_decode_together(tiny):
    """Contexts of 3 to 55 tokens in one decode call, read in pages of 8 by tiles of 4 rows (short rows
    share a tile with a long one as the long ones end): every row samples what an argmax loop samples."""
    _, params = tiny
    prompts = random_prompts([55, 3, 40, 6, 21, 2], seed=15)
    budgets = [6, 30, 9, 24, 12, 40]
    engine = _engine(tiny, slots=6, page=8)
    for i, (prompt, budget) in enumerate(zip(prompts, budgets)):
        engine.submit(f"r{i}", prompt, max_new_tokens=budget)
    events = _run(engine)
    for i, (prompt, budget) in enumerate(zip(prompts, budgets)):
        assert events[f"r{i}"].tokens == reference_greedy(params, [prompt], budget)[0]


def _recorded_prefill(monkeypatch) -> list[tuple[int, int]]:
    """The `[rows, chunk]` shape of every prefill call the engine makes from now on."""
    shapes = []
    prefill = device_steps.prefill

    def recorded(params, cache, rows, tokens, *args, **kw):
        shapes.append(tokens.shape)
        return prefill(params, cache, rows, tokens, *args, **kw)

    monkeypatch.setattr(device_steps, "prefill", recorded)
    return shapes


def test_a_shared_prompt_prefix_is_taken_from_the_request_that_wrote_it(tiny, monkeypatch):
    """A question's group of rollouts and a common system prompt: four prompts open with the same 20 tokens, two of
    them are the same prompt. The two distinct ones prefill together; the group's second rollout and the last prompt
    wait for the requests that hold all they share but their last token and take it: nothing of theirs is left to
    prefill. A prompt that shares only the 20 system tokens does not wait for them (its tail needs a chunk anyway)
    but takes them once written. Every request samples what an argmax loop over its whole prompt samples."""
    _, params = tiny
    system, question, other, late = random_prompts([20, 9, 14, 3], seed=13)
    prompts = [system + question, system + other, system + question, system + other[:5]]
    shapes = _recorded_prefill(monkeypatch)
    engine = _engine(tiny, slots=4, prefill_chunk=64)
    for i, prompt in enumerate(prompts):
        engine.submit(str(i), prompt, max_new_tokens=6)
    out = _run(engine)
    assert [out[str(i)].tokens for i in range(4)] == reference_greedy(params, prompts, 6)
    assert (engine.shared_tokens, shapes) == (28 + 24, [(2, 64)])
    engine.release("3")
    engine.submit("4", system + late, max_new_tokens=6)
    out |= _run(engine)
    assert out["4"].tokens == reference_greedy(params, [system + late], 6)[0]
    assert engine.shared_tokens == 28 + 24 + 20
    assert engine.prefilled_tokens == sum(len(p) - 1 for p in [*prompts, system + late]) - engine.shared_tokens

    engine = _engine(tiny, slots=4, prefill_chunk=64, share_prefix=0)
    for i, prompt in enumerate(prompts):
        engine.submit(str(i), prompt, max_new_tokens=6)
    assert {k: e.tokens for k, e in _run(engine).items()} == {k: out[k].tokens for k in "0123"}
    assert engine.shared_tokens == 0


def test_a_request_whose_donor_leaves_first_prefills_its_whole_prompt(tiny):
    _, params = tiny
    system, question, other = random_prompts([20, 4, 6], seed=14)
    engine = _engine(tiny, sampling=SAMPLED)
    engine.submit("donor", system + question, max_new_tokens=3)
    engine.submit("waits", system + other, max_new_tokens=5)
    engine.release("donor")  # before any step: nothing of its prompt was written
    (event,) = _run(engine).values()
    assert engine.shared_tokens == 0 and engine.prefilled_tokens == len(system + other) - 1
    alone = _engine(tiny, sampling=SAMPLED)
    alone.submit("waits", system + other, max_new_tokens=5)
    assert event.tokens == _run(alone)["waits"].tokens  # sampling is keyed by the request, not by its row


def _serve(engine: Engine, prompts: list[list[int]], max_new_tokens: int) -> list[list[int]]:
    """Every prompt through `engine` as a server runs them: submitted as slots free up, released at their event."""
    queue, out = list(enumerate(prompts)), {}
    while queue or engine.has_work():
        while queue and engine.free_slots():
            i, prompt = queue.pop(0)
            engine.submit(str(i), prompt, max_new_tokens=max_new_tokens)
        for event in engine.step():
            out[int(event.request_id)] = event.tokens
            engine.release(event.request_id)
    return [out[i] for i in range(len(prompts))]


def test_a_group_holds_its_shared_prompt_pages_once(tiny):
    """Three rollouts of a 21-token prompt, pages of 8: the second and third take the first's two whole pages by
    reference and copy the third, which they go on writing into; every rollout samples what an argmax loop does."""
    _, params = tiny
    prompt = random_prompts([21], seed=16)[0]
    engine = _engine(tiny, slots=4, page=8)  # 4 slots × 8 pages
    for i in range(3):
        engine.submit(str(i), prompt, max_new_tokens=4)
    out = _run(engine)
    assert [out[str(i)].tokens for i in range(3)] == reference_greedy(params, [prompt] * 3, 4)
    assert engine.shared_tokens == 2 * 20 and engine.prefilled_tokens == 20
    assert engine._pages.free() == 32 - (3 + 1 + 1)  # the first's three pages, one of its own for each other
    for i in range(3):
        engine.release(str(i))
    engine._pages.forget_kept()  # the prefixes the three left
    assert engine._pages.free() == 32


def test_a_conversation_resent_after_its_request_left_shares_the_pages_it_left(tiny):
    """A client sends a prompt, then the same conversation with the reply and a new turn: the second request takes
    the first's written tokens from the prefix it left and prefills its new turn only. Then requests that want every
    page drop the kept prefixes and run as they would on an empty pool."""
    _, params = tiny
    prompt, turn = random_prompts([21, 6], seed=19)
    engine = _engine(tiny, slots=4, page=8)  # 4 slots × 8 pages
    engine.submit("first", prompt, max_new_tokens=5)
    reply = _run(engine)["first"].tokens
    engine.release("first")  # it wrote its prompt and the reply but the last token: 25 tokens
    resent = prompt + reply + turn
    engine.submit("second", resent, max_new_tokens=5)
    assert _run(engine)["second"].tokens == reference_greedy(params, [resent], 5)[0]
    assert engine.shared_tokens == 25 and engine.prefilled_tokens == 20 + 6  # the first's, the new turn
    engine.release("second")
    longest = random_prompts([40, 41, 42, 43], seed=20)  # 4 × 8 pages with their 20 tokens each: the whole pool
    assert _serve(engine, longest, 20) == reference_greedy(params, longest, 20)


def test_a_pool_smaller_than_every_slot_at_max_len_makes_requests_wait_for_pages(tiny):
    """Four slots of 64 positions on 6 pages of 8 (a quarter of 4 × 64): requests wait for the pages the finished
    ones give back, and each samples what it samples alone."""
    _, params = tiny
    prompts = random_prompts([12, 17, 5, 9, 14, 3], seed=17)
    engine = _engine(tiny, slots=4, page=8, pages=6, share_prefix=0)
    assert _serve(engine, prompts, 10) == reference_greedy(params, prompts, 10)
    assert engine._pages.free() == 6


def test_requests_that_outgrow_the_pool_together_are_preempted_and_written_again(tiny):
    """Two requests of 26 and 27 positions on 4 pages of 8 (each needs all four): when neither can go on, the second
    gives its pages back, the first ends, and the second writes its context again and ends as it would alone."""
    _, params = tiny
    prompts = random_prompts([6, 7], seed=18)
    engine = _engine(tiny, page=8, pages=4, share_prefix=0)
    assert _serve(engine, prompts, 20) == reference_greedy(params, prompts, 20)
    assert engine.preempted >= 1 and engine._pages.free() == 4


def test_a_request_whose_context_alone_outgrows_the_pool_raises(tiny):
    engine = _engine(tiny, page=8, pages=4, share_prefix=0)
    engine.submit("long", random_prompts([6], seed=18)[0], max_new_tokens=40)  # 45 positions: six pages
    with pytest.raises(RuntimeError, match="'long' needs more than the 4 pages of 8 positions"):
        _run(engine)


def test_set_params_swaps_weights(tiny):
    cfg, _ = tiny
    other = numpy_params(cfg, seed=1)
    prompt = random_prompts([6], seed=9)[0]
    engine = _engine(tiny)
    engine.set_params(other)
    engine.submit("r", prompt, max_new_tokens=5)
    (event,) = _run(engine).values()
    assert event.tokens == reference_greedy(other, [prompt], 5)[0]
    with pytest.raises(ValueError, match="shape"):
        engine.set_params(numpy_params(cfg.replace(hidden_size=32), seed=0))


def test_unrolled_prefill_gives_the_same_tokens(tiny):
    _, params = tiny
    prompts = random_prompts([21, 3], seed=10)  # several prefill chunks, and one
    engine = _engine(tiny, stacked_prefill=False)
    assert engine._stacked is None  # one copy of the weights: the per-layer one
    for i, prompt in enumerate(prompts):
        engine.submit(str(i), prompt, max_new_tokens=6)
    out = _run(engine)
    assert [out["0"].tokens, out["1"].tokens] == reference_greedy(params, prompts, 6)


def test_unload_frees_weights_and_cache_until_new_params_come(tiny):
    cfg, params = tiny
    other = numpy_params(cfg, seed=2)
    prompt = random_prompts([6], seed=11)[0]
    engine = _engine(tiny)
    engine.submit("held", prompt, max_new_tokens=2)
    with pytest.raises(ValueError, match="requests still hold slots: \\['held'\\]"):
        engine.unload()
    engine.release("held")
    engine.unload()
    assert engine._params is engine._stacked is engine._cache is None
    engine.submit("r", prompt, max_new_tokens=5)
    with pytest.raises(RuntimeError, match="unloaded"):
        engine.step()
    engine.set_params(other)
    (event,) = _run(engine).values()
    assert event.tokens == reference_greedy(other, [prompt], 5)[0]


def test_the_engine_keeps_its_weights_and_cache_in_its_own_dtype(tiny):
    engine = _engine(tiny, dtype="bfloat16")
    weights = jax.tree.leaves((engine._params, engine._stacked))
    assert {str(x.dtype) for x in weights} == {"bfloat16"}  # float32 params given, cast on the way in
    assert {str(x.dtype) for x in engine._cache.k + engine._cache.v} == {"bfloat16"}
    engine.submit("r", random_prompts([6], seed=12)[0], max_new_tokens=3)
    (event,) = _run(engine).values()
    assert len(event.tokens) == 3


def test_bad_requests_are_refused_with_their_id(tiny):
    engine = _engine(tiny)
    engine.submit("a", [1, 2, 3], max_new_tokens=2)
    engine.submit("b", [4], max_new_tokens=2)
    with pytest.raises(ValueError, match="no free slot for 'c'"):
        engine.submit("c", [1], max_new_tokens=2)
    with pytest.raises(ValueError, match="'a' is not paused"):
        engine.extend("a", [4], max_new_tokens=2)
    _run(engine)
    with pytest.raises(ValueError, match="do not fit request 'a'"):
        engine.extend("a", [1] * 60, max_new_tokens=2)
    with pytest.raises(ValueError, match="unknown request 'zz'"):
        engine.release("zz")
    engine.release("a")
    with pytest.raises(ValueError, match="prompt of 'c' has 65 tokens"):
        engine.submit("c", [1] * 65, max_new_tokens=2)
    with pytest.raises(ValueError, match="stop_strings need a `decode`"):
        _engine(tiny, stop_strings=["</answer>"])
