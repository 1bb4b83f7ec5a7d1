"""One of two local CPU processes of a multi-host `jaxseeker sft` run (2 devices each, 4 in all); prints JSON.

Run by `test_multihost.py`, which sets JAX_COORDINATOR_ADDRESS / JAX_NUM_PROCESSES / JAX_PROCESS_ID as a
launcher does on each host of a pod, so the SFT loop's `maybe_initialize_distributed()` starts the
distributed runtime and the recipe's (data=2, fsdp=2) mesh spans both processes. It trains a few steps,
then a second `run_sft(..., resume=True)` continues from the checkpoint (in the same interpreter, to
start JAX once; the state and the data position come back from disk). The loop itself shards
the data by process index, writes logs from process 0 only and checkpoints collectively; this worker
adds what the test cannot see from outside: the distributed state, and which trajectories this
process's loader (jax's process index, no arguments) feeds the steps it ran.
"""

from __future__ import annotations

import json
import re
import sys

from jaxseeker.data import DataConfig, batch_iterator, load_tokenizer, open_source
from jaxseeker.parallel import is_main_process, process_info
from jaxseeker.train.recipe import read_recipe
from jaxseeker.train.sft.loop import run_sft


def items_read(recipe: dict, n_batches: int) -> list[int]:
    """The `item N` numbers of the trajectories in this process's first `n_batches` packed batches."""
    data = DataConfig(**recipe["data"])
    records = open_source(recipe["train"]["train_files"])
    tokenizer = load_tokenizer(recipe["train"]["tokenizer"])
    seen: set[int] = set()
    for _, batch in zip(range(n_batches), batch_iterator(records, tokenizer, data)):
        text = tokenizer.decode(batch["tokens"][batch["segment_ids"] > 0].tolist())
        seen.update(int(n) for n in re.findall(r"Where is item (\d+)\?", text))
    return sorted(seen)


def main(recipe_path: str, first_steps: str, total_steps: str) -> None:
    """Train `first_steps` steps of the recipe, resume from its checkpoint up to `total_steps`, print the report."""
    first = run_sft(read_recipe(recipe_path, [f"train.steps={first_steps}"]), progress=False)
    recipe = read_recipe(recipe_path, [f"train.steps={total_steps}"])
    resumed = run_sft(recipe, resume=True, progress=False)
    report = {
        "info": process_info(),
        "main": is_main_process(),
        "resumed_from": [first["resumed_from"], resumed["resumed_from"]],
        "items": items_read(recipe, int(total_steps)),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main(*sys.argv[1:])
