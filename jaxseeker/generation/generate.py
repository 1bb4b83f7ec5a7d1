"""`generate`: the simple entry for scripts and tests, continuous batching on an `Engine`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from jaxseeker.generation.engine import Engine
from jaxseeker.generation.sampling import SamplingConfig
from jaxseeker.model import ModelConfig

LEN_BUCKET = 64  # the cache length is rounded up to a multiple of this (fewer distinct compiled shapes)


@dataclasses.dataclass
class GenerationResult:
    """The sampled tokens of one prompt, their log-probs and why generation ended (see `Event.reason`)."""

    tokens: list[int]
    logprobs: list[float]
    reason: str


def generate(
    params,
    cfg: ModelConfig,
    prompts: list[list[int]],
    *,
    max_new_tokens: int,
    temperature: float = 0.0,
    top_p: float = 1.0,
    top_k: int = 0,
    seed: int = 0,
    stop: Sequence[str] = (),
    eos_ids: Sequence[int] = (),
    decode: Callable[[list[int]], str] | None = None,
    slots: int = 16,
    steps_per_call: int = 8,
    prefill_chunk: int = 128,
) -> list[GenerationResult]:
    """Sample a continuation of every prompt (request id = its index, so results do not depend on `slots`).

    At most `slots` prompts run at once; a finished prompt's slot is refilled by the next one. The cache
    holds the longest prompt plus `max_new_tokens`, rounded up to a multiple of `LEN_BUCKET`.
    """
    if not prompts:
        return []
    longest = max(len(p) for p in prompts) + max_new_tokens
    engine = Engine(
        params,
        cfg,
        slots=min(slots, len(prompts)),
        max_len=-(-longest // LEN_BUCKET) * LEN_BUCKET,
        sampling=SamplingConfig(temperature=temperature, top_p=top_p, top_k=top_k, seed=seed),
        eos_ids=eos_ids,
        stop_strings=stop,
        decode=decode,
        steps_per_call=steps_per_call,
        prefill_chunk=prefill_chunk,
    )
    results: list[GenerationResult | None] = [None] * len(prompts)
    waiting = list(range(len(prompts)))[::-1]
    while waiting or engine.has_work():
        while waiting and engine.free_slots():
            i = waiting.pop()
            engine.submit(str(i), prompts[i], max_new_tokens=max_new_tokens)
        for event in engine.step():
            results[int(event.request_id)] = GenerationResult(event.tokens, event.logprobs, event.reason)
            engine.release(event.request_id)
    return results
