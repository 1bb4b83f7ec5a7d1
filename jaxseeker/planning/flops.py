"""FLOPs of a planned step: `model` (what MFU counts) and `device` (what the implementation runs), split by
phase for RL (rollout, old log-probs, update)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jaxseeker.model.config import ModelConfig
from jaxseeker.model.flops import flops_per_token

if TYPE_CHECKING:  # plan.py imports this module
    from jaxseeker.planning.memory import StageShape


def forward_flops_per_token(cfg: ModelConfig, context: float, *, all_experts: bool) -> float:
    """Matmul FLOPs of one token's forward at a mean attended `context`; `all_experts`: as `moe_mlp`
    computes them (every expert, weighted), else only the top-k a token is routed to."""
    unrouted = 0
    if all_experts and cfg.num_experts:
        expert_params = 3 * cfg.hidden_size * cfg.moe_intermediate_size
        unrouted = sum(cfg.is_moe_layer) * expert_params * (cfg.num_experts - cfg.num_experts_per_tok)
    return flops_per_token(cfg, context) + 2 * unrouted


def step_flops(cfg: ModelConfig, stage: StageShape) -> dict[str, float]:
    """FLOPs of one step: `model` (top-k experts, no recompute: what MFU counts) and `device` (what the
    implementation runs: every expert, plus the forward recompute of remat), split by phase for RL."""

    remat = stage.remat or cfg.remat
    passes = -(-stage.mini_batch_rows // stage.rows) if stage.mini_batch_rows else 1  # of one optimizer update

    def train(rows: int, seq: int, all_experts: bool, recompute: bool) -> float:
        fwd = forward_flops_per_token(cfg, seq / 2, all_experts=all_experts) * rows * seq
        attention = 4 * cfg.num_layers * cfg.num_heads * cfg.head_dim * seq / 2 * rows * seq
        extra = {"full": fwd, "dots": attention, "none": 0.0}[remat] if recompute else 0.0
        return 3 * fwd + extra

    out = {}
    for kind, dense in (("model", False), ("device", True)):
        update = train(stage.rows, stage.seq, dense, kind == "device") * stage.updates * passes
        if stage.kind == "sft":
            out[kind] = update
            continue
        fwd = forward_flops_per_token(cfg, stage.seq / 2, all_experts=dense)
        rows = stage.resident_rows or stage.rows
        logprobs = (stage.recompute + stage.reference) * fwd * rows * stage.seq
        rollout = forward_flops_per_token(cfg, stage.cache_len / 2, all_experts=dense) * stage.rollout_tokens
        out[kind] = rollout + logprobs + update
        out[f"{kind}_rollout"], out[f"{kind}_logprobs"], out[f"{kind}_update"] = rollout, logprobs, update
    return out
