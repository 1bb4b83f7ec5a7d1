"""The `jaxseeker sft` loop end to end: loss falls, SIGKILL + --resume repeats the same losses, export loads in HF."""

import json
import os
import re
import signal

import ml_dtypes
import numpy as np
import pytest
import transformers
import yaml
from kill_support import DEADLINE_S, launch, paused, run_here, wait_until

from jaxseeker.cli import main
from jaxseeker.data import train_tokenizer
from jaxseeker.model.safetensors_io import TensorReader
from jaxseeker.train.interrupt import Interrupted
from jaxseeker.train.metrics import MetricsWriter, read_metrics
from jaxseeker.train.recipe import RecipeError, read_recipe
from jaxseeker.train.sft import loop as sft_loop
from jaxseeker.train.sft.loop import prepare, run_sft

pytestmark = pytest.mark.heavy  # a minute or more of CPU: runs first (tests/conftest.py)


def _trajectory(i: int) -> dict:
    city = ["Lyon", "Berlin", "Oslo", "Porto", "Quito", "Dakar"][i % 6]
    return {
        "messages": [
            {"role": "user", "content": f"Where is item {i}?"},
            {
                "role": "assistant",
                "content": f"<think>Search item {i}.</think>\n"
                f'<tool_call>{{"name": "search", "arguments": {{"query": "item {i}"}}}}</tool_call>',
            },
            {"role": "user", "content": f"<tool_response>\nItem {i} is kept in {city}.\n</tool_response>"},
            {"role": "assistant", "content": f"<think>It is in {city}.</think>\n<answer>{city}</answer>"},
        ]
    }


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A tokenizer, 24 trajectories and a tiny recipe; returns (dir, recipe path)."""
    root = tmp_path_factory.mktemp("sft")
    records = [_trajectory(i) for i in range(24)]
    texts = [m["content"] for r in records for m in r["messages"]]
    train_tokenizer(texts, 400, root / "tok")
    with open(root / "train.jsonl", "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    recipe = {
        "model": {
            "model_type": "qwen3",
            "vocab_size": 400,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_layers": 2,
            "num_heads": 4,
            "num_kv_heads": 2,
            "head_dim": 16,
            "initializer_range": 0.05,
        },
        "data": {"seq_len": 128, "batch_size": 4, "seed": 0, "num_threads": 0},
        "optimizer": {"lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 2, "weight_decay": 0.0},
        "train": {
            "train_files": [str(root / "train.jsonl")],
            "tokenizer": str(root / "tok"),
            "steps": 30,
            "log_every": 1,
            "checkpoint_every": 5,
            "eval_fraction": 0.2,
            "chunk_size": 64,
        },
    }
    path = root / "tiny.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return root, path


def test_loss_falls_and_export_loads_in_transformers(workspace, tmp_path, capsys):
    root, path = workspace
    summary = run_sft(read_recipe(path, [f"train.out_dir={tmp_path / 'run'}"]), progress=False)
    losses = [r["loss"] for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if "loss" in r]
    assert len(losses) == 30
    assert np.mean(losses[-5:]) < 0.6 * np.mean(losses[:3])
    assert summary["eval_loss"] < losses[0]
    assert (tmp_path / "run" / "sft_loss.png").exists()
    again = run_sft(read_recipe(path, [f"train.out_dir={tmp_path / 'run'}"]), resume=True, progress=False)
    assert (again["resumed_from"], again["trained_tokens"]) == (30, 0)  # a finished run: nothing trained
    assert again["final_loss"] == pytest.approx(losses[-1]) and again["eval_loss"] == pytest.approx(
        summary["eval_loss"]
    )

    from jaxseeker.train.export import export_hf, restore_run

    out = export_hf(tmp_path / "run", tmp_path / "hf")
    hf = transformers.AutoModelForCausalLM.from_pretrained(out)
    tok = transformers.AutoTokenizer.from_pretrained(out)
    assert hf.config.vocab_size == 400 and tok.eos_token == "<|im_end|>"
    capsys.readouterr()
    assert main(["export-hf", "--model", str(tmp_path / "run"), "--out", str(tmp_path / "hf_bf16")]) == 0
    assert capsys.readouterr().out == f"wrote {tmp_path / 'hf_bf16'}\n"
    full, halved = TensorReader(out), TensorReader(tmp_path / "hf_bf16")  # the command's default: bfloat16,
    assert full.names() == halved.names()  # restored as bfloat16 on the host
    for name in full.names():
        assert halved.get(name).dtype == ml_dtypes.bfloat16
        np.testing.assert_array_equal(halved.get(name), full.get(name).astype(ml_dtypes.bfloat16))
    assert (
        main(
            [
                "export-hf",
                "--model",
                str(tmp_path / "run" / "checkpoints"),
                "--out",
                str(tmp_path / "hf_25"),
                "--step",
                "25",
                "--dtype",
                "float32",
            ]
        )
        == 0
    )  # an earlier checkpoint, from the checkpoints folder
    _, _, at_25 = restore_run(tmp_path / "run", step=25)
    np.testing.assert_array_equal(
        TensorReader(tmp_path / "hf_25").get("model.embed_tokens.weight"), np.asarray(at_25["embed"])
    )
    assert not np.array_equal(np.asarray(at_25["embed"]), full.get("model.embed_tokens.weight"))  # trained since


def test_a_run_whose_checkpoints_live_elsewhere_exports_from_its_own_directory(workspace, tmp_path):
    from jaxseeker.train.export import export_hf, run_dir_of

    _, path = workspace
    elsewhere = tmp_path / "bucket" / "checkpoints"  # as `tpu.py launch` puts them in gs://BUCKET/RUN/checkpoints
    run_sft(
        read_recipe(path, [f"train.out_dir={tmp_path / 'run'}", f"train.checkpoint_dir={elsewhere}", "train.steps=2"]),
        progress=False,
    )
    assert not (tmp_path / "run" / "checkpoints").exists() and sorted(p.name for p in elsewhere.iterdir()) == ["2"]
    assert json.loads((tmp_path / "run" / "checkpoints.json").read_text()) == {"directory": str(elsewhere)}
    out = export_hf(tmp_path / "run", tmp_path / "hf")
    assert transformers.AutoModelForCausalLM.from_pretrained(out).config.num_hidden_layers == 2
    with pytest.raises(FileNotFoundError, match="gs://b/run/checkpoints: give the run's directory"):
        run_dir_of("gs://b/run/checkpoints")
    run_sft(read_recipe(path, [f"train.out_dir={tmp_path / 'run'}", "train.steps=2"]), progress=False)
    assert not (tmp_path / "run" / "checkpoints.json").exists()  # back in the run directory: nothing to record


def test_the_summary_counts_trajectories_cut_at_seq_len(workspace, tmp_path):
    root, path = workspace
    for seq_len, cut in ((64, True), (512, False)):
        recipe = read_recipe(
            path,
            [
                f"train.out_dir={tmp_path / str(seq_len)}",
                "train.steps=3",
                f"data.seq_len={seq_len}",
                "train.chunk_size=64",
            ],
        )
        summary = run_sft(recipe, progress=False)
        assert (summary["truncated"] >= 3 * 4) is cut and summary["dropped"] == 0  # rows of 64: each holds a cut one
        assert (summary["truncated"] == 0) is not cut


STEPS = 12  # the interrupted runs' steps: one schedule, so one uninterrupted run is every test's reference


def _sft_argv(config, out_dir, *extra):
    return [
        "sft",
        "--config",
        str(config),
        "--set",
        f"train.out_dir={out_dir}",
        "--set",
        f"train.steps={STEPS}",
        *extra,
    ]


def _losses(out_dir) -> dict[int, float]:
    """The loss of each step a run logged."""
    return {r["step"]: r["loss"] for r in read_metrics(out_dir / "metrics.jsonl") if "loss" in r}


@pytest.fixture(scope="module")
def whole(workspace, tmp_path_factory) -> dict[int, float]:
    """The losses of the uninterrupted run of `STEPS` steps that the interrupted ones must repeat."""
    _, path = workspace
    out = tmp_path_factory.mktemp("whole")
    run_sft(read_recipe(path, [f"train.out_dir={out}", f"train.steps={STEPS}"]), progress=False)
    return _losses(out)


def test_sigkill_then_resume_repeats_the_uninterrupted_losses(workspace, whole, tmp_path, capsys):
    _, path = workspace
    log = tmp_path / "killed.log"
    # The killed run stops for good once it has logged step 6, so the kill lands between the checkpoint of step 5
    # and the end: step 6 has to be trained again.
    killed = launch(_sft_argv(path, tmp_path / "killed"), log, pause_at=6)
    wait_until(paused(log).exists, killed, log, "step 6")
    wait_until(
        (tmp_path / "killed" / "checkpoints" / "5").exists, killed, log, "checkpoint of step 5"
    )  # saved asynchronously: it may still be on its way
    os.kill(killed.pid, signal.SIGKILL)
    assert killed.wait() == -signal.SIGKILL

    assert re.search(r"resumed_from +5\n", run_here(_sft_argv(path, tmp_path / "killed", "--resume"), capsys))

    got = [(r["step"], r["loss"]) for r in read_metrics(tmp_path / "killed" / "metrics.jsonl") if "loss" in r]
    # one row a step: the killed run's row of step 6 was dropped when the resumed run logged it again
    assert [step for step, _ in got] == sorted(whole) == list(range(1, STEPS + 1))
    for step, loss in got:
        assert loss == pytest.approx(whole[step], abs=1e-6), step


def test_sigterm_stops_after_the_step_in_flight_and_says_how_to_go_on(workspace, tmp_path, capsys):
    _, path = workspace
    out, log = tmp_path / "stopped", tmp_path / "stopped.log"
    argv = _sft_argv(path, out)
    stopped = launch(argv, log, pause_at=4)  # waits once step 4 is counted and logged
    wait_until(paused(log).exists, stopped, log, "step 4")
    os.kill(stopped.pid, signal.SIGTERM)  # to the process: whichever of its threads the kernel picks
    assert stopped.wait(timeout=DEADLINE_S) == 143, log.read_text()[-4000:]  # the shell's status for SIGTERM
    resume = " ".join(["jaxseeker", *argv, "--resume"])
    assert (
        f"jaxseeker sft: stopped by SIGTERM after step 4; its checkpoint is saved under {out}; to go on: {resume}"
        in log.read_text()
    )
    # the step counted when the signal came is the one saved, and no later step was trained or logged
    assert sorted(int(p.name) for p in (out / "checkpoints").iterdir()) == [4]  # saved every 5: this one forced
    assert [r["step"] for r in read_metrics(out / "metrics.jsonl") if "loss" in r] == [1, 2, 3, 4]
    assert re.search(r"resumed_from +4\n", run_here([*argv, "--resume"], capsys))
    assert [r["step"] for r in read_metrics(out / "metrics.jsonl") if "loss" in r] == list(range(1, 13))


def test_ctrl_c_saves_the_step_in_flight_and_resume_repeats_the_uninterrupted_losses(
    workspace, whole, tmp_path, capsys, monkeypatch
):
    _, path = workspace
    write = MetricsWriter.write

    def ctrl_c_during_step_3(self, step, metrics, prefix=""):
        write(self, step, metrics, prefix)
        if step == 3:
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(MetricsWriter, "write", ctrl_c_during_step_3)
    argv = _sft_argv(path, tmp_path / "stopped")
    assert main(argv) == 130  # the shell's status for Ctrl-C
    err = capsys.readouterr().err
    assert (
        f"jaxseeker sft: stopped by SIGINT after step 3; its checkpoint is saved under {tmp_path / 'stopped'}; "
        f"to go on: jaxseeker {' '.join(argv)} --resume" in err
    )
    assert sorted(int(p.name) for p in (tmp_path / "stopped" / "checkpoints").iterdir()) == [3]  # saved every 5
    monkeypatch.undo()
    assert main([*argv, "--resume"]) == 0

    got = _losses(tmp_path / "stopped")
    assert sorted(got) == sorted(whole) == list(range(1, STEPS + 1))
    for step in whole:
        assert got[step] == pytest.approx(whole[step], abs=1e-6), step


def test_a_stop_while_a_step_is_queued_saves_that_step_once_computed(workspace, whole, tmp_path, monkeypatch):
    """SIGINT just after step 3 is dispatched (JAX returns before the device computes it): the loop waits for the
    step, counts, logs and saves it, dispatches no step 4, and the run resumed from it repeats the uninterrupted
    losses, so the state saved is the computed one."""
    _, path = workspace
    dispatched = []

    def prepare_stopping_at_the_third_dispatch(recipe, **kwargs):
        run = prepare(recipe, **kwargs)
        step_fn = run.step_fn

        def dispatch(state, batch):
            out = step_fn(state, batch)  # queued: the arrays are futures until read
            dispatched.append(out)
            if len(dispatched) == 3:
                signal.raise_signal(signal.SIGINT)
            return out

        run.step_fn = dispatch
        return run

    monkeypatch.setattr(sft_loop, "prepare", prepare_stopping_at_the_third_dispatch)
    stopped = tmp_path / "stopped"
    with pytest.raises(Interrupted, match="stopped by SIGINT after step 3") as interrupted:
        run_sft(read_recipe(path, [f"train.out_dir={stopped}", f"train.steps={STEPS}"]), progress=False)
    assert interrupted.value.step == 3 and len(dispatched) == 3  # no step after the stop was dispatched
    assert sorted(int(p.name) for p in (stopped / "checkpoints").iterdir()) == [3]
    assert [r["step"] for r in read_metrics(stopped / "metrics.jsonl") if "loss" in r] == [1, 2, 3]
    monkeypatch.undo()
    run_sft(read_recipe(path, [f"train.out_dir={stopped}", f"train.steps={STEPS}"]), resume=True, progress=False)
    got = _losses(stopped)
    assert sorted(got) == sorted(whole) == list(range(1, STEPS + 1))
    for step in whole:
        assert got[step] == pytest.approx(whole[step], abs=1e-6), step


def test_bad_recipe_keys_are_named(workspace):
    _, path = workspace
    with pytest.raises(
        RecipeError,
        match=r"train: unknown keys \['stepz'\] \(did you mean 'steps'\?\); known keys: "
        r"\[.*'steps'",
    ):
        run_sft(read_recipe(path, ["train.stepz=3"]), progress=False)
    with pytest.raises(RecipeError, match=r"unknown sections \['optimiser'\]"):
        run_sft(read_recipe(path, ["optimiser.lr=1"]), progress=False)
    with pytest.raises(RecipeError, match="expected key=value"):
        read_recipe(path, ["optimizer.lr"])


def test_held_out_trajectories_are_scored_as_they_are(workspace, tmp_path):
    root, path = workspace
    pool = tmp_path / "pool.tsv"
    pool.write_text("".join(f"item\titem {i}\n" for i in range(24)))
    recipe = read_recipe(
        path,
        [
            f"train.out_dir={tmp_path / 'run'}",
            f"data.name_pool={pool}",
            "data.permute_digits=true",
            "data.copy_rate=0.5",
        ],
    )
    run = prepare(recipe)
    texts = [
        run.tokenizer.decode(b["tokens"][row][b["segment_ids"][row] != 0])
        for b in run.eval_batches
        for row in range(len(b["tokens"]))
    ]
    # trained draws rename the searched items and relabel the digits; the held-out ones (eval_fraction 0.2: the
    # last 4 of 24) are scored as written, and hold no copy examples
    assert len(texts) == 4
    for i, text in zip(range(20, 24), texts):
        assert f"Where is item {i}?" in text and f'"query": "item {i}"' in text
