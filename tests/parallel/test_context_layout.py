"""The layout of rows over the context axis: which axes split them, and the balanced (front + back chunk) order."""

import numpy as np
import pytest
from jax.sharding import AbstractMesh

from jaxseeker.parallel import DEFAULT_RULES, MESH_AXES
from jaxseeker.parallel.context_layout import (
    ContextLayout,
    balanced_order,
    balanced_rows,
    context_layout,
    from_balanced,
    sequence_axes,
    to_balanced,
)

CONTEXT4 = AbstractMesh((2, 1, 1, 1, 4), MESH_AXES)  # data, fsdp, tensor, expert, context


def test_device_i_holds_chunks_i_and_2n_minus_1_minus_i():
    layout = context_layout(AbstractMesh((1, 1, 1, 1, 2), MESH_AXES), DEFAULT_RULES, 8)
    assert layout == ContextLayout(seq=8, axes=("context",), shards=2, balanced=True)
    assert balanced_order(layout).tolist() == [0, 1, 6, 7, 2, 3, 4, 5]  # device 0: chunks 0, 3; device 1: 1, 2


@pytest.mark.parametrize("seq", [64, 4096])
def test_every_device_holds_the_same_share_of_the_causal_triangle(seq):
    layout = context_layout(CONTEXT4, DEFAULT_RULES, seq)
    per_device = balanced_order(layout).reshape(4, -1)  # each device's slice of the layout
    keys_seen = (per_device + 1).sum(axis=1)  # a query at index i sees i + 1 keys of its row
    assert (keys_seen == keys_seen[0]).all(), keys_seen
    contiguous = (np.arange(seq).reshape(4, -1) + 1).sum(axis=1)
    assert contiguous[-1] > 6 * contiguous[0]  # what the order avoids: the last device doing 7× the first's work


def test_rows_are_split_as_the_seq_rule_splits_them():
    assert sequence_axes(CONTEXT4, DEFAULT_RULES) == ("context",)
    assert sequence_axes(AbstractMesh((2, 4, 1, 1, 1), MESH_AXES), DEFAULT_RULES) == ()
    assert context_layout(CONTEXT4, DEFAULT_RULES, 12) == ContextLayout(12, ("context",), 4, False)  # 12 % 8
    assert context_layout(CONTEXT4, DEFAULT_RULES, 10) == ContextLayout(10)  # 4 does not divide 10: whole rows
    assert balanced_order(ContextLayout(12, ("context",), 4, False)).tolist() == list(range(12))


def test_a_batch_goes_into_the_balanced_order_and_its_outputs_come_back():
    layout = context_layout(CONTEXT4, DEFAULT_RULES, 16)
    rows = np.arange(2 * 16).reshape(2, 16)
    batch = {"tokens": rows, "positions": rows % 7, "rewards": np.arange(2)}
    balanced = balanced_rows(batch, layout)
    order = balanced_order(layout)
    np.testing.assert_array_equal(balanced["tokens"], rows[:, order])
    np.testing.assert_array_equal(balanced["positions"], (rows % 7)[:, order])  # positions travel with the tokens
    np.testing.assert_array_equal(balanced["rewards"], np.arange(2))  # not a [batch, seq] array: as it was
    np.testing.assert_array_equal(from_balanced(to_balanced(rows[..., None], layout), layout), rows[..., None])
