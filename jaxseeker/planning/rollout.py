"""The rollout engine's part of an RL stage's plan: its replicas, weights, KV cache, working set and the hand-off,
per chip, as `train.rl.loop` lays them out (`generation.Engine` in `parallel.GENERATION_RULES`).

The slice's chips form engine replicas of `tensor` chips within a host (`parallel.replica_meshes`); a replica
holds the whole model in the engine's dtype split over its chips (twice with the stacked copy a scanned prefill
reads) and decodes its share of the slots. So per chip:

  engine_weights  the weights split over `tensor` (heads, kv heads, MLP, vocabulary; the rest whole), × 2 with
                  `stacked_prefill`
  kv_cache        the paged cache's pool: pages per replica (default: every slot at the cache length) × page ×
                  layers × kv heads / tensor × head_dim × 2 (+ ends and page tables)
  rollout         the largest engine call: decode's logits and sampling over the vocabulary shard, or a prefill
                  chunk's `[rows, heads, chunk, length]` f32 scores (and, scanned, the copy of the pools it stacks)
  handoff         what the jitted hand-off holds besides its input and outputs: the trainer's shard cast to the
                  engine's dtype, and the weights split over every chip on their way to the replicas
                  (`generation.handoff`: each replica then gathers its copy)

The engine is dropped while the update runs, so an RL stage has three phases (`fit.memory_plan`): rollouts
(trainer state + engine), the update (trainer state + activations), the hand-off (trainer state + the new engine
weights). The working-set coefficients are those of `compiled.memory_analysis()` on XLA:CPU (the decode step in
tests/generation/test_engine_layout.py is within 10% of this plan).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from jaxseeker.generation.pages import page_shape
from jaxseeker.model.config import ModelConfig
from jaxseeker.parallel.rules import GENERATION_RULES
from jaxseeker.planning.memory import _LOGITS, BYTES, _divisor, abstract_mesh, param_elements
from jaxseeker.train.rl.config import slots_per_host


@dataclasses.dataclass(frozen=True)
class EngineLayout:
    """Where the engine of an RL stage sits on a slice."""

    tensor: int  # chips per replica
    replicas: int  # over the slice
    hosts: int
    slots: int  # per replica
    dtype: str
    pages: int  # KV cache pages per replica
    page: int  # positions a page


def engine_layout(cfg: ModelConfig, stage, chips: int, per_host: int) -> EngineLayout:
    """The engine's replicas and slots for `stage` (a `memory.StageShape`) on `chips` chips, `per_host` to a host
    (fewer on a slice smaller than a host). ValueError when `engine.tensor` does not divide a host's chips."""
    local = min(per_host, chips)
    tensor = stage.engine_tensor or local
    if local % tensor or chips % local:
        raise ValueError(f"engine.tensor={tensor} must divide a host's {local} chips (of {chips})")
    hosts, replicas_per_host = chips // local, local // tensor
    slots = slots_per_host(stage.slots, stage.groups, stage.group_size, hosts, replicas_per_host) // replicas_per_host
    page, row_pages = page_shape(stage.cache_len)
    pages = stage.engine_pages or slots * row_pages
    return EngineLayout(tensor, chips // tensor, hosts, slots, stage.engine_dtype or cfg.compute_dtype, pages, page)


def engine_memory(cfg: ModelConfig, stage, chips: int, per_host: int, trainer_elements: int = 0) -> dict[str, float]:
    """Bytes per chip of the engine of `stage` (module docstring): engine_weights, kv_cache, rollout, handoff;
    `trainer_elements`: the trainer's params per chip (the hand-off casts them first)."""
    layout = engine_layout(cfg, stage, chips, per_host)
    weights = param_elements(cfg, GENERATION_RULES, _engine_mesh(layout)) * BYTES[layout.dtype]
    copies = 2 if stage.stacked_prefill else 1
    calls = engine_calls(cfg, stage, chips, per_host)
    return {
        "engine_weights": float(copies * weights),
        "kv_cache": calls["cache"],
        "rollout": max(calls["decode"], calls["prefill"]),
        "handoff": float(copies * weights / layout.replicas + trainer_elements * BYTES[layout.dtype]),
    }


def engine_calls(cfg: ModelConfig, stage, chips: int, per_host: int) -> dict[str, float]:
    """Bytes per chip of the engine's cache and of the working set of each of its calls: `decode` (logits and
    sampling over the vocabulary shard) and `prefill` (a chunk's f32 scores and the copies of the cache it makes:
    an upper bound, XLA may fuse the scores away)."""
    layout = engine_layout(cfg, stage, chips, per_host)
    sizes = dict(_engine_mesh(layout).shape)
    eb = BYTES[layout.dtype]

    def local(name: str, dim: int) -> int:
        return dim // _divisor(name, dim, GENERATION_RULES, sizes)[1]

    slots, length = layout.slots, stage.cache_len
    kv_token = cfg.num_layers * local("kv_heads", cfg.num_kv_heads) * cfg.head_dim * 2 * eb  # k and v, all layers
    _, row_pages = page_shape(length)
    cache = layout.pages * layout.page * kv_token + slots * (1 + row_pages) * 4  # + ends and page tables (int32)
    decode = _LOGITS * slots * local("vocab", cfg.vocab_size) * 4
    # whatever the training attention: the engine always attends with `generation.ragged_attention`
    scores = 2 * slots * local("heads", cfg.num_heads) * min(stage.prefill_chunk, length) * length * 4
    stacked = cache if stage.stacked_prefill else 0  # the scanned prefill stacks each group's layers' pools
    return {"cache": float(cache), "decode": float(decode), "prefill": float(scores + stacked)}


def _engine_mesh(layout: EngineLayout):
    """The abstract mesh of the slice's engine replicas."""
    return abstract_mesh({"data": layout.replicas, "tensor": layout.tensor})


def engine_summary(cfg: ModelConfig, stage, mesh_sizes: Mapping[str, int], per_host: int) -> dict | None:
    """The engine's layout as `plan` reports it (None without a rollout)."""
    if not stage.slots and not stage.groups:
        return None
    layout = engine_layout(cfg, stage, math.prod(mesh_sizes.values()), per_host)
    return dataclasses.asdict(layout)
