"""The tokens of a rejected turn made unlikely: its n-grams repeated past what a copying turn repeats."""

import numpy as np
import pytest

from jaxseeker.data import DataConfig, batch_iterator
from jaxseeker.data.chat import CONTEXT, REJECTED, TRAINED, token_roles
from jaxseeker.data.pipeline import loss_weights
from jaxseeker.data.records import parse_record
from jaxseeker.data.unlikelihood import repeated_ngrams


def test_a_token_counts_once_its_ngram_was_seen_min_seen_times_in_its_own_turn():
    ids = np.array([5, 1, 2, 1, 2, 1, 2, 1, 2, 7, 1, 2, 1, 2])  # [tokens]
    roles = np.array([CONTEXT] + [REJECTED] * 8 + [CONTEXT] + [REJECTED] * 4)  # two rejected turns
    np.testing.assert_array_equal(repeated_ngrams(ids, roles, n=2), [0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1])
    np.testing.assert_array_equal(repeated_ngrams(ids, roles, n=2, min_seen=2), [0] * 6 + [1, 1, 1] + [0] * 5)
    assert not repeated_ngrams(ids, np.full(ids.shape, TRAINED), n=2).any()  # only rejected turns
    with pytest.raises(ValueError, match="n and min_seen must be >= 1"):
        repeated_ngrams(ids, roles, n=0)


LOOP = "<think>Hinckley (linked " * 8 + "</think>"


def rejected_record():
    search = '<tool_call>{"name": "search", "arguments": {"query": "Hinckley"}}</tool_call>'
    return parse_record(
        {
            "messages": [
                {"role": "user", "content": "Where was Hal Schumacher born?"},
                {"role": "assistant", "content": search, "weight": 0},
                {"role": "user", "content": "<tool_response>\nHinckley (linked) is a city.\n</tool_response>"},
                {"role": "assistant", "content": LOOP, "weight": -1},
            ]
        }
    )


def test_a_rejected_turn_s_repeats_get_the_negative_weight_and_the_rest_none(qwen_tokenizer):
    record = rejected_record()
    config = DataConfig(
        seq_len=256, batch_size=1, shuffle=False, num_epochs=1, context_weight=0.25, unlikelihood_weight=0.5
    )
    [batch] = list(batch_iterator([record], qwen_tokenizer, config, process_index=0, process_count=1))
    ids, roles = token_roles(record.messages, qwen_tokenizer)
    weights = batch["loss_mask"][0][batch["segment_ids"][0] == 1]  # [tokens - 1], for targets ids[1:]
    repeats = repeated_ngrams(ids, roles, n=4, min_seen=3)[1:]
    np.testing.assert_array_equal(weights[repeats], -0.5)
    assert repeats.sum() > 10 and (weights < 0).sum() == repeats.sum()
    np.testing.assert_array_equal(weights[(roles[1:] == REJECTED) & ~repeats], 0.0)  # the loop's first laps
    np.testing.assert_array_equal(weights[roles[1:] == CONTEXT], 0.0)  # the context after a loop is not learnt


def test_without_an_unlikelihood_weight_a_rejected_turn_is_left_out(qwen_tokenizer):
    ids, roles = token_roles(rejected_record().messages, qwen_tokenizer)
    masked = loss_weights(ids, roles, DataConfig())
    assert masked.dtype == np.int32 and not masked.any()  # no trained turn in this record
    weights = loss_weights(ids, roles, DataConfig(context_weight=0.25))
    assert weights.dtype == np.float32 and not weights.any()
    right = np.where(roles == REJECTED, TRAINED, roles)  # the same conversation, its last turn a trained one
    np.testing.assert_array_equal(
        loss_weights(ids, right, DataConfig(context_weight=0.25)),
        np.select([right == TRAINED, right == CONTEXT], [1.0, 0.25], 0.0),
    )
    assert loss_weights(ids, roles, DataConfig(unlikelihood_weight=1.0)).dtype == np.float32
    with pytest.raises(ValueError, match=r"data.unlikelihood_weight=-1 must be >= 0"):
        DataConfig(unlikelihood_weight=-1)
    with pytest.raises(ValueError, match=r"data.unlikelihood_min_seen=0 must be >= 1"):
        DataConfig(unlikelihood_min_seen=0)
