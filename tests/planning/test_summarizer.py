"""`jaxseeker plan` sizes the page summariser a recipe's `visit` tool calls: the calls a step makes, a call's tokens,
the model's weights and KV, the chips that keep up with the rollouts, and what to change when the chips given fall
short; each number re-derived here from the recipe and the chip's data sheet."""

import json
import math

import pytest

from jaxseeker.cli import main
from jaxseeker.model import count_params
from jaxseeker.model.config import ModelConfig
from jaxseeker.model.flops import flops_per_token
from jaxseeker.planning.chips import CHIPS, TARGETS
from jaxseeker.planning.command import make_plan
from jaxseeker.planning.recipe import model_config
from jaxseeker.planning.summarizer import KNOWN
from jaxseeker.tools.extract import EXTRACTOR_PROMPT
from jaxseeker.train.recipe import RecipeError, read_recipe

RECIPE = "websailor_qwen2.5-72b_dupo"


@pytest.fixture(scope="module")
def plan72():
    """The shipped 72B DUPO recipe planned on its target, a v5p-128."""
    return make_plan(read_recipe(RECIPE))


def test_the_72b_recipe_s_summariser_from_the_arithmetic(plan72):
    """128 questions × 8 rollouts; a page's observation is 8,000 + 2,000 characters = 2,500 tokens, so 12 fill the
    32,768-token context less its 1,024 reserved (below the 100 tool calls); a call sends the extractor's prompt
    around 100,000 characters of page and gets up to 2,048 tokens back; the summariser is the policy's own model."""
    r = plan72["summarizer"]
    stage = plan72["stages"][0]
    assert (r["episodes"], r["visits_per_episode"], r["calls"]) == (1024, 12, 12288)
    prompt = math.ceil((len(EXTRACTOR_PROMPT) + 100_000) / 4)
    assert (r["prompt_tokens"], r["reply_tokens"]) == (prompt, 2048)
    assert r["parameters"] == plan72["model"]["parameters"]  # Qwen2.5-72B-Instruct summarises for its own RL

    v5p = CHIPS["v5p"]
    rollout_s = stage["flops"]["device_rollout"] / (64 * v5p.peak_flops)
    rate = 12288 / rollout_s
    assert r["rollout_s"] == pytest.approx(rollout_s)
    assert r["decode_tokens_per_s"] == pytest.approx(rate * 2048)
    assert r["prefill_tokens_per_s"] == pytest.approx(rate * prompt)

    # one server: a host's 4 chips of 95% of 95.74 GiB; bf16 weights; each call's whole K and V, 80 layers × 8 heads
    weights = 2 * r["parameters"]
    kv_call = 2 * 80 * 8 * 128 * 2 * (prompt + 2048)
    batch = int((4 * TARGETS["v5p-128"].budget() - weights) // kv_call)
    one = r["server"]
    assert (one["weights_bytes"], one["kv_call_bytes"], one["batch"]) == (weights, kv_call, batch)
    m = ModelConfig(**KNOWN["qwen2.5-72b-instruct"])
    prefill_s = prompt * flops_per_token(m, prompt // 2) / (4 * v5p.peak_flops)
    step_s = (weights + batch * kv_call) / (4 * v5p.hbm_bandwidth)  # bandwidth-bound: reads dwarf the dots
    assert step_s > batch * flops_per_token(m, prompt + 1024) / (4 * v5p.peak_flops)
    call_s = batch * prefill_s + 2048 * step_s
    assert one["call_s"] == pytest.approx(call_s)
    servers = math.ceil(rate / (batch / call_s))
    assert (r["servers"], r["chips_needed"]) == (servers, 4 * servers)
    assert r["in_flight"] == math.ceil(rate * call_s)
    # 16 hosts × 8 calls each are far fewer than keep up: flagged with the key and the value that would
    assert r["client_in_flight"] == 128 < r["in_flight"]
    [problem] = r["problems"]
    assert f"tools.summarizer.max_concurrency to {math.ceil(r['in_flight'] / 16)}" in problem
    assert r["chips_given"] is None and r["fits"] is None  # no chips stated: nothing to fall short of
    assert plan72["fits"]  # the summariser runs apart: the training plan fits as before


def test_the_chips_given_to_the_summariser_are_checked(plan72):
    """Fewer chips than it needs: flagged with the count to give; enough chips and client concurrency: it fits."""
    need, in_flight = plan72["summarizer"]["chips_needed"], plan72["summarizer"]["in_flight"]
    short = make_plan(read_recipe(RECIPE, [f"tools.summarizer_chips={need - 4}"]))["summarizer"]
    assert short["fits"] is False
    assert any(f"tools.summarizer_chips={need - 4} is short of the {need}" in p for p in short["problems"])
    enough = [f"tools.summarizer_chips={need}", f"tools.summarizer.max_concurrency={math.ceil(in_flight / 16)}"]
    ok = make_plan(read_recipe(RECIPE, enough))["summarizer"]
    assert (ok["fits"], ok["problems"]) == (True, [])


def test_shorter_pages_need_fewer_chips_and_a_model_too_big_for_a_host_is_flagged():
    """A fifth of the page characters: a fifth of the prefill tokens and fewer chips, as a quarter of the reply
    tokens (tools.summarizer.max_tokens, the cap the visit tool sends); on v5e hosts (4 × 16 GiB) the
    72B weights alone do not fit, and the plan says so instead of counting servers."""
    full = make_plan(read_recipe(RECIPE))["summarizer"]
    short = make_plan(read_recipe(RECIPE, ["tools.visit.llm_input_chars=20000"]))["summarizer"]
    assert short["prompt_tokens"] == math.ceil((len(EXTRACTOR_PROMPT) + 20_000) / 4)
    assert short["chips_needed"] < full["chips_needed"]
    capped = make_plan(read_recipe(RECIPE, ["tools.summarizer.max_tokens=512"]))["summarizer"]
    assert capped["reply_tokens"] == 512 and capped["chips_needed"] < full["chips_needed"]  # the visit tool's cap too
    v5e = make_plan(read_recipe(RECIPE), chip="v5e")["summarizer"]
    assert (v5e["server"]["batch"], v5e["servers"], v5e["fits"]) == (0, None, False)
    assert "do not fit a host's 4" in v5e["problems"][0]


@pytest.mark.parametrize("size", ["7b", "32b", "72b"])
def test_the_known_summarisers_are_the_shapes_the_paper_recipes_restate(size):
    """Each known shape has the parameters and KV heads of the policy model section the WebSailor recipe of that size
    restates from the same checkpoint's config.json."""
    policy = model_config(read_recipe(f"websailor_qwen2.5-{size}_dupo")["model"], [])
    known = ModelConfig(**KNOWN[f"qwen2.5-{size}-instruct"])
    assert count_params(known) == count_params(policy)
    assert (known.num_layers, known.num_kv_heads, known.head_dim) == (
        policy.num_layers,
        policy.num_kv_heads,
        policy.head_dim,
    )


def test_an_unknown_summariser_needs_its_shape_named_by_key():
    with pytest.raises(RecipeError, match=r"tools\.summarizer\.model 'my-summariser'.*tools\.summarizer_shape"):
        make_plan(read_recipe(RECIPE, ["tools.summarizer.model=my-summariser"]))
    shape = {**KNOWN["qwen2.5-7b-instruct"], "num_layers": 14}
    recipe = read_recipe(RECIPE, ["tools.summarizer.model=my-summariser"])
    recipe["tools"]["summarizer_shape"] = shape
    r = make_plan(recipe)["summarizer"]
    assert r["parameters"] == count_params(ModelConfig(**shape))
    assert r["server"]["kv_call_bytes"] == 2 * 14 * 4 * 128 * 2 * (r["prompt_tokens"] + r["reply_tokens"])


def test_a_recipe_without_a_summariser_plans_none(capsys):
    """rl_tiny's visits read the embedded world offline: no summariser in the plan, its JSON or its table."""
    plan = make_plan(read_recipe("rl_tiny"))
    assert plan["summarizer"] is None and all(s["summarizer"] is None for s in plan["stages"])
    assert main(["plan", "--config", "rl_tiny", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["summarizer"] is None
    assert main(["plan", "--config", "rl_tiny"]) == 0
    assert "summariser" not in capsys.readouterr().out


def test_plan_shows_the_summariser_in_its_table_and_json(capsys):
    assert main(["plan", "--config", RECIPE]) == 0
    text = capsys.readouterr().out
    assert "summariser calls" in text and "12,288 calls a step = 1024 episodes × 12 visits" in text
    assert main(["plan", "--config", RECIPE, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["summarizer"]["calls"] == plan["stages"][0]["summarizer"]["calls"] == 12288
