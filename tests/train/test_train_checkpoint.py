"""Checkpoints: interval and forced saves, keep K, exact round trip with the JSON iterator state."""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
import pytest

from jaxseeker.train.checkpoint import Checkpointer, _this_process, restore_params
from jaxseeker.train.state import abstract_train_state


@pytest.fixture(scope="module")
def states(toy, toy_state):
    """A state (with MultiSteps' nested optax state) and its abstract form, the restore target."""
    return toy_state.state, abstract_train_state(toy_state.init, toy.axes, toy_state.tx, toy_state.mesh)


def assert_trees_equal(a, b):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_saves_on_the_interval_and_at_the_end_keeping_the_newest(tmp_path, states):
    state, _ = states
    with Checkpointer(tmp_path, save_every=2, keep=2) as ckpt:
        saved = [ckpt.save(step, state, data_state={"step": step}) for step in range(1, 6)]
        assert saved == [False, True, False, True, False]
        assert ckpt.save(5, state, data_state={"step": 5}, force=True)  # the end of the run
        ckpt.wait()
        assert ckpt.all_steps() == [4, 5]
        assert ckpt.latest_step() == 5


def test_round_trip_restores_state_iterator_and_config(tmp_path, states):
    state, target = states
    data_state = {"epoch": 1, "shards": [{"path": "a.jsonl", "offset": 17}], "seed": 3}
    config = {"model": {"vocab": 32}, "optimizer": {"lr": 1e-3}}
    with Checkpointer(tmp_path, save_every=10) as ckpt:
        ckpt.save(10, state, data_state=data_state, config=config)
    with Checkpointer(tmp_path) as resumed:  # a new process finds and restores it
        restored = resumed.restore(target)
    assert restored.step == 10
    assert restored.data_state == data_state and restored.config == config
    assert_trees_equal(restored.state, state)
    for array, want in zip(jax.tree.leaves(restored.state), jax.tree.leaves(target)):
        assert array.sharding == want.sharding


def test_params_alone_can_be_restored(tmp_path, states):
    state, target = states
    with Checkpointer(tmp_path, save_every=1) as ckpt:
        ckpt.save(3, state)
    params = restore_params(tmp_path, target.params)
    assert_trees_equal(params, state.params)


def test_missing_checkpoints_are_clear_errors(tmp_path, states):
    _, target = states
    with Checkpointer(tmp_path / "empty") as ckpt:
        assert ckpt.latest_step() is None
        with pytest.raises(FileNotFoundError, match="no checkpoint to restore"):
            ckpt.restore(target)
        ckpt.save(1, states[0], force=True)
        ckpt.wait()
        with pytest.raises(FileNotFoundError, match=r"no checkpoint at step 7; steps: \[1\]"):
            ckpt.restore(target, step=7)


def test_shared_data_state_restores_with_any_process_count_and_per_process_states_need_theirs():
    shared = {"per_process": [{"epoch": 2, "index": 7}] * 2}
    assert _this_process(shared, Path("ckpt/4"), index=0, count=1) == {"epoch": 2, "index": 7}
    assert _this_process(shared, Path("ckpt/4"), index=3, count=4) == {"epoch": 2, "index": 7}
    own = {"per_process": [{"index": 7}, {"index": 9}]}
    assert _this_process(own, Path("ckpt/4"), index=1, count=2) == {"index": 9}
    with pytest.raises(ValueError, match=r"ckpt/4: data state saved by 2 processes .* restoring with 1"):
        _this_process(own, Path("ckpt/4"), index=0, count=1)
