"""The generation engine the rollout loop drives: jaxseeker's `generation.Engine`, stopping each turn where the agent's
prompt format ends one (`prompts.engine_stops`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jaxseeker import model
from jaxseeker.agent.prompts import Renderer, engine_stops

if TYPE_CHECKING:  # jax loads inside the function, so the commands that import this build their parsers quickly
    from jax.sharding import Mesh

    from jaxseeker.generation import Engine, SamplingConfig
    from jaxseeker.parallel import Rules


def make_engine(
    params: Any,
    cfg: model.ModelConfig,
    tokenizer: Any,
    *,
    slots: int,
    max_len: int,
    sampling: SamplingConfig,
    steps_per_call: int = 8,
    mesh: Mesh | None = None,
    rules: Rules | None = None,
    **layout: Any,
) -> Engine:
    """A generation Engine that stops turns the way the rollout loop expects (`engine_stops`); with `mesh`, the
    params and the cache are sharded over it by their logical axes (`rules`, default `parallel.GENERATION_RULES`).
    `layout`: the Engine's `dtype`, `handoff_mesh`, `stacked_prefill` and `pages`."""
    from jaxseeker.generation import Engine

    eos_ids, stop_strings = engine_stops(tokenizer)
    renderer = Renderer(tokenizer)
    return Engine(
        params,
        cfg,
        slots=slots,
        max_len=max_len,
        sampling=sampling,
        eos_ids=eos_ids,
        stop_strings=stop_strings,
        decode=renderer.decode,
        steps_per_call=steps_per_call,
        mesh=mesh,
        rules=rules,
        **layout,
    )
