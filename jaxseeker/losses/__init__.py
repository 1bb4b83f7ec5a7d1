"""Pure loss functions of arrays: masked NLL, group advantages (GRPO, Dr. GRPO, RLOO), clipped policy objectives,
KL and entropy; the registries that resolve the objective and advantage a config names."""

from jaxseeker.losses.advantages import group_advantages, leave_one_out_advantages, mean_centred_advantages
from jaxseeker.losses.kl import KL_ESTIMATORS, entropy_from_logits, kl_penalty, kl_per_token, token_entropy
from jaxseeker.losses.masked import masked_count, masked_mean, masked_sum
from jaxseeker.losses.nll import (
    chunked_masked_nll,
    logprobs_from_logits,
    masked_nll,
    token_logprobs,
    token_logprobs_and_entropy,
)
from jaxseeker.losses.policy import AGGREGATIONS, aggregate, policy_loss
from jaxseeker.losses.registry import ADVANTAGES, POLICY_OBJECTIVES, get_advantage, get_policy_objective

__all__ = [
    "ADVANTAGES",
    "AGGREGATIONS",
    "KL_ESTIMATORS",
    "POLICY_OBJECTIVES",
    "aggregate",
    "chunked_masked_nll",
    "entropy_from_logits",
    "get_advantage",
    "get_policy_objective",
    "group_advantages",
    "kl_penalty",
    "kl_per_token",
    "leave_one_out_advantages",
    "logprobs_from_logits",
    "masked_count",
    "masked_mean",
    "masked_nll",
    "masked_sum",
    "mean_centred_advantages",
    "policy_loss",
    "token_entropy",
    "token_logprobs",
    "token_logprobs_and_entropy",
]
