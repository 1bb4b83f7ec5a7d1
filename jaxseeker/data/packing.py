"""Shift, length-limit and pack tokenized examples into fixed-length rows.

An example ``(ids, loss_mask)`` of ``n`` tokens becomes ``n - 1`` next-token pairs inside its own
segment: ``tokens = ids[:-1]``, ``targets = ids[1:]``, ``loss_mask = mask[1:]`` (the mask of the
target token), so no target ever crosses into another segment. Packed rows hold

    tokens, targets, loss_mask, segment_ids, positions   # each [seq]

with ``segment_ids`` 1, 2, … per example and 0 on padding, ``positions`` restarting at 0 in every
segment, and two per-row counters, ``num_dropped`` and ``num_truncated``, of over-length examples
handled since the previous row (their sum over a run is the run's total; it travels with the data,
so it is right after a resume too; drops after the last kept example of a finite run go uncounted).
Packing is grain's first-fit packer: deterministic, and its iterator state is checkpointable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import grain
import numpy as np

OVER_LENGTH_POLICIES = ("drop", "truncate")
ROW_KEYS = ("tokens", "targets", "loss_mask", "segment_ids", "positions")
_PACKED = ("tokens", "targets", "loss_mask")


def shift_example(ids: np.ndarray, loss_mask: np.ndarray) -> dict[str, np.ndarray]:
    """Next-token pairs of one example: tokens, targets and the targets' loss mask, each [n - 1]."""
    ids = np.asarray(ids, dtype=np.int32)  # [n]
    loss_mask = np.asarray(loss_mask)  # [n] 0/1, or float weights
    loss_mask = loss_mask.astype(np.float32 if np.issubdtype(loss_mask.dtype, np.floating) else np.int32)
    if ids.shape != loss_mask.shape or ids.ndim != 1:
        raise ValueError(f"ids {ids.shape} and loss_mask {loss_mask.shape} must be 1-D of equal length")
    return {"tokens": ids[:-1], "targets": ids[1:], "loss_mask": loss_mask[1:]}


def limit_length(example: Mapping[str, np.ndarray], seq_len: int, policy: str) -> dict[str, Any] | None:
    """Applies the over-length policy to a shifted example: None if dropped, else it (maybe truncated).

    The result carries ``truncated`` (0 or 1). ``policy`` is ``drop`` or ``truncate``.
    """
    if policy not in OVER_LENGTH_POLICIES:
        raise ValueError(f"over_length={policy!r}: allowed values are {list(OVER_LENGTH_POLICIES)}")
    n = len(example["tokens"])
    if n <= seq_len:
        return {**{k: example[k] for k in _PACKED}, "truncated": 0}
    if policy == "drop":
        return None
    return {**{k: example[k][:seq_len] for k in _PACKED}, "truncated": 1}


class _LengthLimitIterator(grain.DatasetIterator):
    """Applies ``limit_length``; a kept example carries ``dropped`` = examples dropped just before it."""

    def __init__(self, parent: grain.DatasetIterator, seq_len: int, policy: str):
        super().__init__(parent)
        self._seq_len = seq_len
        self._policy = policy

    def __next__(self) -> dict[str, Any]:
        dropped = 0
        while True:
            example = limit_length(next(self._parent), self._seq_len, self._policy)
            if example is not None:
                return {**example, "dropped": dropped}
            dropped += 1

    def get_state(self) -> dict[str, Any]:
        return self._parent.get_state()

    def set_state(self, state: dict[str, Any]) -> None:
        self._parent.set_state(state)


class LengthLimitIterDataset(grain.IterDataset):
    """Over-length policy over a dataset of shifted examples (see ``limit_length``)."""

    def __init__(self, parent: grain.IterDataset, *, seq_len: int, policy: str):
        super().__init__(parent)
        if policy not in OVER_LENGTH_POLICIES:
            raise ValueError(f"over_length={policy!r}: allowed values are {list(OVER_LENGTH_POLICIES)}")
        self._seq_len = seq_len
        self._policy = policy

    def __iter__(self) -> grain.DatasetIterator:
        return _LengthLimitIterator(self._parent.__iter__(), self._seq_len, self._policy)


def _finish_row(row: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Renames grain's packing outputs and sums the per-example counters of a row."""
    return {
        "tokens": row["tokens"],  # [seq]
        "targets": row["targets"],  # [seq]
        "loss_mask": row["loss_mask"],  # [seq]
        "segment_ids": row["tokens_segment_ids"],  # [seq]
        "positions": row["tokens_positions"],  # [seq]
        "num_dropped": np.int32(sum(row["dropped"])),
        "num_truncated": np.int32(sum(row["truncated"])),
    }


def pack_rows(
    examples: grain.IterDataset, *, seq_len: int, over_length: str = "truncate", num_bins: int = 8
) -> grain.IterDataset:
    """Packs a dataset of shifted examples into rows of ``seq_len`` (first-fit over ``num_bins`` open rows)."""
    limited = LengthLimitIterDataset(examples, seq_len=seq_len, policy=over_length)
    packed = grain.experimental.FirstFitPackIterDataset(
        limited,
        length_struct={k: seq_len for k in _PACKED},
        num_packing_bins=num_bins,
        shuffle_bins=False,
        meta_features=("dropped", "truncated"),
    )
    return packed.map(_finish_row)


def pack_examples(
    examples: Iterable[tuple[np.ndarray, np.ndarray]],
    *,
    seq_len: int,
    over_length: str = "truncate",
    num_bins: int = 8,
) -> dict[str, np.ndarray]:
    """Packs ``(ids, loss_mask)`` pairs into stacked rows: each key [rows, seq], counters [rows]."""
    shifted = [shift_example(ids, mask) for ids, mask in examples]
    rows = list(
        pack_rows(
            grain.MapDataset.source(shifted).to_iter_dataset(),
            seq_len=seq_len,
            over_length=over_length,
            num_bins=num_bins,
        )
    )
    if not rows:
        empty = {k: np.zeros((0, seq_len), np.int32) for k in ROW_KEYS}
        return {**empty, "num_dropped": np.zeros((0,), np.int32), "num_truncated": np.zeros((0,), np.int32)}
    return {k: np.stack([r[k] for r in rows]) for k in rows[0]}
