"""Episodes as the update's rows: one episode a right-padded row (`episode_rows`), or several a row, each its own
segment (`packed_episode_rows`).

`tokens[t]` predicts `targets[t] = ids[t + 1]`, and `loss_mask[t]` is 1 exactly when `ids[t + 1]` was sampled by
the policy (prompt, observations, the loop's own `<|im_end|>` and padding are 0). The rows' keys are `[batch, seq]`:
  tokens, targets, loss_mask, segment_ids (1, 2, … per episode, 0 = padding), positions,
  old_logp (log-probs of the sampling policy: the engine's, or recomputed with the training forward),
  advantages (the episode's advantage on every token), and on the host only `episode` (1 + the episode's index in
  the lists given, 0 = padding).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

ROW_KEYS = ("tokens", "targets", "loss_mask", "segment_ids", "positions", "old_logp", "advantages")


def episode_rows(
    token_ids: Sequence[Sequence[int]],
    loss_masks: Sequence[Sequence[int]],
    logprobs: Sequence[Sequence[float]],
    advantages: Sequence[float],
    seq_len: int,
    *,
    extra: Mapping[str, Sequence[Sequence[float]]] | None = None,
) -> dict[str, np.ndarray]:
    """Padded rows (see the module docstring, `episode` included) of episodes given as token ids, loss masks and
    sampling log-probs.

    `old_logp` holds the sampling log-probs (the engine's) or the trainer's recomputed ones. `extra`: more
    per-token float arrays aligned with the token ids (e.g. a reference policy's log-probs), laid out as
    `old_logp` under their own keys. An episode longer than `seq_len + 1` tokens is cut only if no sampled token
    is lost.
    """
    n = len(token_ids)
    if not (len(loss_masks) == len(logprobs) == len(advantages) == n):
        raise ValueError(
            f"episode_rows: {n} token lists but {len(loss_masks)} masks, {len(logprobs)} log-prob lists "
            f"and {len(advantages)} advantages"
        )
    extra = dict(extra or {})
    rows = {
        k: np.zeros((n, seq_len), np.float32 if k in ("old_logp", "advantages", *extra) else np.int32)
        for k in ROW_KEYS + ("episode", *extra)
    }
    for i, (ids, mask, lp, adv) in enumerate(zip(token_ids, loss_masks, logprobs, advantages)):
        ids, mask, lp = np.asarray(ids, np.int32), np.asarray(mask, np.int32), np.asarray(lp, np.float32)
        if np.any(mask[seq_len + 1 :]):
            raise ValueError(
                f"episode {i}: {len(ids)} tokens with sampled tokens past seq_len + 1 = {seq_len + 1}; "
                "raise the stage's context / the training seq_len"
            )
        ids, mask, lp = ids[: seq_len + 1], mask[: seq_len + 1], lp[: seq_len + 1]
        length = len(ids) - 1
        rows["tokens"][i, :length] = ids[:-1]
        rows["targets"][i, :length] = ids[1:]
        rows["loss_mask"][i, :length] = mask[1:]
        rows["old_logp"][i, :length] = lp[1:]
        rows["segment_ids"][i, :length] = 1
        rows["positions"][i, :length] = np.arange(length)
        rows["advantages"][i, :length] = adv
        rows["episode"][i, :length] = i + 1
        for k, values in extra.items():
            rows[k][i, :length] = np.asarray(values[i], np.float32)[1 : length + 1]
    return rows


def packed_episode_rows(
    token_ids: Sequence[Sequence[int]],
    loss_masks: Sequence[Sequence[int]],
    logprobs: Sequence[Sequence[float]],
    advantages: Sequence[float],
    seq_len: int,
    *,
    row_multiple: int = 1,
    extra: Mapping[str, Sequence[Sequence[float]]] | None = None,
) -> dict[str, np.ndarray]:
    """The rows of `episode_rows` with several episodes per row: `[rows, seq_len]`, rows a multiple of `row_multiple`.

    Each episode is its own segment (`segment_ids` 1, 2, … within a row, `positions` restarting at 0), so
    attention never crosses episodes and every token's log-prob is the one it gets in a row of its own: a
    token-level objective is unchanged, and one that takes `segment_ids` reduces per episode with them.
    Rows are filled first-fit, longest episode first; all-padding rows round the count up. Written here
    rather than with grain's first-fit packer (`data.packing`), which streams examples in arrival order through
    a fixed number of open rows: the update packs a few dozen episodes it already holds.
    """
    if row_multiple < 1:
        raise ValueError(f"row_multiple must be >= 1, got {row_multiple}")
    single = episode_rows(token_ids, loss_masks, logprobs, advantages, seq_len, extra=extra)  # validated, shifted, cut
    lengths = single["segment_ids"].sum(axis=1)  # [episodes]
    bins: list[list[int]] = []  # episode indices per row
    used: list[int] = []  # tokens per row
    for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        row = next((r for r, u in enumerate(used) if u + lengths[i] <= seq_len), None)
        if row is None:
            bins.append([])
            used.append(0)
            row = len(bins) - 1
        bins[row].append(i)
        used[row] += int(lengths[i])
    n_rows = -(-len(bins) // row_multiple) * row_multiple
    rows = {k: np.zeros((n_rows, seq_len), v.dtype) for k, v in single.items()}
    for r, members in enumerate(bins):
        start = 0
        for segment, i in enumerate(members, 1):
            end = start + int(lengths[i])
            for k in rows:
                rows[k][r, start:end] = single[k][i, : end - start]
            rows["segment_ids"][r, start:end] = segment
            start = end
    return rows
