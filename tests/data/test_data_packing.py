"""Packing: next-token pairs stay inside their segment, positions restart, over-length policies count."""

import numpy as np
import pytest

from jaxseeker.data import pack_examples, shift_example


def _examples(lengths, start=1):
    """Examples whose ids are distinct runs and whose mask trains the second half."""
    out, next_id = [], start
    for n in lengths:
        ids = np.arange(next_id, next_id + n, dtype=np.int32)
        mask = (np.arange(n) >= n // 2).astype(np.int32)
        out.append((ids, mask))
        next_id += n
    return out


def _segments(rows):
    """Every (tokens, targets, loss_mask, positions) segment of packed rows, in row order."""
    found = []
    for r in range(rows["tokens"].shape[0]):
        seg = rows["segment_ids"][r]
        for s in np.unique(seg[seg > 0]):
            at = seg == s
            found.append(tuple(rows[k][r][at] for k in ("tokens", "targets", "loss_mask", "positions")))
    return found


def test_shift_example_pairs_each_token_with_the_next():
    ex = shift_example(np.array([5, 6, 7, 8]), np.array([0, 0, 1, 1]))
    assert ex["tokens"].tolist() == [5, 6, 7] and ex["targets"].tolist() == [6, 7, 8]
    assert ex["loss_mask"].tolist() == [0, 1, 1]  # the mask of the target token


def test_packed_segments_reproduce_each_example_without_crossing():
    examples = _examples([5, 9, 3, 7, 4, 11, 2])
    rows = pack_examples(examples, seq_len=12, num_bins=3)
    assert rows["tokens"].shape[1] == 12 and rows["tokens"].dtype == np.int32
    segments = _segments(rows)
    assert len(segments) == len(examples)
    by_first = {int(ids[0]): (ids, mask) for ids, mask in examples}
    for tokens, targets, loss_mask, positions in segments:
        ids, mask = by_first[int(tokens[0])]
        assert tokens.tolist() == ids[:-1].tolist()
        assert targets.tolist() == ids[1:].tolist()  # targets never reach into the next segment
        assert loss_mask.tolist() == mask[1:].tolist()
        assert positions.tolist() == list(range(len(ids) - 1))
    padding = rows["segment_ids"] == 0
    assert np.all(rows["loss_mask"][padding] == 0) and np.all(rows["positions"][padding] == 0)
    assert rows["num_dropped"].sum() == 0 and rows["num_truncated"].sum() == 0


def test_first_fit_fills_earlier_rows_first():
    rows = pack_examples(_examples([6, 6, 3]), seq_len=8, num_bins=2)
    # 5 + 5 do not share a row; the 2-token example fits after the first one.
    assert rows["segment_ids"].tolist() == [[1, 1, 1, 1, 1, 2, 2, 0], [1, 1, 1, 1, 1, 0, 0, 0]]


def test_drop_policy_counts_dropped_examples():
    examples = _examples([4, 20, 5, 30, 3])
    rows = pack_examples(examples, seq_len=8, over_length="drop", num_bins=2)
    assert rows["num_dropped"].sum() == 2
    kept = sorted(int(t[0]) for t, *_ in _segments(rows))
    assert kept == sorted(int(ids[0]) for ids, _ in examples if len(ids) - 1 <= 8)


def test_truncate_policy_keeps_the_head_and_counts():
    examples = _examples([4, 20, 5])
    rows = pack_examples(examples, seq_len=8, over_length="truncate", num_bins=2)
    assert rows["num_truncated"].sum() == 1 and rows["num_dropped"].sum() == 0
    long_ids = examples[1][0]
    (tokens, targets, _, _) = [s for s in _segments(rows) if s[0][0] == long_ids[0]][0]
    assert tokens.tolist() == long_ids[:8].tolist() and targets.tolist() == long_ids[1:9].tolist()


def test_packing_is_deterministic_and_validates_policy():
    examples = _examples([3, 8, 2, 6, 5, 4, 7])
    a = pack_examples(examples, seq_len=10, num_bins=2)
    b = pack_examples(examples, seq_len=10, num_bins=2)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    with pytest.raises(ValueError, match=r"over_length='pad'.*\['drop', 'truncate'\]"):
        pack_examples(examples, seq_len=10, over_length="pad")
