"""Orbax checkpoints of a run: the train state as arrays, the data iterator state and run config as JSON.

A checkpoint step directory holds three items:
  state   the TrainState pytree (step, params, optimizer state, RNG), written collectively by all
          processes, each its own shards; restored straight onto the shardings of a target;
  data    every process's data iterator state (JSON; e.g. grain's `iterator.get_state()`), gathered
          into one file by process 0, for an exact resume of each process's own shard;
  config  the run config (JSON), so a checkpoint says how it was made.
Saves are asynchronous: `save` returns once the arrays are copied off the devices.

Besides every `save_every` steps, a multi-host run saves at JAX's preemption sync point: when any host gets the
preemption notice (SIGTERM, which `jax.distributed` catches on every host, or a TPU maintenance event), all hosts
agree on the next step they all reach, save it and stop (`preempted`). This is orbax's preemption-aware policy
(`PreemptionCheckpointingPolicy`) alongside the interval one; a single process has no sync point and stops on its
own signal handler instead (`train.interrupt`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp
from etils import epath

from jaxseeker.parallel import all_gather_objects
from jaxseeker.train.state import TrainState


@dataclasses.dataclass(frozen=True)
class Restored:
    """What `Checkpointer.restore` returns."""

    step: int
    state: TrainState
    data_state: dict
    config: dict


class Checkpointer:
    """Save every `save_every` steps, at a preemption sync point and when forced (e.g. at the end); keep the newest
    `keep`."""

    def __init__(self, directory: str | Path, *, save_every: int = 1000, keep: int | None = 3, async_save: bool = True):
        """Open (or create) the checkpoint directory; existing checkpoints in it are found by `latest_step`."""
        if save_every < 1:
            raise ValueError(f"save_every must be >= 1, got {save_every}")
        if keep is not None and keep < 1:
            raise ValueError(f"keep must be >= 1 or None (keep all), got {keep}")
        self.directory = checkpoint_path(directory)
        policies = ocp.checkpoint_managers
        options = ocp.CheckpointManagerOptions(
            save_decision_policy=policies.AnySavePolicy(
                [policies.FixedIntervalPolicy(save_every), policies.PreemptionCheckpointingPolicy()]
            ),
            max_to_keep=keep,
            enable_async_checkpointing=async_save,
            create=True,
        )
        self._manager = ocp.CheckpointManager(self.directory, options=options, item_names=("state", "data", "config"))

    def save(
        self,
        step: int,
        state: TrainState,
        *,
        data_state: dict | None = None,
        config: dict | None = None,
        force: bool = False,
    ) -> bool:
        """Save at `step` if it is a multiple of `save_every`, the preemption sync point, or `force`; True when a save
        was started.

        Every process must call it, at every step (the array write is collective, and the preemption protocol counts
        the steps). `data_state` (this process's) and `config` must be JSON-serialisable. A forced save of a step
        already saved does nothing.
        """
        if step in self._manager.all_steps() or not (force or self._manager.should_save(int(step))):
            return False
        args = ocp.args.Composite(
            state=ocp.args.StandardSave(state),
            data=ocp.args.JsonSave({"per_process": all_gather_objects(data_state or {})}),
            config=ocp.args.JsonSave(config or {}),
        )
        return self._manager.save(int(step), args=args, force=force)

    def preempted(self, step: int) -> bool:
        """True when `step` is the preemption sync point (see the module docstring): `save` has saved it, and the
        run should stop. Always False on one process."""
        return self._manager.reached_preemption(int(step))

    def restore(self, target: TrainState, step: int | None = None) -> Restored:
        """Restore `step` (default: the latest) onto `target`'s shapes, dtypes and shardings.

        `target` is a TrainState of `jax.ShapeDtypeStruct`s with shardings
        (`state.abstract_train_state(...)`) or of real arrays; the restored arrays land sharded.
        """
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"{self.directory}: no checkpoint to restore")
        if step not in self.all_steps():
            raise FileNotFoundError(f"{self.directory}: no checkpoint at step {step}; steps: {self.all_steps()}")
        abstract = jax.tree.map(_abstract_leaf, target)
        out = self._manager.restore(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardRestore(abstract),
                data=ocp.args.JsonRestore(),
                config=ocp.args.JsonRestore(),
            ),
        )
        return Restored(
            step=step,
            state=out.state,
            data_state=_this_process(out.data, self.directory / str(step)),
            config=out.config or {},
        )

    def latest_step(self) -> int | None:
        """The newest saved step, or None when the directory holds no checkpoint."""
        return self._manager.latest_step()

    def all_steps(self) -> list[int]:
        """All kept steps, oldest first."""
        return sorted(self._manager.all_steps())

    def wait(self) -> None:
        """Block until any asynchronous save has been written."""
        self._manager.wait_until_finished()

    def close(self) -> None:
        """Finish pending saves and release the manager."""
        self._manager.wait_until_finished()
        self._manager.close()

    def __enter__(self) -> Checkpointer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def checkpoint_path(directory: str | Path) -> epath.Path:
    """A local directory (made absolute) or a `gs://` URL, as orbax reads and writes it (gs:// needs gcsfs)."""
    text = str(directory)
    return epath.Path(text) if text.startswith("gs://") else epath.Path(Path(text).absolute())


def _this_process(saved: dict | None, where: Path, index: int | None = None, count: int | None = None) -> dict:
    """This process's entry of a saved `data` item (a checkpoint without per-process entries is returned whole).

    When every process saved the same state (a global sampler, as in RL) any process count may restore it;
    per-process states (each host's data shard) need the process count they were saved with.
    """
    index = jax.process_index() if index is None else index
    count = jax.process_count() if count is None else count
    saved = saved or {}
    if "per_process" not in saved:
        return saved
    states = saved["per_process"]
    if all(state == states[0] for state in states):
        return states[0]
    if len(states) != count:
        raise ValueError(
            f"{where}: data state saved by {len(states)} processes (each its own data shard), "
            f"restoring with {count}: resume with {len(states)} processes"
        )
    return states[index]


def _abstract_leaf(x: Any) -> jax.ShapeDtypeStruct:
    """A restore target leaf: shape, dtype and sharding of an array or ShapeDtypeStruct."""
    return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=getattr(x, "sharding", None))


def restore_params(directory: str | Path, target_params: Any, step: int | None = None) -> Any:
    """Only the params of a checkpoint (no optimizer state is read), onto `target_params`' shardings.

    `target_params`: params pytree of arrays or `ShapeDtypeStruct`s (with shardings), e.g. for HF export.
    """
    with Checkpointer(directory, async_save=False) as ckpt:
        step = ckpt.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"{checkpoint_path(directory)}: no checkpoint to restore")
        abstract = {"params": jax.tree.map(_abstract_leaf, target_params)}
        restore_args = ocp.checkpoint_utils.construct_restore_args(abstract)
        out = ckpt._manager.restore(
            step,
            args=ocp.args.Composite(
                state=ocp.args.PyTreeRestore(item=abstract, restore_args=restore_args, partial_restore=True)
            ),
        )
    return out.state["params"]
