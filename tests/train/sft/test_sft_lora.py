"""`jaxseeker sft` with `model.lora`: only the adapters train (the base is neither updated nor given optimizer
state), the loss falls, Ctrl-C + --resume repeats the uninterrupted run, and the export is the merged model that
transformers loads with the adapted forward's logits."""

import json
import shutil
import signal

import jax
import jax.numpy as jnp
import numpy as np
import peft
import pytest
import torch
import transformers
import yaml

from jaxseeker import model
from jaxseeker.data import place_on_mesh, train_tokenizer
from jaxseeker.errors import InputError
from jaxseeker.train.export import export_hf, restore_adapters, restore_run
from jaxseeker.train.interrupt import Interrupted
from jaxseeker.train.metrics import MetricsWriter, read_metrics
from jaxseeker.train.recipe import RecipeError, read_recipe
from jaxseeker.train.sft.loop import prepare, run_sft

STEPS = 16
LORA = model.LoraConfig(rank=8, alpha=16)  # the recipe's model.lora


def _trajectory(i: int) -> dict:
    city = ["Lyon", "Berlin", "Oslo", "Porto", "Quito", "Dakar"][i % 6]
    return {
        "messages": [
            {"role": "user", "content": f"Where is item {i}?"},
            {
                "role": "assistant",
                "content": f'<tool_call>{{"name": "search", "arguments": {{"query": "item {i}"}}}}</tool_call>',
            },
            {"role": "user", "content": f"<tool_response>\nItem {i} is kept in {city}.\n</tool_response>"},
            {"role": "assistant", "content": f"<answer>{city}</answer>"},
        ]
    }


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A tokenizer, 24 trajectories, a random tiny Llama (tied embeddings, as SmolLM2) saved as the HF base, and a
    LoRA recipe on it; returns (dir, recipe path)."""
    root = tmp_path_factory.mktemp("sft_lora")
    records = [_trajectory(i) for i in range(24)]
    train_tokenizer([m["content"] for r in records for m in r["messages"]], 400, root / "tok")
    (root / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    cfg = model.ModelConfig.tiny("llama", vocab_size=400, tie_word_embeddings=True)
    model.save_hf(model.init_params(cfg, jax.random.PRNGKey(0)), cfg, root / "base")
    recipe = {
        "model": {"hf_path": str(root / "base"), "lora": {"rank": 8, "alpha": 16}},
        "data": {"seq_len": 128, "batch_size": 4, "seed": 0, "num_threads": 0},
        "optimizer": {"lr": 1e-2, "min_lr": 1e-3, "warmup_steps": 2, "weight_decay": 0.0},
        "train": {
            "train_files": [str(root / "train.jsonl")],
            "tokenizer": str(root / "tok"),
            "steps": STEPS,
            "log_every": 1,
            "checkpoint_every": 5,
            "chunk_size": 64,
        },
    }
    path = root / "lora.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return root, path


def _leaves_equal(a, b) -> bool:
    return all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def test_only_the_adapters_train(workspace, tmp_path):
    root, path = workspace
    run = prepare(read_recipe(path, [f"train.out_dir={tmp_path / 'run'}", "optimizer.warmup_steps=0"]))
    cfg, base = run.cfg, jax.tree.map(np.asarray, model.load_hf(root / "base")[1])
    adapters = model.lora_shapes(cfg, LORA)
    assert jax.tree.map(jnp.shape, run.state.params) == jax.tree.map(
        tuple, adapters, is_leaf=lambda x: isinstance(x, tuple)
    )
    n_adapter = sum(x.size for x in jax.tree.leaves(run.state.params))
    n_moments = sum(x.size for x in jax.tree.leaves(run.state.opt_state) if x.ndim)
    assert n_moments == 2 * n_adapter and n_adapter < model.count_params(cfg) // 4  # AdamW moments of adapters only

    state, before = run.state, jax.tree.map(np.asarray, run.state.params)
    state, metrics = run.step_fn(state, place_on_mesh(next(run.iterator), run.batch_sharding))
    after = jax.tree.map(np.asarray, state.params)
    for old, new in zip(before["blocks"][0].values(), after["blocks"][0].values()):
        # B starts at zero, so dL/dA = s·dL/dW·Bᵀ = 0 on the first step (no weight decay): only B moves
        np.testing.assert_array_equal(new["a"], old["a"])
        assert not np.any(old["b"]) and np.any(new["b"])
    state, _ = run.step_fn(state, place_on_mesh(next(run.iterator), run.batch_sharding))
    assert not _leaves_equal(state.params["blocks"][0]["q"]["a"], after["blocks"][0]["q"]["a"])  # now A moves too
    assert float(metrics["grad_norm"]) > 0
    assert not any(x.is_deleted() for x in jax.tree.leaves(run.base))  # the base is not donated to the step …
    assert _leaves_equal(run.base, base)  # … nor changed by it


@pytest.fixture(scope="module")
def lora_run(workspace, tmp_path_factory) -> tuple:
    """(run directory, summary) of the recipe's uninterrupted LoRA run of `STEPS` steps."""
    _, path = workspace
    out = tmp_path_factory.mktemp("lora_run")
    return out, run_sft(read_recipe(path, [f"train.out_dir={out}"]), progress=False)


def test_lora_sft_lowers_the_loss_and_exports_the_merged_model(workspace, lora_run, tmp_path):
    root, _ = workspace
    out, summary = lora_run
    losses = [r["loss"] for r in read_metrics(out / "metrics.jsonl") if "loss" in r]
    assert len(losses) == STEPS and np.mean(losses[-3:]) < 0.7 * np.mean(losses[:3])
    assert summary["trained_parameters"] < summary["parameters"] // 4
    assert json.loads((out / "lora.json").read_text()) == {
        "rank": 8,
        "alpha": 16,
        "targets": list(model.lora.TARGETS),
        "base": str(root / "base"),
    }

    hf_dir = export_hf(out, tmp_path / "hf", peft_dir=tmp_path / "peft")
    hf = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, attn_implementation="eager").eval()
    base_hf = transformers.AutoModelForCausalLM.from_pretrained(root / "base", attn_implementation="eager")
    with_adapter = peft.PeftModel.from_pretrained(base_hf, tmp_path / "peft").eval()  # the same adapters, unmerged
    _, cfg, merged = restore_run(out)
    _, base = model.load_hf(root / "base")
    adapters = restore_adapters(out, cfg, LORA)
    ids = np.random.default_rng(0).integers(0, cfg.vocab_size, (2, 24))
    adapted = np.asarray(model.forward(model.attach_lora(base, adapters, LORA), jnp.asarray(ids), cfg))  # as trained
    with torch.no_grad():
        theirs = hf(input_ids=torch.tensor(ids)).logits.numpy()
        theirs_peft = with_adapter(input_ids=torch.tensor(ids)).logits.numpy()
    plain = np.asarray(model.forward(base, jnp.asarray(ids), cfg))
    assert np.abs(adapted - plain).max() > 0.1  # the adapters trained: the comparison is not the base's
    assert np.abs(theirs - adapted).max() <= 1e-4
    assert np.abs(theirs_peft - adapted).max() <= 1e-4
    assert not _leaves_equal(merged, base)
    shutil.copytree(
        out, tmp_path / "full", ignore=shutil.ignore_patterns("lora.json")
    )  # a full fine-tuning run's files
    with pytest.raises(InputError, match="not a LoRA run .no lora.json., so it has no adapters to write as PEFT's"):
        export_hf(tmp_path / "full", tmp_path / "hf_full", peft_dir=tmp_path / "peft_full")


def test_ctrl_c_and_resume_restore_the_adapters_of_the_uninterrupted_run(workspace, lora_run, tmp_path, monkeypatch):
    _, path = workspace
    whole_dir, whole = lora_run
    write = MetricsWriter.write

    def ctrl_c_during_step_3(self, step, metrics, prefix=""):
        write(self, step, metrics, prefix)
        if step == 3:
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(MetricsWriter, "write", ctrl_c_during_step_3)
    recipe = read_recipe(path, [f"train.out_dir={tmp_path / 'stopped'}"])
    with pytest.raises(Interrupted):
        run_sft(recipe, progress=False)
    monkeypatch.undo()
    resumed = run_sft(recipe, resume=True, progress=False)
    assert resumed["resumed_from"] == 3 and resumed["final_loss"] == pytest.approx(whole["final_loss"], abs=1e-6)
    _, _, a = restore_run(whole_dir)
    _, _, b = restore_run(tmp_path / "stopped")
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "setting, message",
    [
        ("model.lora.rnak=8", r"model.lora: unknown keys \['rnak'\]; known keys: \['rank', 'alpha', 'targets'\]"),
        ("model.lora.rank=-2", "model.lora.rank: must be an integer >= 0"),
        ("model.lora.alpha=none", "model.lora.alpha: must be a number > 0"),
        ("model.lora.targets=[q, lm_head]", "model.lora.targets: 'lm_head' is not one of"),
        ("model.lora=8", "model.lora: expected a mapping of rank, alpha, targets, got 8"),
        ("model.hf_path=null", "model.lora: adapters train on a pretrained model; give model.hf_path"),
    ],
)
def test_bad_lora_settings_name_the_key(workspace, setting, message):
    _, path = workspace
    with pytest.raises(RecipeError, match=message):
        prepare(read_recipe(path, [setting]))
