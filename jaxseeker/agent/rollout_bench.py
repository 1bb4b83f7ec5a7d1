"""The rollout benches. `jaxseeker bench rollout` (`bench_rollout`): the loop's utilisation, a tiny model calling a
tool that sleeps. `jaxseeker bench rollout --model` (`compare_rollouts`): greedy ReAct episodes of a real model on
jaxseeker's Engine against the same loop on transformers' `generate` (`generation.hf_engine.HFEngine`), with the same
weights, tools and questions, in one run.

Both sides run `agent.loop.rollout` with one tool registry; only the engine differs. The engine's first rollout
compiles its shapes and is timed apart (`first_s`); then each side rolls out the same episodes `repeats` times, in
turn, and the median wall time of each counts (the machine may be shared). The episodes of the last run are
compared token for token: greedy decoding on both sides gives the same episodes but where float differences flip
an argmax.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jaxseeker.agent.engine import make_engine
from jaxseeker.agent.episode import Episode, Question
from jaxseeker.agent.loop import rollout
from jaxseeker.agent.prompts import engine_stops
from jaxseeker.agent.rollout_types import RolloutConfig, RolloutResult, RolloutStats
from jaxseeker.rewards import exact_match
from jaxseeker.rewards.judges import gold_answers
from jaxseeker.tools import Tool, ToolRegistry

SIDES = ("jaxseeker", "hf")
SIDE_NAMES = {"jaxseeker": "jaxseeker Engine", "hf": "HF generate (torch)"}


def correct(episode: Episode) -> bool:
    """The episode's prediction matches its question's answer (exact match after normalisation)."""
    return episode.prediction is not None and exact_match(episode.prediction, gold_answers(episode.answer))


def side_summary(runs: Sequence[RolloutResult]) -> dict[str, Any]:
    """A side's figures: median wall seconds over `runs`, and the tokens, terminations and pass@1 of the last."""
    last = runs[-1]
    wall = statistics.median(r.stats.wall_s for r in runs)
    episodes = last.episodes
    sampled = last.stats.sampled_tokens
    return {
        "wall_s": wall,
        "runs_s": [r.stats.wall_s for r in runs],
        "episodes": len(episodes),
        "sampled_tokens": sampled,
        "tokens_per_s": sampled / wall if wall > 0 else 0.0,
        "context_tokens": sum(len(e.token_ids) for e in episodes),
        "tool_calls": last.stats.tool_calls,
        "terminations": last.stats.terminations,
        "pass_at_1": sum(correct(e) for e in episodes) / len(episodes) if episodes else 0.0,
    }


def agreement(ours: Sequence[Episode], theirs: Sequence[Episode]) -> dict[str, Any]:
    """How many episodes (paired by question and sample) have the same tokens on both sides, and the largest
    log-prob difference over those."""
    same = [(a, b) for a, b in zip(ours, theirs, strict=True) if a.token_ids == b.token_ids]
    gaps = [abs(p - q) for a, b in same for p, q in zip(a.logprobs, b.logprobs, strict=True)]
    return {"identical_episodes": len(same), "max_logprob_diff": max(gaps, default=0.0)}


def compare_rollouts(
    model_dir: str | Path,
    registry: ToolRegistry,
    questions: Sequence[Question],
    config: RolloutConfig,
    *,
    slots: int = 16,
    steps_per_call: int = 8,
    repeats: int = 1,
    progress: bool = False,
) -> dict[str, Any]:
    """Greedy episodes of the model in `model_dir` (an HF directory) over `questions` with `registry`'s tools,
    limited by `config`, on jaxseeker's Engine (`slots` rows, float32) and on HF `generate` (one request at a time,
    float32, torch on the CPU); each side's figures (`side_summary`), their ratios and their agreement."""
    import torch

    from jaxseeker import model
    from jaxseeker.data.tokenizer import load_tokenizer
    from jaxseeker.generation import SamplingConfig, roofline
    from jaxseeker.generation.bench import hf_pretrained
    from jaxseeker.generation.hf_engine import HFEngine

    tokenizer = load_tokenizer(model_dir)
    cfg, params = model.load_hf(model_dir)
    max_len = config.max_context_tokens
    engines = {
        "jaxseeker": make_engine(
            params,
            cfg,
            tokenizer,
            slots=slots,
            max_len=max_len,
            sampling=SamplingConfig(temperature=0.0),
            steps_per_call=steps_per_call,
            dtype="float32",
        ),
        "hf": HFEngine(hf_pretrained(model_dir), tokenizer, slots=slots, max_len=max_len, **_stops(tokenizer)),
    }

    def run(side: str) -> RolloutResult:
        return rollout(engines[side], tokenizer, registry, questions, config, progress=progress)

    start = time.perf_counter()
    run("jaxseeker")  # compiles the engine's prefill and decode shapes
    first_s = time.perf_counter() - start
    before = engines["jaxseeker"].tally.workload()
    runs: dict[str, list[RolloutResult]] = {side: [] for side in SIDES}
    for _ in range(max(repeats, 1)):
        for side in SIDES:
            runs[side].append(run(side))
    sides = {side: side_summary(runs[side]) for side in SIDES}
    ours, theirs = sides["jaxseeker"], sides["hf"]
    # the same greedy episodes each repeat: one run's work is the mean; the ceilings are measured in this run
    roof_s = (engines["jaxseeker"].tally.workload() - before).seconds(*roofline.measure()) / max(repeats, 1)
    return {
        "model": str(model_dir),
        "params_M": model.count_params(cfg) / 1e6,
        "torch_threads": torch.get_num_threads(),
        "questions": len(questions),
        "slots": slots,
        "repeats": max(repeats, 1),
        "max_context": max_len,
        "max_tokens_per_turn": config.max_tokens_per_turn,
        "max_tool_calls": config.max_tool_calls,
        "sides": sides,
        "ours_compile_s": first_s - ours["runs_s"][0],
        "speedup": theirs["wall_s"] / ours["wall_s"] if ours["wall_s"] > 0 else 0.0,
        "roofline_s": roof_s,
        **agreement(runs["jaxseeker"][-1].episodes, runs["hf"][-1].episodes),
    }


def _stops(tokenizer: Any) -> dict[str, Any]:
    """The loop's EOS ids and stop strings (`prompts.engine_stops`) as HFEngine's keywords."""
    eos_ids, stop_strings = engine_stops(tokenizer)
    return {"eos_ids": eos_ids, "stop_strings": stop_strings}


def format_comparison(result: dict[str, Any]) -> str:
    """The comparison as a small text table."""
    runs = result["repeats"]
    lines = [
        (
            f"greedy ReAct rollouts, {result['questions']} questions, {result['slots']} slots, context "
            f"{result['max_context']}, {result['max_tokens_per_turn']} tokens a turn, {result['max_tool_calls']} tool "
            f"calls, f32, {result['params_M']:.1f}M params ({result['model']}), torch threads {result['torch_threads']}"
        ),
        f"{'median of ' + str(runs) if runs > 1 else 'one run':<22}{'seconds':>9}{'episodes':>10}{'sampled':>9}"
        f"{'tokens/s':>10}{'context':>9}{'tool calls':>12}{'pass@1':>8}",
    ]
    for side in SIDES:
        s = result["sides"][side]
        lines.append(
            f"{SIDE_NAMES[side]:<22}{s['wall_s']:>9.1f}{s['episodes']:>10}{s['sampled_tokens']:>9}"
            f"{s['tokens_per_s']:>10.1f}{s['context_tokens']:>9}{s['tool_calls']:>12}{s['pass_at_1']:>8.1%}"
        )
    episodes = result["sides"]["jaxseeker"]["episodes"]
    roof, walls = result["roofline_s"], {side: result["sides"][side]["wall_s"] for side in SIDES}
    lines += [
        f"speedup jaxseeker / HF (wall): {result['speedup']:.2f}x",
        f"our compile (first run only, excluded above): {result['ours_compile_s']:.1f} s",
        (
            f"roofline of the episodes' work (`generation.roofline`, ceilings measured in this run): "
            f"{roof:.1f} s; jaxseeker at {roof / walls['jaxseeker']:.0%} of it, HF at {roof / walls['hf']:.0%}"
        ),
        (
            f"episodes with identical greedy tokens: {result['identical_episodes']}/{episodes} "
            f"(largest log-prob difference over those: {result['max_logprob_diff']:.1e})"
        ),
    ]
    return "\n".join(lines)


def sleep_tool(latency_s: float) -> Tool:
    """A tool that waits `latency_s` seconds (a stand-in for a web call) and says so."""

    def fn(args: dict[str, Any]) -> str:
        time.sleep(latency_s)
        return f"slept {latency_s:.3f}s"

    return Tool("sleep", "Wait a moment.", {"type": "object", "properties": {}}, fn)


BENCH_CALL = '{"name": "sleep", "arguments": {}}'


@dataclasses.dataclass(frozen=True)
class PromptWrites:
    """How the episodes' prompts reached the engine's cache: `tokens`, the prompt tokens the cache held (each
    episode's prompt but its last token, the first decode step's input); `shared`, those shared from a request that
    held them (`Engine.shared_tokens`: its pages taken by reference); the rest, `prefilled`, were computed by prefill
    calls. `distinct`: the tokens of the distinct prompts, what prefilling each once costs."""

    tokens: int
    shared: int
    distinct: int

    @property
    def prefilled(self) -> int:
        """Prompt tokens computed by prefill calls."""
        return self.tokens - self.shared


def prompt_writes(episodes: Sequence[Episode], shared: int) -> PromptWrites:
    """The prompt tokens of `episodes` (up to each one's first policy token) and how many of them were `shared`."""
    prompts = [tuple(e.token_ids[: e.loss_mask.index(1) if 1 in e.loss_mask else len(e.token_ids)]) for e in episodes]
    return PromptWrites(
        tokens=sum(len(p) - 1 for p in prompts), shared=shared, distinct=sum(len(p) - 1 for p in set(prompts))
    )


def bench_rollout(
    *,
    slots: int = 16,
    episodes: int = 64,
    group_size: int = 1,
    tool_calls: int = 4,
    tool_latency_s: float = 0.2,
    think_tokens: float = 32.0,
    steps_per_call: int = 8,
    max_len: int = 2048,
    seed: int = 0,
    progress: bool = False,
) -> tuple[RolloutStats, PromptWrites]:
    """Rollout-loop utilisation: a tiny model that calls a `tool_latency_s` tool every turn, `tool_calls` per episode.

    The model (`tool_calling_model`) thinks for a random number of tokens (mean `think_tokens`, at
    most 8× that per turn) and then calls the sleep tool, on the real Engine; each episode ends after
    `tool_calls` calls ("max_tool_calls"). `group_size`: rollouts a question (as an RL step's groups; `episodes`
    rounded down to whole groups), which share its prompt. A warm-up rollout compiles the engine first; the stats
    and the prompts' writes (`PromptWrites`) are those of the second rollout.
    """
    from jaxseeker.agent.scripted import tool_calling_model
    from jaxseeker.generation import SamplingConfig

    tokenizer, cfg, params = tool_calling_model(BENCH_CALL, mean_think_tokens=think_tokens, seed=seed)
    registry = ToolRegistry([sleep_tool(tool_latency_s)])
    turn = int(8 * think_tokens) + 8
    needed = bench_rollout_len(tool_calls, think_tokens)
    if needed > max_len:
        raise ValueError(
            f"bench rollout: max_len={max_len} is too small for {tool_calls} calls of "
            f"{think_tokens:g}-token thoughts (needs about {needed})"
        )
    config = RolloutConfig(
        max_tool_calls=tool_calls,
        max_tokens_per_turn=turn,
        max_context_tokens=max_len,
        answer_reserve_tokens=0,
        tool_workers=max(slots, 1),
    )
    engine = make_engine(
        params,
        cfg,
        tokenizer,
        slots=slots,
        max_len=max_len,
        sampling=SamplingConfig(temperature=1.0, seed=seed),
        steps_per_call=steps_per_call,
    )
    questions = [f"question {i}" for i in range(max(episodes // group_size, 1))]
    rollout(engine, tokenizer, registry, [f"warm-up {i}" for i in range(min(slots, episodes))], config, progress=False)
    before = engine.shared_tokens
    result = rollout(engine, tokenizer, registry, questions, config, n_per_question=group_size, progress=progress)
    return result.stats, prompt_writes(result.episodes, engine.shared_tokens - before)


def bench_rollout_len(tool_calls: int, think_tokens: float) -> int:
    """About the context tokens a `bench_rollout` episode needs: the prompt, then each turn and observation."""
    return 200 + (tool_calls + 1) * (int(8 * think_tokens) + 8 + 40)
