"""Copy warm-up: train a fresh model to repeat random runs of tokens before its agent SFT.

A model trained from scratch has no mechanism that copies a span it has never seen (an entity name from the
question into a search query, a number from a page into an answer), and a few hundred agent-SFT updates do
not form one: it memorises its training names instead. On rows made only of copies (a run of random tokens,
then the same run again) the only way to lower the loss is to find the current token earlier in the row and
emit the one after it, and the copying heads (induction heads) form abruptly: at 0.9M parameters after
750–1,500 steps with Qwen3's RoPE base of 1e6, after 800–1,050 steps with a base of 1e4 (the previous-token
head it needs is easier with more fast-turning RoPE frequencies; docs/results.md). The rows
are raw token ids, not chat records: the same copies wrapped in chat turns (system prompt and turn tags between
the two runs) had not formed them after 900 steps in the same probe.

A plain single-device jitted loop over minutes of a small demo model. With a checkpoint directory it saves its
state (parameters, optimizer, the row generator's state and the losses so far) every few hundred steps and on
Ctrl-C or SIGTERM (`train.interrupt`), and a second call with the same arguments goes on from there, drawing the
rows an uninterrupted run would have drawn.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import jax
import numpy as np
import optax
from tqdm import tqdm

from jaxseeker import model
from jaxseeker.data.copies import copy_shape, copy_tokens
from jaxseeker.train.checkpoint import Checkpointer
from jaxseeker.train.interrupt import Interrupted, stop_requests
from jaxseeker.train.optimizer import OptimizerConfig, make_optimizer
from jaxseeker.train.sft.step import sft_loss
from jaxseeker.train.state import TrainState


def copy_batch(
    rng: np.random.Generator,
    vocab: np.ndarray,
    rows: int,
    seq_len: int,
    *,
    min_tokens: int = 4,
    max_tokens: int = 24,
    digits: np.ndarray | None = None,
    digit_rate: float = 0.0,
    max_gap: int = 0,
) -> dict[str, np.ndarray]:
    """One batch of copy rows, each `[rows, seq_len]`: copy examples (`data.copies`) one after another, each its
    own segment; the loss is on the second run after its first token (the first is not predictable).

    With `digits` (the digit tokens' ids), a `digit_rate` fraction of the runs are number-like instead: one to
    three ids from `vocab`, then 3–8 digits. Digits repeat within a run, so the next one is not found by matching
    the current token alone (the copy of `4 4 2 7` after `4` could go on with `4` or `2`): these runs ask for
    the position-keeping copy that reading a number off a page needs.

    With `max_gap`, 0..`max_gap` filler ids from `vocab` (untrained) stand between a run and its copy: an agent
    copies from a question or an observation tens to hundreds of tokens back, not from right before."""
    tokens = np.zeros((rows, seq_len + 1), np.int32)
    mask = np.zeros((rows, seq_len + 1), np.float32)
    segments = np.zeros((rows, seq_len + 1), np.int32)
    positions = np.zeros((rows, seq_len + 1), np.int32)
    rate = digit_rate if digits is not None else 0.0
    for row in range(rows):
        pos, seg = 0, 1
        while True:
            shape = copy_shape(rng, min_tokens=min_tokens, max_tokens=max_tokens, digit_rate=rate, max_gap=max_gap)
            ordinary, digit_count, gap = shape
            span = 2 * (ordinary + digit_count) + gap
            if pos + span > seq_len + 1:
                break
            tokens[row, pos : pos + span], mask[row, pos : pos + span] = copy_tokens(rng, shape, vocab, digits)
            segments[row, pos : pos + span] = seg
            positions[row, pos : pos + span] = np.arange(span)
            pos, seg = pos + span, seg + 1
    return {
        "tokens": tokens[:, :-1],
        "targets": tokens[:, 1:],
        "loss_mask": mask[:, 1:],
        "segment_ids": segments[:, :-1],
        "positions": positions[:, :-1],
    }


def grow_layers(params: dict, cfg: model.ModelConfig, deeper: model.ModelConfig, rng: jax.Array) -> dict:
    """Stack fresh layers on top of a dense model's (`deeper.num_layers` in all): their attention and MLP output
    projections are zero, so the grown model computes the same logits and SFT starts from what the layers below
    learnt (the copying heads form sooner in a shallow model; docs/results.md)."""
    if cfg.num_experts or deeper.num_experts:
        raise ValueError("grow_layers: dense models only (the mixture-of-experts layout has several layer groups)")
    if dataclasses.replace(deeper, num_layers=cfg.num_layers) != cfg or deeper.num_layers < cfg.num_layers:
        raise ValueError(f"grow_layers: {deeper.num_layers} layers must be at least {cfg.num_layers} of the same shape")
    fresh = model.init_params(deeper, rng)
    (block,), (new,) = params["blocks"], fresh["blocks"]
    grown = {k: v.at[: cfg.num_layers].set(block[k]) for k, v in new.items()}  # [layers, ...]
    for k in ("o", "down"):
        grown[k] = grown[k].at[cfg.num_layers :].set(0.0)
    return {**params, "blocks": (grown,)}


def gap_at(step: int, steps: int, max_gap: int) -> int:
    """The largest gap of warm-up step `step` of `steps`: 0 for the first half (the copying heads form on
    adjacent copies; with gaps of up to 256 from the start they had not formed after 1,400 steps), then growing
    linearly to `max_gap` at the last step."""
    return int(max_gap * min(1.0, max(0.0, 2 * step / steps - 1)))


def run_copy_warmup(
    cfg: model.ModelConfig,
    vocab: np.ndarray,
    out_dir: str | Path,
    *,
    steps: int,
    lr: float,
    rows: int = 4,
    seq_len: int = 256,
    seed: int = 0,
    target_loss: float = 0.0,
    grow_to: model.ModelConfig | None = None,
    digits: np.ndarray | None = None,
    digit_rate: float = 0.0,
    max_gap: int = 0,
    checkpoint_dir: str | Path | None = None,
    save_every: int = 250,
    progress: bool = True,
) -> dict:
    """Train `cfg` from random init on up to `steps` copy batches (constant `lr` after 10 warm-up steps), stopping
    early once the 50-step mean loss is below `target_loss`, grow it to `grow_to`'s depth if given (`grow_layers`)
    and save it as an HF checkpoint in `out_dir`; returns the first and last 50-step mean losses, the steps taken
    and the step it resumed from.
    digits, digit_rate, max_gap: number-like runs and gaps before the copy (`copy_batch`); rows of `seq_len` plus
    `max_gap` tokens; the gaps start halfway and grow linearly to `max_gap` at the last step.
    checkpoint_dir: save there every `save_every` steps, and on Ctrl-C or SIGTERM (then raise `Interrupted`); a
    checkpoint found there is resumed, so the call must repeat the arguments it was made with."""
    if vocab.size == 0 or vocab.min() < 0 or vocab.max() >= cfg.vocab_size:
        span = f"{vocab.min()}..{vocab.max()}" if vocab.size else "nothing"
        raise ValueError(f"copy-task ids must lie in [0, vocab_size={cfg.vocab_size}), got {span} ({vocab.size} ids)")
    optimizer = make_optimizer(
        OptimizerConfig(lr=lr, min_lr=lr, warmup_steps=min(10, steps - 1), total_steps=steps, weight_decay=0.01)
    )
    params = model.init_params(cfg, jax.random.PRNGKey(seed))
    state = TrainState(step=np.int32(0), params=params, opt_state=optimizer.init(params), rng=jax.random.PRNGKey(seed))
    rng, losses, start = np.random.default_rng(seed), [], 0
    ckpt = Checkpointer(checkpoint_dir, save_every=save_every, keep=1) if checkpoint_dir is not None else None
    if ckpt is not None and ckpt.latest_step() is not None:
        restored = ckpt.restore(state)
        state, start = restored.state, restored.step
        rng.bit_generator.state, losses = restored.data_state["rows"], restored.data_state["losses"]

    @functools.partial(jax.jit, donate_argnums=(0, 1))
    def step(params, opt_state, batch):
        loss, grads = jax.value_and_grad(lambda p: sft_loss(p, batch, cfg, chunk_size=seq_len + max_gap)[0])(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    params, opt_state = state.params, state.opt_state
    bar = tqdm(range(start, steps), initial=start, total=steps, desc="copy warm-up", disable=not progress)
    with stop_requests(enabled=ckpt is not None) as stop:
        for i in bar:
            if len(losses) >= 50 and np.mean(losses[-50:]) < target_loss:  # reached before a stop, or just now
                break
            batch = copy_batch(
                rng,
                vocab,
                rows,
                seq_len + max_gap,
                digits=digits,
                digit_rate=digit_rate,
                max_gap=gap_at(i, steps, max_gap),
            )
            params, opt_state, loss = step(params, opt_state, batch)
            losses.append(float(loss))
            if i % 10 == 0:
                bar.set_postfix(loss=f"{np.mean(losses[-10:]):.3f}")
            if ckpt is not None:
                stopping = stop.signal_name is not None and i + 1 < steps
                ckpt.save(
                    i + 1,
                    TrainState(step=np.int32(i + 1), params=params, opt_state=opt_state, rng=state.rng),
                    data_state={"rows": rng.bit_generator.state, "losses": losses},
                    force=stopping,
                )
                if stopping:
                    ckpt.close()  # waits for the save
                    raise Interrupted(stop.signal_name, i + 1, checkpoint_dir)
    bar.close()
    if ckpt is not None:
        ckpt.close()
    if grow_to is not None:
        params, cfg = grow_layers(params, cfg, grow_to, jax.random.PRNGKey(seed + 1)), grow_to
    model.save_hf(params, cfg, out_dir)
    return {
        "first_loss": float(np.mean(losses[:50])),
        "final_loss": float(np.mean(losses[-50:])),
        "steps": len(losses),
        "resumed_from": start,
    }
