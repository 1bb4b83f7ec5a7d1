"""Copy warm-up: rows of `x x` runs, loss only where the second run can be predicted, and a model that learns it."""

import dataclasses
import signal

import jax
import numpy as np
import pytest

from jaxseeker import model
from jaxseeker.train.interrupt import Interrupted
from jaxseeker.train.sft import copy_warmup
from jaxseeker.train.sft.copy_warmup import copy_batch, gap_at, grow_layers, run_copy_warmup


def test_each_segment_is_a_run_then_the_same_run_and_only_the_predictable_copy_is_trained():
    vocab = np.arange(10, 60, dtype=np.int32)
    batch = copy_batch(np.random.default_rng(0), vocab, rows=3, seq_len=64)
    assert {k: v.shape for k, v in batch.items()} == {k: (3, 64) for k in batch}
    np.testing.assert_array_equal(batch["targets"][:, :-1], batch["tokens"][:, 1:])
    again = copy_batch(np.random.default_rng(0), vocab, rows=3, seq_len=64)
    assert all(np.array_equal(batch[k], again[k]) for k in batch)
    for row in range(3):
        segs = batch["segment_ids"][row]
        for s in set(segs.tolist()) - {0}:
            idx = np.nonzero(segs == s)[0]
            tokens, n = batch["tokens"][row, idx], len(idx) // 2
            targets, mask = batch["targets"][row, idx], batch["loss_mask"][row, idx]
            assert len(idx) % 2 == 0 and 4 <= n <= 24 and set(tokens.tolist()) <= set(vocab.tolist())
            assert np.array_equal(batch["positions"][row, idx], np.arange(2 * n))
            np.testing.assert_array_equal(tokens[n:], tokens[:n])
            trained = np.nonzero(mask)[0]  # positions whose next token is x_2 .. x_n of the copy
            np.testing.assert_array_equal(trained, np.arange(n, 2 * n - 1))
            np.testing.assert_array_equal(targets[trained], tokens[1:n])
        assert batch["loss_mask"][row][segs == 0].sum() == 0


def test_number_like_runs_are_a_few_ordinary_ids_then_digits():
    vocab, digits = np.arange(10, 60, dtype=np.int32), np.arange(0, 10, dtype=np.int32)
    plain = copy_batch(np.random.default_rng(0), vocab, rows=3, seq_len=64)
    same = copy_batch(np.random.default_rng(0), vocab, rows=3, seq_len=64, digits=digits, digit_rate=0.0)
    assert all(np.array_equal(plain[k], same[k]) for k in plain)  # rate 0: exactly the plain rows
    batch = copy_batch(np.random.default_rng(1), vocab, rows=4, seq_len=256, digits=digits, digit_rate=1.0)
    for row in range(4):
        segs = batch["segment_ids"][row]
        for s in set(segs.tolist()) - {0}:
            tokens = batch["tokens"][row, segs == s]
            n = len(tokens) // 2
            np.testing.assert_array_equal(tokens[n:], tokens[:n])
            is_digit = np.isin(tokens[:n], digits)
            k = int(np.argmax(is_digit))  # the ordinary ids come first, then only digits
            assert 1 <= k <= 3 and 3 <= n - k <= 8 and is_digit[k:].all()
    mixed = copy_batch(np.random.default_rng(2), vocab, rows=8, seq_len=256, digits=digits, digit_rate=0.5)
    assert 0 < np.isin(mixed["tokens"], digits).mean() < 0.5


def test_a_gap_of_untrained_filler_can_stand_between_a_run_and_its_copy():
    vocab = np.arange(10, 4000, dtype=np.int32)  # wide enough that a filler id repeating the run's first id is rare
    batch = copy_batch(np.random.default_rng(3), vocab, rows=2, seq_len=512, max_gap=64)
    gaps = []
    for row in range(2):
        segs = batch["segment_ids"][row]
        for s in set(segs.tolist()) - {0}:
            idx = np.nonzero(segs == s)[0]
            tokens, mask = batch["tokens"][row, idx], batch["loss_mask"][row, idx]
            trained = np.nonzero(mask)[0]
            start = trained[0]  # the copy's first token: its successor is the first trained target
            n = len(idx) - start
            gaps.append(len(idx) - 2 * n)
            np.testing.assert_array_equal(tokens[start:], tokens[:n])
            np.testing.assert_array_equal(trained, np.arange(start, len(idx) - 1))
    assert 0 <= min(gaps) and max(gaps) <= 64 and len(set(gaps)) > 3


def test_gaps_start_halfway_and_grow_to_the_maximum():
    assert [gap_at(i, 100, 160) for i in (0, 25, 50, 75, 100)] == [0, 0, 0, 80, 160]
    assert all(gap_at(i, 100, 0) == 0 for i in range(100))


def test_warmup_lowers_the_copy_loss_stops_below_its_target_and_saves_a_checkpoint_transformers_layout(tmp_path):
    cfg = model.ModelConfig.tiny(vocab_size=64, attention_impl="blocked")
    vocab = np.arange(8, 64, dtype=np.int32)
    target = np.log(len(vocab)) - 0.2  # below what guessing among the ids scores: the model must copy
    summary = run_copy_warmup(
        cfg, vocab, tmp_path, steps=2000, lr=1e-2, rows=2, seq_len=128, target_loss=target, progress=False
    )
    assert 50 <= summary["steps"] < 2000, summary
    assert summary["final_loss"] < target < summary["first_loss"], summary  # it reads the first run
    loaded_cfg, params = model.load_hf(tmp_path)
    assert loaded_cfg.hidden_size == cfg.hidden_size and params["embed"].shape == (64, cfg.hidden_size)


def test_grown_layers_start_as_identities_so_the_deeper_model_computes_the_same_logits():
    cfg = model.ModelConfig.tiny(vocab_size=64)
    deeper = dataclasses.replace(cfg, num_layers=4)
    params = model.init_params(cfg, jax.random.PRNGKey(0))
    grown = grow_layers(params, cfg, deeper, jax.random.PRNGKey(1))
    ids = np.random.default_rng(0).integers(0, 64, (2, 12))
    np.testing.assert_allclose(model.forward(grown, ids, deeper), model.forward(params, ids, cfg), atol=1e-5)
    (block,) = grown["blocks"]
    assert block["q"].shape[0] == 4 and np.abs(block["q"][2:]).sum() > 0  # fresh attention, free to learn
    assert not np.any(block["o"][2:]) and not np.any(block["down"][2:])  # the new layers add nothing yet
    with pytest.raises(ValueError, match="4 layers must be at least 2 of the same shape"):
        grow_layers(params, cfg, dataclasses.replace(deeper, hidden_size=32), jax.random.PRNGKey(1))


def test_warmup_can_grow_the_model_before_saving_it(tmp_path):
    cfg = model.ModelConfig.tiny(vocab_size=64, num_layers=1)
    run_copy_warmup(
        cfg,
        np.arange(8, 64, dtype=np.int32),
        tmp_path,
        steps=2,
        lr=1e-3,
        rows=2,
        seq_len=64,
        grow_to=dataclasses.replace(cfg, num_layers=3),
        progress=False,
    )
    loaded_cfg, params = model.load_hf(tmp_path)
    assert loaded_cfg.num_layers == 3 and params["blocks"][0]["o"].shape[0] == 3


def test_ids_outside_the_model_vocabulary_are_an_error(tmp_path):
    cfg = model.ModelConfig.tiny(vocab_size=64)
    with pytest.raises(ValueError, match=r"copy-task ids must lie in \[0, vocab_size=64\), got 8..99 \(92 ids\)"):
        run_copy_warmup(cfg, np.arange(8, 100, dtype=np.int32), tmp_path, steps=2, lr=1e-3, progress=False)


def test_a_stopped_warmup_saves_its_step_and_resumes_to_the_uninterrupted_model(tmp_path, monkeypatch):
    cfg = model.ModelConfig.tiny(vocab_size=64, attention_impl="blocked")
    vocab = np.arange(8, 64, dtype=np.int32)
    args = dict(
        steps=12,
        lr=1e-2,
        rows=2,
        seq_len=64,
        digits=np.arange(8, 18, dtype=np.int32),
        digit_rate=0.5,
        max_gap=16,
        save_every=5,
        progress=False,
    )
    whole = run_copy_warmup(cfg, vocab, tmp_path / "whole", checkpoint_dir=tmp_path / "whole-ckpt", **args)
    calls = []

    def ctrl_c_while_drawing_step_8(*a, **kw):
        calls.append(1)
        if len(calls) == 8:
            signal.raise_signal(signal.SIGINT)  # the step in flight (the 8th) still runs and is saved
        return copy_batch(*a, **kw)

    monkeypatch.setattr(copy_warmup, "copy_batch", ctrl_c_while_drawing_step_8)
    with pytest.raises(
        Interrupted, match=f"stopped by SIGINT after step 8; its checkpoint is saved under {tmp_path / 'ckpt'}"
    ) as stopped:
        run_copy_warmup(cfg, vocab, tmp_path / "out", checkpoint_dir=tmp_path / "ckpt", **args)
    assert stopped.value.exit_code == 130 and not (tmp_path / "out").exists()
    assert sorted(int(p.name) for p in (tmp_path / "ckpt").iterdir() if p.name.isdigit()) == [8]  # keeps the newest
    monkeypatch.undo()
    resumed = run_copy_warmup(cfg, vocab, tmp_path / "out", checkpoint_dir=tmp_path / "ckpt", **args)
    assert resumed == whole | {"resumed_from": 8} and whole["resumed_from"] == 0
    (_, expected), (_, got) = model.load_hf(tmp_path / "whole"), model.load_hf(tmp_path / "out")
    jax.tree.map(lambda a, b: np.testing.assert_array_equal(np.asarray(a), np.asarray(b)), expected, got)


def test_a_warmup_that_reached_its_target_before_the_stop_ends_on_resume(tmp_path):
    cfg = model.ModelConfig.tiny(vocab_size=64, attention_impl="blocked")
    vocab = np.arange(8, 64, dtype=np.int32)
    args = dict(steps=200, lr=1e-2, rows=2, seq_len=64, target_loss=100.0, save_every=50, progress=False)
    first = run_copy_warmup(cfg, vocab, tmp_path / "a", checkpoint_dir=tmp_path / "ckpt", **args)
    assert first["steps"] == 50  # the first 50-step mean is under any loss this high
    again = run_copy_warmup(cfg, vocab, tmp_path / "b", checkpoint_dir=tmp_path / "ckpt", **args)
    assert again == first | {"resumed_from": 50}  # no step taken: the saved losses already met it
