"""Per-device memory and FLOPs of a training stage on a mesh, computed from shapes alone (no device touched).

One stage is an SFT step or an RL step at one context stage (`StageShape`). Its bytes per device:

  params       f32 master weights, sharded exactly as the rules shard them (`model.param_axes`)
  optimizer    Adam's two f32 moments (+ an f32 gradient accumulator when grad_accum > 1)
  grads        f32 gradients
  grad_sum     RL: the f32 sum of the micro-batches' gradients (`train.rl.step.accumulated_update`)
  compute      the compute-dtype (bf16) copy of the params and its gradients during the pass (0 in f32)
  reference    the frozen reference policy of a KL term (an f32 copy of the params)
  activations  what the backward pass keeps of the forward pass, all layers: the scan carry (remat
               full), the matmul outputs (remat dots) or everything (remat none: with a non-flash
               attention, two [q, k] score arrays per layer); the final hidden states and their gradient;
               the [q, k] boolean mask of the attentions that take one (xla, jax_xla, cudnn)
  layer        the working set of one layer's backward: its recompute, its gradients, the attention kernel's
               own arrays (`attention_kernel_bytes`), its weights gathered from their `embed` shards (fsdp, context)
  logits       the chunked loss: [rows, chunk, vocab] f32 logits, their softmax and gradient
  batch        the input rows on the device (RL: every mini-batch of the step, with its log-probs)
and of an RL stage's rollout engine, in its own layout (`planning.rollout`): engine_weights, kv_cache, rollout
(its largest call) and handoff (the hand-off's temporaries).

SFT: peak = params + optimizer + reference + batch + max(train, update), with train = grads (+ grad_sum) + compute
+ activations + max(layer, logits), update = grads + Adam's temporaries. An RL stage's update runs micro-batches of
`rows` rows (with `choose`, `fit.choose_update` picks its remat and rows to fit). RL has three phases, the
engine being dropped during the update: rollout_phase = params + optimizer + reference + engine_weights + kv_cache
+ rollout; update_phase = params + optimizer + reference + batch + max(train, update); handoff_phase = params +
optimizer + reference + engine_weights + handoff; peak = the largest.
Activation rows are divided by the mesh axes of the `batch` rule, heads / kv_heads / mlp / vocab by
theirs (with the rules' divisibility fallback), the sequence inside a layer by those of `seq` (the context
axis) and the residual stream between layers by those of `residual_seq` (context and tensor: sequence
parallelism). Under context parallelism the chunked loss gathers each row's final hidden states whole onto
every device of the context axis (it sorts the row's trained tokens first), so they are counted whole. The
training steps hold the model's residual stream to that layout (`parallel.activation_constraint`, bound by
`make_sft_step`): on 8 CPU devices with fsdp=8 the compiled step then takes 0.76 (remat full) and 0.93 (none) of
the plan, where without the constraint XLA kept activations with the whole batch on each device (2.07 and
2.58); on context = 2, 4, 8 see docs/guides/long_context.md.

The working-set coefficients (`_LAYER`, `_LOGITS`, `_UPDATE`) were measured with
`compiled.memory_analysis()` of the real SFT step on XLA:CPU in f32 (tests/planning/test_plan.py checks
a shape they were not fitted on, within 25%). TPU and GPU fuse more element-wise work than XLA:CPU, so
there the plan errs on the safe side; bf16 arrays are counted at 2 bytes, [q, k] scores at 4.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from jax.sharding import AbstractMesh

from jaxseeker.model.blocked_attention import BLOCK
from jaxseeker.model.config import ModelConfig
from jaxseeker.model.params import param_axes, param_shapes
from jaxseeker.parallel.mesh_config import MESH_AXES
from jaxseeker.parallel.rules import Rules, logical_to_spec

BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# Attention kernels that hold no [q, k] array (training forward only; "blocked" keeps one tile per head, see
# model.blocked_attention); the context kernels (`parallel.context_attention`) are blocked ones. cuDNN holds no
# scores but takes the [q, k] mask, as a bias of the compute dtype too (jax.nn.dot_product_attention).
FLASH_IMPLS = ("splash", "blocked")

# Floats per token of one layer's backward working set under remat "full" (recompute + gradients),
# per hidden unit, per q/k/v head unit and per MLP unit (per expert unit: all experts are evaluated).
_LAYER = {"embed": 9.1, "qkv": 3.1, "mlp": 8.3, "moe": 10.4}
_DOTS_TRANSIENT = 0.25  # remat dots / none: share of that working set still built in the backward
_NONE_SAVED = 0.83  # remat none: share of it kept per layer
_SCORES_SAVED = 2  # [q, k] f32 arrays per layer kept by remat none (non-flash attention)
_SCORES_TRANSIENT = 3  # [q, k] f32 arrays live in one layer's backward (non-flash attention)
_LOGITS = 3.05  # [rows, chunk, vocab] f32 arrays live in the chunked loss's backward
_UPDATE = 1.25  # f32 params-sized temporaries of clipping + AdamW
_TILE_ARRAYS = 4  # f32 [heads, block, block] tiles live at once in the blocked kernel's backward (XLA:CPU: 3 to 5)
PHASES = ("rollout", "update", "handoff")  # an RL step's phases (`memory_plan`); SFT has the update alone


@dataclasses.dataclass(frozen=True)
class StageShape:
    """What one step of a stage puts on the devices (built from a recipe by `command.recipe_stages`).

    rows × seq: the rows of one forward/backward pass (RL: a micro-batch). updates: optimizer micro-steps per step
    (RL: mini_batches × epochs), each of ⌈mini_batch_rows / rows⌉ passes (RL: `mini_batch_rows` = a mini-batch's
    episodes, one row each at most). resident_rows: input rows held during the update (RL: the whole step).
    remat: the update's (None: the model's). choose: what `fit.choose_update` picks ("remat", "rows").
    The rollout engine (`train.rl.config.EngineConfig`; none when slots and groups are 0): `slots` over the
    slice (0: each host's share of the step's `groups` × `group_size` episodes), `cache_len` tokens each,
    replicas of `engine_tensor` chips (0: a host's), weights and cache in `engine_dtype` (None: the compute
    dtype), a stacked copy of the weights with `stacked_prefill`, `engine_pages` KV pages a replica (0: every slot at
    `cache_len`); rollout_tokens: tokens through it per step.
    """

    name: str
    kind: str  # "sft" | "rl"
    rows: int
    seq: int
    chunk_size: int = 512
    grad_accum: int = 1
    updates: int = 1
    resident_rows: int = 0
    slots: int = 0
    cache_len: int = 0
    prefill_chunk: int = 128
    rollout_tokens: int = 0
    reference: bool = False
    groups: int = 0
    group_size: int = 0
    engine_tensor: int = 0
    engine_dtype: str | None = None
    stacked_prefill: bool = False
    engine_pages: int = 0
    mini_batch_rows: int = 0
    recompute: bool = True  # RL: a forward recomputes the old log-probs (else the engine's are used)
    remat: str | None = None
    choose: tuple[str, ...] = ()

    @property
    def rolls_out(self) -> bool:
        """Whether the stage has a rollout engine."""
        return bool(self.slots or self.groups)


def abstract_mesh(sizes: Mapping[str, int]) -> AbstractMesh:
    """An `AbstractMesh` over `MESH_AXES` (missing axes are 1): shardings resolve on it without devices."""
    unknown = sorted(set(sizes) - set(MESH_AXES))
    if unknown:
        raise ValueError(f"mesh: unknown axes {unknown}; known: {list(MESH_AXES)}")
    return AbstractMesh(tuple(int(sizes.get(a, 1)) for a in MESH_AXES), MESH_AXES)


def _local_elements(shape: tuple[int, ...], axes: tuple, rules: Rules, mesh: AbstractMesh) -> int:
    """Elements of one device's shard of an array with logical `axes` (exactly `logical_to_spec`'s split)."""
    sizes = dict(mesh.shape)
    n = 1
    for dim, entry in zip(shape, logical_to_spec(axes, rules, mesh, shape)):
        parts = () if entry is None else (entry,) if isinstance(entry, str) else entry
        n *= dim // math.prod(sizes[a] for a in parts)
    return n


def _leaves(cfg: ModelConfig) -> list[tuple[tuple[int, ...], tuple, int | None]]:
    """(shape, logical axes, layer group or None) of every parameter."""
    shapes, axes = param_shapes(cfg), param_axes(cfg)
    out = [(shapes[k], axes[k], None) for k in shapes if k != "blocks"]
    for g, (group_shapes, group_axes) in enumerate(zip(shapes["blocks"], axes["blocks"])):
        out += [(group_shapes[k], group_axes[k], g) for k in group_shapes]
    return out


def param_elements(cfg: ModelConfig, rules: Rules, mesh: AbstractMesh) -> int:
    """Parameters held by one device."""
    return sum(_local_elements(shape, axes, rules, mesh) for shape, axes, _ in _leaves(cfg))


def weight_gather_axes(rules: Rules, mesh: AbstractMesh) -> tuple[str, ...]:
    """The mesh axes (of size > 1) that split the weights along `embed` (fsdp, and context under context
    parallelism): the pass gathers a layer's weights over them."""
    sizes = dict(mesh.shape)
    return tuple(a for a in rules.get("embed", ()) if sizes.get(a, 1) > 1)


def gathered_layer_elements(cfg: ModelConfig, rules: Rules, mesh: AbstractMesh) -> int:
    """Parameters of the largest layer as one device sees them inside the pass (the `embed` shards gathered)."""
    gather = weight_gather_axes(rules, mesh)
    if not gather:
        return 0  # nothing to gather: the device holds its layers' weights already
    unsharded = abstract_mesh({**dict(mesh.shape), **{a: 1 for a in gather}})
    per_group = [0] * len(cfg.layer_groups)
    for shape, axes, g in _leaves(cfg):
        if g is not None:
            per_group[g] += _local_elements(shape, axes, rules, unsharded)
    return max(n // count for n, (_, count) in zip(per_group, cfg.layer_groups))


def _divisor(name: str, dim: int, rules: Rules, sizes: Mapping[str, int], used: tuple[str, ...] = ()) -> tuple:
    """(mesh axes, their size product) that split a `dim`-long activation axis `name`: the rule's axes not in
    `used`, of size > 1, cut to the longest prefix whose product divides `dim` (as `logical_to_spec` does)."""
    kept = tuple(a for a in rules.get(name, ()) if a not in used and sizes[a] > 1)
    while kept and dim % math.prod(sizes[a] for a in kept):
        kept = kept[:-1]
    return kept, math.prod(sizes[a] for a in kept)


@dataclasses.dataclass(frozen=True)
class _Local:
    """Activation sizes on one device."""

    rows: int
    seq: int  # tokens of a row inside a layer (the `seq` rule: context)
    residual_seq: int  # tokens of a row between layers (the `residual_seq` rule: context and tensor)
    seq_shards: int  # devices a row's sequence is split over inside a layer
    heads: int
    kv_heads: int
    mlp: int  # dense layers
    expert_units: int  # experts × moe mlp (MoE layers)
    vocab: int


def _local_sizes(cfg: ModelConfig, rows: int, rules: Rules, sizes: Mapping[str, int], seq: int = 1) -> _Local:
    """Per-device activation sizes for `rows` global rows of `seq` tokens."""
    batch_axes, batch_div = _divisor("batch", rows, rules, sizes)

    def split(name: str, dim: int, used: tuple[str, ...] = batch_axes) -> int:
        return dim // _divisor(name, dim, rules, sizes, used)[1]

    experts_axes = _divisor("experts", cfg.num_experts, rules, sizes, batch_axes)[0] if cfg.num_experts else ()
    expert_units = 0
    if cfg.num_experts:
        expert_units = split("experts", cfg.num_experts) * split(
            "mlp", cfg.moe_intermediate_size, batch_axes + experts_axes
        )
    return _Local(
        rows=rows // batch_div,
        seq=split("seq", seq),
        residual_seq=split("residual_seq", seq),
        seq_shards=_divisor("seq", seq, rules, sizes, batch_axes)[1],
        heads=split("heads", cfg.num_heads),
        kv_heads=split("kv_heads", cfg.num_kv_heads),
        mlp=split("mlp", cfg.intermediate_size),
        expert_units=expert_units,
        vocab=split("vocab", cfg.vocab_size),
    )


def _layer_width(cfg: ModelConfig, local: _Local, moe: bool) -> float:
    """Floats per token of one layer's backward working set under remat full (`_LAYER`)."""
    qkv = (local.heads + 2 * local.kv_heads) * cfg.head_dim
    mlp = _LAYER["moe"] * local.expert_units if moe else _LAYER["mlp"] * local.mlp
    return _LAYER["embed"] * cfg.hidden_size + _LAYER["qkv"] * qkv + mlp


def _saved_width(cfg: ModelConfig, local: _Local, moe: bool) -> float:
    """Floats per token one layer keeps for the backward pass under remat dots / none."""
    if cfg.remat == "dots":
        qkv = (local.heads + 2 * local.kv_heads) * cfg.head_dim
        return 3 * cfg.hidden_size + qkv + 2 * (local.expert_units if moe else local.mlp)
    return _NONE_SAVED * _layer_width(cfg, local, moe)


def attention_kernel(cfg: ModelConfig, seq_shards: int) -> str:
    """The attention a training step runs (`train.sft.step.mesh_attention_kernel`): the model's `attention_impl`,
    or where the mesh splits the sequence its `context_attention` and the kernel on each device: "all_gather/splash"
    (`attention_impl: splash`), else "all_gather/blocked" or "ring/blocked"."""
    if seq_shards == 1:
        return cfg.attention_impl
    splash = cfg.attention_impl == "splash" and cfg.context_attention == "all_gather"
    return f"{cfg.context_attention}/{'splash' if splash else 'blocked'}"


def blocked_kernel_bytes(cfg: ModelConfig, local: _Local, seq: int) -> float:
    """The blocked kernel's own arrays in one layer's forward and backward on one device (`model.blocked_attention`,
    the whole sequence there): `_TILE_ARRAYS` f32 tiles of [heads, block, block] (its loops take one row, query
    block and key block at a time); per query token its output in the compute dtype (kept for the backward), the f32
    log-sum-exp and the backward's row sums per head; below f32, the keys' and values' f32 gradient accumulators (in
    f32 they are the kernel's outputs). Its inputs, the output's cotangent and its gradients are the layer's
    (`_LAYER`). Read off XLA:CPU's buffer assignment of the compiled kernel, f32 and bf16
    (tests/model/test_attention_memory.py compares the two)."""
    block, cb = min(BLOCK, seq), BYTES[cfg.compute_dtype]
    f32_grads = 2 * local.kv_heads * cfg.head_dim * 4 if cb < 4 else 0
    per_token = local.heads * cfg.head_dim * cb + 2 * local.heads * 4 + f32_grads
    return float(_TILE_ARRAYS * local.heads * block * block * 4 + local.rows * local.seq * per_token)


def attention_kernel_bytes(cfg: ModelConfig, local: _Local, seq: int) -> float:
    """The attention kernel's own arrays in one layer's backward, per device: the blocked kernel's
    (`blocked_kernel_bytes`); under context parallelism the blocked kernel's f32 output and query gradient, with
    all-gather's whole-row keys / values and their gradients (f32 with the blocked kernel), or ring's two key / value
    chunks (the one attended to and the one arriving) and two f32 gradient chunks (these two are checked against
    their compiled steps in tests/parallel/test_context_parallel_parts.py); cuDNN's [q, k] bias and its gradient
    (`jax.nn.dot_product_attention` turns the mask into a bias of the compute dtype)."""
    kernel, cb = attention_kernel(cfg, local.seq_shards), BYTES[cfg.compute_dtype]
    if kernel == "cudnn":
        return float(2 * local.rows * local.seq * seq * cb)
    if kernel == "blocked":
        return blocked_kernel_bytes(cfg, local, seq)
    kv_token = local.rows * local.kv_heads * cfg.head_dim * 2  # keys and values of one token
    blocked = kernel.endswith("blocked")
    own = local.rows * local.seq * local.heads * cfg.head_dim * 4 * 2 if blocked else 0  # f32 output and dq
    if kernel.startswith("all_gather"):
        own += kv_token * seq * (cb + (4 if blocked else cb))
    elif kernel.startswith("ring"):
        own += 2 * kv_token * local.seq * (cb + 4)
    return float(own)


def _qk_arrays(cfg: ModelConfig, local: _Local, seq: int) -> tuple[int, int]:
    """(one [q, k] f32 score array over the device's heads, the bool [q, k] mask `model.hidden_states` builds), in
    bytes per device: 0 for the kernels that hold none (splash, blocked, any kernel on a split sequence); cuDNN takes
    the mask but no scores."""
    kernel = attention_kernel(cfg, local.seq_shards)
    if kernel in FLASH_IMPLS or local.seq_shards > 1:
        return 0, 0
    pairs = local.rows * local.seq * seq
    return (0 if kernel == "cudnn" else pairs * local.heads * 4), pairs


def attention_pair_bytes(cfg: ModelConfig, local: _Local, seq: int) -> float:
    """Bytes per query-key pair of one layer's attention on a device: the arrays of its backward that the plan
    counts (the mask, `_SCORES_TRANSIENT` score arrays, the kernel's own, `attention_kernel_bytes`) over the pairs
    it covers (rows × queries × keys, all heads together). What grows with the square of the context: a kernel
    with no [q, k] array gets well under 1 byte, falling as the rows grow."""
    scores, mask = _qk_arrays(cfg, local, seq)
    own = _SCORES_TRANSIENT * scores + mask + attention_kernel_bytes(cfg, local, seq)
    return own / (local.rows * local.seq * seq)


def activation_bytes(cfg: ModelConfig, rows: int, seq: int, rules: Rules, mesh: AbstractMesh) -> dict[str, float]:
    """Saved activations of all layers and the largest one-layer backward working set, per device."""
    local = _local_sizes(cfg, rows, rules, dict(mesh.shape), seq)
    tokens, cb = local.rows * local.seq, BYTES[cfg.compute_dtype]
    scores, mask = _qk_arrays(cfg, local, seq)
    saved = 2 * cfg.hidden_size * local.rows * seq * cb + mask  # final hidden states (whole rows) and gradient
    layer = 0.0
    for moe, count in cfg.layer_groups:
        if cfg.remat == "full":
            saved += count * local.rows * local.residual_seq * cfg.hidden_size * cb
        else:
            saved += count * tokens * _saved_width(cfg, local, moe) * cb
        if cfg.remat == "none":
            saved += count * _SCORES_SAVED * scores
        share = 1.0 if cfg.remat == "full" else _DOTS_TRANSIENT
        layer = max(layer, share * tokens * _layer_width(cfg, local, moe) * cb + _SCORES_TRANSIENT * scores)
    layer += attention_kernel_bytes(cfg, local, seq)
    layer += 2 * gathered_layer_elements(cfg, rules, mesh) * cb  # gathered weights and their gradient
    return {"activations": saved, "layer": layer}


def logits_bytes(cfg: ModelConfig, rows: int, seq: int, chunk: int, rules: Rules, mesh: AbstractMesh) -> float:
    """Working set of the chunked loss per device (plus the unembedding gathered along `embed` when split)."""
    sizes = dict(mesh.shape)
    local = _local_sizes(cfg, rows, rules, sizes)
    gathered = 0
    if weight_gather_axes(rules, mesh):
        gathered = 2 * local.vocab * cfg.hidden_size * BYTES[cfg.compute_dtype]
    return _LOGITS * local.rows * min(chunk, seq) * local.vocab * 4 + gathered
