"""Names `jaxseeker.losses` exports, each imported from its module on first use (lazy_loader reads this stub)."""

from .advantages import flat_groups, group_advantages, leave_one_out_advantages, mean_centred_advantages
from .aggregate import AGGREGATIONS, aggregate, aggregation_count, check_aggregation
from .gspo import gspo_loss
from .kl import KL_ESTIMATORS, entropy_from_logits, kl_penalty, kl_per_token, token_entropy
from .masked import masked_count, masked_mean, masked_sum, segment_count, segment_mean, segment_sum
from .nll import chunked_masked_nll, logprobs_from_logits, masked_nll, token_logprobs, token_logprobs_and_entropy
from .policy import policy_loss
from .registry import (
    ADVANTAGES,
    POLICY_OBJECTIVES,
    get_advantage,
    get_policy_objective,
    objective_aggregation,
    packs_exactly,
    takes_segment_ids,
)

__all__ = [
    "ADVANTAGES",
    "AGGREGATIONS",
    "KL_ESTIMATORS",
    "POLICY_OBJECTIVES",
    "aggregate",
    "aggregation_count",
    "check_aggregation",
    "chunked_masked_nll",
    "entropy_from_logits",
    "flat_groups",
    "get_advantage",
    "get_policy_objective",
    "group_advantages",
    "gspo_loss",
    "kl_penalty",
    "kl_per_token",
    "leave_one_out_advantages",
    "logprobs_from_logits",
    "masked_count",
    "masked_mean",
    "masked_nll",
    "masked_sum",
    "mean_centred_advantages",
    "objective_aggregation",
    "packs_exactly",
    "policy_loss",
    "segment_count",
    "segment_mean",
    "segment_sum",
    "takes_segment_ids",
    "token_entropy",
    "token_logprobs",
    "token_logprobs_and_entropy",
]
