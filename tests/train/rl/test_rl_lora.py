"""`jaxseeker rl` with `model.lora` on the toy task: the update trains the adapters, the engine rolls out with the
base and adapters merged (its log-probs are the training forward's after an update), a resumed run repeats the
uninterrupted one, and the export is the merged model."""

import shutil
from pathlib import Path

import jax
import numpy as np
import pytest
import torch
import transformers

from jaxseeker import model
from jaxseeker.train.export import export_hf, restore_run
from jaxseeker.train.metrics import read_metrics
from jaxseeker.train.recipe import read_recipe
from jaxseeker.train.rl.bench import write_toy
from jaxseeker.train.rl.loop import run_rl

CONFIG = Path(__file__).parents[3] / "configs" / "rl_tiny.yaml"
LORA = [
    "model.lora={rank: 4, alpha: 8, targets: [q, v, up, down]}",
    "rl.steps=3",
    "rl.checkpoint_every=1",
    "rl.recompute_old_logp=true",  # logs the engine's log-probs against the training forward's
]


def _recipe(paths: dict, out: Path, *extra: str) -> dict:
    return read_recipe(
        CONFIG,
        [
            f"model.hf_path={paths['policy']}",
            f"rl.questions=[{paths['questions']}]",
            f"rl.out_dir={out}",
            *LORA,
            *extra,
        ],
    )


def _with_live_layers(path: str) -> None:
    """The toy policy's zero layers made small random ones: with W = 0 and B = 0 every adapter gradient is zero
    (a saddle), which real checkpoints never start at."""
    cfg, params = model.load_hf(path)
    keys = iter(jax.random.split(jax.random.PRNGKey(0), 64))
    blocks = jax.tree.map(lambda w: w + 0.02 * jax.random.normal(next(keys), w.shape), params["blocks"])
    model.save_hf({**params, "blocks": blocks}, cfg, path)


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("rl_lora")
    paths = write_toy(root / "toy")
    _with_live_layers(paths["policy"])
    out = root / "run"
    run_rl(_recipe(paths, out), progress=False)
    return paths, out, read_metrics(out / "metrics.jsonl")


def test_a_lora_rl_step_trains_the_adapters_and_rolls_out_with_them_merged(lora_run, tmp_path):
    paths, out, rows = lora_run
    assert [r["step"] for r in rows] == [1, 2, 3]
    for row in rows:
        assert row["grad_norm"] > 0 and row["skipped_update"] == 0.0
        # the engine's sampling log-probs against the training forward's: after the first step the engine runs the
        # base with the updated adapters merged in, the update the base with them attached
        assert row["logp_mismatch"] < 1e-4, row["step"]
    _, cfg, merged = restore_run(out)
    base = model.load_hf(paths["policy"])[1]
    changed = [
        n
        for n in ("q", "k", "v", "o", "gate", "up", "down")
        if not np.array_equal(np.asarray(merged["blocks"][0][n]), np.asarray(base["blocks"][0][n]))
    ]
    assert changed == ["q", "v", "up", "down"]  # the targets moved, the rest is the base
    np.testing.assert_array_equal(np.asarray(merged["embed"]), np.asarray(base["embed"]))

    hf = transformers.AutoModelForCausalLM.from_pretrained(export_hf(out, tmp_path / "hf")).eval()
    ids = np.random.default_rng(0).integers(0, cfg.vocab_size, (1, 16))
    with torch.no_grad():
        theirs = hf(input_ids=torch.tensor(ids)).logits.numpy()
    assert np.abs(theirs - np.asarray(model.forward(merged, ids, cfg))).max() <= 1e-4


def test_a_resumed_lora_run_repeats_the_uninterrupted_steps(lora_run, tmp_path):
    paths, out, rows = lora_run
    killed = tmp_path / "killed"  # as if killed after step 1's checkpoint
    shutil.copytree(out / "checkpoints" / "1", killed / "checkpoints" / "1")
    assert run_rl(_recipe(paths, killed), resume=True, progress=False)["resumed_from"] == 1
    resumed = {r["step"]: r for r in read_metrics(killed / "metrics.jsonl")}
    assert sorted(resumed) == [2, 3]
    for row in rows[1:]:
        for key in ("reward", "loss", "grad_norm"):
            assert resumed[row["step"]][key] == pytest.approx(row[key], rel=1e-5, abs=1e-7), (row["step"], key)
    _, _, a = restore_run(out)
    _, _, b = restore_run(killed)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=0, atol=1e-6)
