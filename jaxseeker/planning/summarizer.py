"""The page summariser of an RL recipe's `visit` tool, sized: what a step asks of it and the chips that serve it.

Every page a `visit` call reads goes to `tools.summarizer`, an OpenAI-compatible server that runs apart from the
training slice (`tools.extract.llm_extract`). `jaxseeker plan` sizes that server on chips of the plan's kind:

  calls      a step's episodes (rl.batch_questions × rl.group_size) × an episode's visits. Assumed: every tool call
             visits one page (with tools.visit.max_urls pages a call there would be more), until the context is full
             of the pages' observations or rollout.max_tool_calls is reached: min(max_tool_calls, ⌊(max_context_tokens
             − answer_reserve_tokens) / an observation's tokens⌋), an observation being a page's evidence
             (tools.visit.page_chars) and its summary (a quarter of that).
  tokens     a call's prompt: the extractor's prompt around a page cut at tools.visit.llm_input_chars (every page
             that long: an upper bound; the goal's few words left out), at `CHARS_PER_TOKEN` characters a token; its
             reply: up to tools.summarizer.max_tokens (`tools.extract.EXTRACT_MAX_TOKENS`).
  model      summarizer.model's shape from `KNOWN` (the names the paper recipes give), else tools.summarizer_shape;
             weights and KV cache in bf16, as vLLM serves these checkpoints.
  time       the step's rollouts at their ideal time (their FLOPs at the slice's peak: the plan's `ideal step s`
             share): a summariser that keeps up with that never holds the rollouts back. Decoding is bandwidth-bound,
             so real rollouts take longer and the summariser's share falls in proportion.
  servers    one per host of chips (the weights split over the host's chips, as vLLM's tensor parallelism on a node
             or JetStream on a TPU host), holding beside its weights as many calls as their whole KV leaves room for.
             At the roofline a call's prefill computes its prompt at the chips' peak, and a decode step reads the
             weights and the calls' KV at the chips' bandwidth (or computes their tokens, whichever is slower).
             Servers = ⌈calls a second the step needs / calls a second a server completes⌉.
  in flight  the calls the agents must keep open for that rate (Little's law: the rate × a call's time on its
             server); the client opens at most tools.summarizer.max_concurrency of them per host.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jaxseeker.model.config import ModelConfig
from jaxseeker.model.flops import flops_per_token, kv_cache_bytes
from jaxseeker.model.params import count_params
from jaxseeker.planning.chips import Chip, GiB
from jaxseeker.planning.memory import BYTES
from jaxseeker.tools.config import ToolsConfig
from jaxseeker.tools.extract import EXTRACTOR_PROMPT, reply_cap
from jaxseeker.train.recipe import RecipeError, build

if TYPE_CHECKING:
    from jaxseeker.agent import RolloutConfig

CHARS_PER_TOKEN = 4.0  # English web text in a ~150K BPE vocabulary such as Qwen's: about 4 characters a token
SERVING_DTYPE = "bfloat16"


def _qwen25(hidden: int, intermediate: int, layers: int, heads: int, kv_heads: int) -> dict[str, Any]:
    """A Qwen2.5 checkpoint's shape (config.json): 152,064 tokens, heads of 128, q / k / v biases, untied head."""
    return {
        "model_type": "qwen2",
        "vocab_size": 152064,
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "num_layers": layers,
        "num_heads": heads,
        "num_kv_heads": kv_heads,
        "head_dim": 128,
        "qkv_bias": True,
        "qk_norm": False,
        "tie_word_embeddings": False,
    }


KNOWN = {  # the summarisers' shapes, by lower-cased name without the organisation
    "qwen2.5-72b-instruct": _qwen25(8192, 29568, 80, 64, 8),
    "qwen2.5-32b-instruct": _qwen25(5120, 27648, 64, 40, 8),
    "qwen2.5-7b-instruct": _qwen25(3584, 18944, 28, 28, 4),
}


def summarizer_model(tools: ToolsConfig) -> ModelConfig:
    """The summariser's model shape: tools.summarizer_shape, else `KNOWN`'s entry for summarizer.model; a RecipeError
    naming the key to give when neither."""
    if tools.summarizer_shape is not None:
        return build(ModelConfig, dict(tools.summarizer_shape), "tools.summarizer_shape")
    name = tools.summarizer.model
    key = name.rsplit("/", 1)[-1].lower()
    if key not in KNOWN:
        raise RecipeError(
            f"tools.summarizer.model {name!r}: `plan` does not know its size; give its shape in "
            f"tools.summarizer_shape (a model section's keys: num_layers, hidden_size, intermediate_size, num_heads, "
            f"num_kv_heads, head_dim, vocab_size), or name one of {sorted(KNOWN)}"
        )
    return ModelConfig(**KNOWN[key])


def visits_per_episode(rollout: RolloutConfig, tools: ToolsConfig) -> int:
    """Pages an episode visits (module docstring): one a tool call, until the context is full of their observations
    or `rollout.max_tool_calls` is reached."""
    page = tools.visit.page_chars
    observation = math.ceil((page + page // 4) / CHARS_PER_TOKEN)
    room = rollout.max_context_tokens - rollout.answer_reserve_tokens
    return max(1, min(rollout.max_tool_calls, room // observation))


def call_tokens(tools: ToolsConfig) -> tuple[int, int]:
    """(prompt, reply cap) tokens of one summariser call: the extractor's prompt around a page cut at
    tools.visit.llm_input_chars, and tools.summarizer.max_tokens (`tools.extract.reply_cap`)."""
    prompt = math.ceil((len(EXTRACTOR_PROMPT) + tools.visit.llm_input_chars) / CHARS_PER_TOKEN)
    return prompt, reply_cap(tools.summarizer)


def server(m: ModelConfig, chip: Chip, budget: float, per_host: int, prompt: int, reply: int) -> dict[str, float]:
    """One server on a host's `per_host` chips of `budget` bytes each (module docstring): its calls in flight
    (`batch`; 0 when the weights and one call's KV do not fit), the seconds of a batch of them (`call_s`: their
    prefills, then `reply` decode steps), the calls and decoded tokens a second it completes, and what bounds it."""
    weights = count_params(m) * BYTES[SERVING_DTYPE]
    kv_call = kv_cache_bytes(m, prompt + reply, SERVING_DTYPE)
    batch = max(0, int((per_host * budget - weights) // kv_call))
    out = {"weights_bytes": float(weights), "kv_call_bytes": float(kv_call), "batch": batch}
    if batch < 1:
        return {**out, "call_s": None, "calls_per_s": 0.0, "decode_tokens_per_s": 0.0, "bound": "memory"}
    flops, bandwidth = per_host * chip.peak_flops, per_host * chip.hbm_bandwidth
    prefill_s = prompt * flops_per_token(m, prompt // 2) / flops  # one call's prompt
    read_s = (weights + batch * kv_call) / bandwidth  # a decode step: the weights and every call's whole KV
    compute_s = batch * flops_per_token(m, prompt + reply // 2) / flops
    step_s = max(read_s, compute_s)
    call_s = batch * prefill_s + reply * step_s
    bound = "prefill" if batch * prefill_s > reply * step_s else "decode bandwidth" if read_s >= compute_s else "decode"
    return {
        **out,
        "call_s": call_s,
        "calls_per_s": batch / call_s,
        "decode_tokens_per_s": batch * reply / call_s,
        "bound": bound,
    }


def summarizer_report(
    recipe: Mapping[str, Any], stage: Mapping[str, Any], chip: Chip, budget: float, hosts: int
) -> dict | None:
    """What one RL stage of `recipe` (its plan, `fit.plan_stage`) asks of the summariser, on `chip`s of `budget`
    bytes, the slice having `hosts` hosts (module docstring); None when its tools name no summariser."""
    from jaxseeker.agent import RolloutConfig
    from jaxseeker.tools import tools_config
    from jaxseeker.train.rl.config import RLConfig

    tools = tools_config(recipe.get("tools") or {"enabled": []})
    if tools.summarizer is None or "visit" not in tools.enabled:
        return None
    m = summarizer_model(tools)
    rollout = build(RolloutConfig, recipe.get("rollout"), "rollout")
    rl = build(RLConfig, recipe.get("rl"), "rl")
    episodes = rl.batch_questions * rl.group_size
    visits = visits_per_episode(rollout, tools)
    prompt, reply = call_tokens(tools)
    per_host = chip.per_host
    rollout_s = stage["flops"]["device_rollout"] / (stage["chips"] * chip.peak_flops)
    calls = episodes * visits
    rate = calls / rollout_s
    call_flops = prompt * flops_per_token(m, prompt // 2) + reply * flops_per_token(m, prompt + reply // 2)
    one = server(m, chip, budget, per_host, prompt, reply)
    servers = math.ceil(rate / one["calls_per_s"]) if one["batch"] else None
    in_flight = math.ceil(rate * one["call_s"]) if one["batch"] else None
    given = tools.summarizer_chips or None
    client = hosts * tools.summarizer.max_concurrency
    report = {
        "model": tools.summarizer.model,
        "parameters": count_params(m),
        "episodes": episodes,
        "visits_per_episode": visits,
        "calls": calls,
        "prompt_tokens": prompt,
        "reply_tokens": reply,
        "rollout_s": rollout_s,
        "calls_per_s": rate,
        "decode_tokens_per_s": rate * reply,
        "prefill_tokens_per_s": rate * prompt,
        "flops_ratio": calls * call_flops / stage["flops"]["device_rollout"],  # its FLOPs over the rollouts'
        "server": {**one, "chips": per_host},
        "servers": servers,
        "chips_needed": servers * per_host if servers else None,
        "chips_given": given,
        "in_flight": in_flight,
        "client_in_flight": client,
    }
    report["problems"] = _problems(report, chip, budget, hosts)
    report["fits"] = not report["problems"] if given or not one["batch"] else None
    return report


def _problems(r: Mapping[str, Any], chip: Chip, budget: float, hosts: int) -> list[str]:
    """What the recipe should change for its summariser to keep up, each with the key to set."""
    one, out = r["server"], []
    fewer = (
        "or fewer tokens a call (tools.visit.llm_input_chars), fewer visits (rollout.max_tool_calls) or a smaller "
        "tools.summarizer.model"
    )
    if not one["batch"]:
        need = (one["weights_bytes"] + one["kv_call_bytes"]) / GiB
        return [
            f"its weights and one call's KV ({need:,.1f} GiB) do not fit a host's {one['chips']} × "
            f"{budget / GiB:.1f} GiB: a smaller tools.summarizer.model or tools.visit.llm_input_chars"
        ]
    if r["chips_given"] and r["chips_given"] < r["chips_needed"]:
        out.append(
            f"tools.summarizer_chips={r['chips_given']} is short of the {r['chips_needed']} {chip.name} chips it "
            f"needs: give {r['chips_needed']}, {fewer}"
        )
    if r["client_in_flight"] < r["in_flight"]:
        out.append(
            f"the agents open {r['client_in_flight']} calls at once ({hosts} host{'s' * (hosts > 1)} × "
            f"tools.summarizer.max_concurrency) where {r['in_flight']:,} keep up: set tools.summarizer.max_concurrency "
            f"to {math.ceil(r['in_flight'] / hosts)}, {fewer}"
        )
    return out


def summarizer_lines(r: Mapping[str, Any]) -> list[str]:
    """The plan's lines on its summariser (`summarizer_report`)."""
    one = r["server"]
    lines = [
        f"summariser {r['model']} ({r['parameters'] / 1e9:.1f}B, bf16): {r['calls']:,} calls a step = "
        f"{r['episodes']} episodes × {r['visits_per_episode']} visits (one page a tool call until the pages fill "
        f"the context); a call {r['prompt_tokens']:,} prompt + {r['reply_tokens']:,} reply tokens",
        f"  at the rollouts' ideal {r['rollout_s']:,.0f} s: {r['calls_per_s']:,.1f} calls/s, decode "
        f"{r['decode_tokens_per_s']:,.0f} tokens/s, prefill {r['prefill_tokens_per_s']:,.0f} tokens/s; its FLOPs "
        f"are {r['flops_ratio']:,.1f}× the rollouts'",
    ]
    if one["batch"]:
        lines.append(
            f"  a server on {one['chips']} chips: weights {one['weights_bytes'] / GiB:,.1f} GiB + {one['batch']} "
            f"calls' KV × {one['kv_call_bytes'] / GiB:,.2f} GiB; {one['decode_tokens_per_s']:,.0f} decode tokens/s "
            f"at the roofline ({one['bound']}-bound) → {r['servers']} servers = {r['chips_needed']:,} chips"
            + (f" (given {r['chips_given']})" if r["chips_given"] else " (tools.summarizer_chips: not stated)")
            + f", {r['in_flight']:,} calls in flight"
        )
    lines += [f"  summariser does not keep up: {p}" for p in r["problems"]]
    return lines
