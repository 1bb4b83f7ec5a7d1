"""The SFT loop behind `jaxseeker sft`: data → sharded masked-NLL steps → metrics, evals, checkpoints, resume."""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from tqdm import tqdm

from jaxseeker import model
from jaxseeker.data import DataConfig, batch_iterator, open_source, place_on_mesh
from jaxseeker.parallel import batch_sharding, is_main_process, process_info
from jaxseeker.resolve import resolve_function
from jaxseeker.train.checkpoint import Checkpointer
from jaxseeker.train.export import write_run_files
from jaxseeker.train.interrupt import Interrupted, stop_requests
from jaxseeker.train.metrics import MetricsWriter, plot_curves, read_metrics
from jaxseeker.train.optimizer import OptimizerConfig, learning_rate_at, make_optimizer
from jaxseeker.train.policy import build_policy
from jaxseeker.train.recipe import RecipeError, build, check_sections
from jaxseeker.train.sft.step import (
    LossFn,
    make_sft_step,
    mesh_attention_kernel,
    policy_params,
    sft_loss,
    takes_keyword,
    with_attention_kernel,
    with_base,
)

SECTIONS = ("name", "target", "model", "data", "optimizer", "mesh", "rules", "train")  # target: `planning.targets`


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """The loop around the step. Paths are relative to the working directory."""

    train_files: tuple[str, ...] = ()  # trajectory JSONL files or ArrayRecord directories
    eval_files: tuple[str, ...] = ()  # held-out trajectories for the eval loss
    eval_fraction: float = 0.0  # held out from the end of train_files when eval_files is empty
    tokenizer: str | None = None  # directory; default: model.hf_path
    steps: int = 100  # optimizer updates
    seed: int = 0  # the initialisation's seed (a model without a checkpoint)
    out_dir: str | None = None  # default: runs/<recipe name>
    checkpoint_dir: str | None = None  # local or gs://…; default: <out_dir>/checkpoints
    log_every: int = 10  # steps between metric lines
    eval_every: int = 0  # 0: only at the end
    eval_batches: int = 4  # held-out batches per eval
    checkpoint_every: int = 50  # steps between checkpoints
    keep: int = 3  # checkpoints kept
    loss: str = "sft_loss"  # or "package.module:function": (params, batch, cfg) -> (loss, aux), as sft_loss
    chunk_size: int = 512  # positions whose logits the loss builds at once (never [batch, seq, vocab])
    # XLA options for compiling the step, e.g. {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_DOT"}
    # (XLA:CPU dots through YNNPACK; see `jaxseeker bench sft`). An option this XLA lacks fails the first step.
    compiler_options: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "train_files", tuple(self.train_files))
        object.__setattr__(self, "eval_files", tuple(self.eval_files))
        if self.steps < 1 or self.log_every < 1 or self.checkpoint_every < 1:
            raise ValueError("steps, log_every and checkpoint_every must be >= 1")
        if not 0 <= self.eval_fraction < 1:
            raise ValueError(f"eval_fraction={self.eval_fraction} must be in [0, 1)")


def resolve_loss(name: str, chunk_size: int) -> LossFn:
    """The loss function a recipe names, "sft_loss" or "package.module:function" taking `(params, batch, cfg)`
    (`step.LossFn`), with `chunk_size` bound when the function takes that keyword."""
    try:
        fn = resolve_function(name, {"sft_loss": sft_loss}, "loss")
    except ValueError as e:
        raise RecipeError(f"train.loss={name!r}: {e}") from None
    if takes_keyword(fn, "chunk_size"):
        return functools.partial(fn, chunk_size=chunk_size)
    return fn


@dataclasses.dataclass(kw_only=True)
class SFTRun:
    """Everything a run needs, built from a recipe (see `prepare`); fields by keyword only."""

    recipe: dict
    out_dir: Path
    cfg: model.ModelConfig
    train: TrainConfig
    data: DataConfig
    optimizer_cfg: OptimizerConfig
    tokenizer: Any
    state: Any
    step_fn: Callable
    batch_sharding: Any
    iterator: Any
    eval_batches: list[dict]
    checkpointer: Checkpointer
    start_step: int
    eval_fn: Callable  # (params, batch) -> (mean held-out loss, trained tokens) with the training loss, jitted
    base: Any = None  # with LoRA, the frozen params the adapters (state.params) train on


def prepare(recipe: dict, *, resume: bool = False) -> SFTRun:
    """Build mesh, model, optimizer, sharded state, data iterators and the step; restore on `resume`."""
    check_sections(recipe, SECTIONS, "recipe")
    train = build(TrainConfig, recipe.get("train"), "train")
    if not train.train_files:
        raise RecipeError("train.train_files: give at least one JSONL file or ArrayRecord directory")
    data = build(DataConfig, recipe.get("data"), "data")
    opt_values = {"total_steps": train.steps, **(recipe.get("optimizer") or {})}
    opt_cfg = build(OptimizerConfig, opt_values, "optimizer")
    out_dir = Path(train.out_dir or f"runs/{recipe['name']}")
    optimizer = make_optimizer(opt_cfg)
    policy = build_policy(recipe, optimizer, tokenizer=train.tokenizer, seed=train.seed, where="train.tokenizer")
    cfg, tokenizer, mesh, rules = policy.cfg, policy.tokenizer, policy.mesh, policy.rules
    state, shardings = policy.state, policy.shardings
    bounds = {"max_line_bytes": data.max_line_bytes, "max_messages": data.max_messages}
    records = open_source(list(train.train_files), skip_bad_lines=data.skip_bad_lines, **bounds)
    if train.eval_files:
        held_out = open_source(list(train.eval_files), skip_bad_lines=data.skip_bad_lines, **bounds)
    else:
        n_eval = int(len(records) * train.eval_fraction)
        records, held_out = records[: len(records) - n_eval], records[len(records) - n_eval :]
    info = process_info()
    iterator = batch_iterator(
        records, tokenizer, data, process_index=info["process_index"], process_count=info["process_count"]
    )
    eval_batches = []
    if len(held_out):
        # the held-out trajectories as they are: no copy examples, names and digits not renamed
        eval_cfg = dataclasses.replace(
            data, shuffle=False, num_epochs=1, copy_rate=0.0, permute_digits=False, name_pool=""
        )
        eval_iter = batch_iterator(
            held_out, tokenizer, eval_cfg, process_index=info["process_index"], process_count=info["process_count"]
        )
        eval_batches = [b for _, b in zip(range(train.eval_batches), eval_iter)]
        if info["process_count"] > 1:  # the eval step is collective: every process runs as many as the fewest has
            fewest = int(np.min(multihost_utils.process_allgather(np.asarray([len(eval_batches)]))))
            eval_batches = eval_batches[:fewest]
    ckpt = Checkpointer(
        train.checkpoint_dir or out_dir / "checkpoints", save_every=train.checkpoint_every, keep=train.keep
    )
    start = 0
    if resume and ckpt.latest_step() is not None:
        restored = ckpt.restore(state)  # onto the fresh state's shapes and shardings (the adapters' with LoRA)
        state, start = restored.state, restored.step
        iterator.set_state(restored.data_state["iterator"])
    bsh = batch_sharding(mesh, (data.batch_size, data.seq_len), rules)
    loss_fn = resolve_loss(train.loss, train.chunk_size)
    step_fn = make_sft_step(
        cfg,
        optimizer,
        loss_fn,
        mesh=mesh,
        state_shardings=shardings,
        batch_sharding=bsh,
        rules=rules,
        learning_rate=functools.partial(learning_rate_at, opt_cfg),
        compiler_options=dict(train.compiler_options) or None,
        lora=policy.lora,
        base_shardings=policy.base_shardings,
    )
    if policy.lora is not None:
        step_fn = with_base(step_fn, policy.base)
    eval_loss = with_attention_kernel(loss_fn, mesh_attention_kernel(cfg, mesh, rules))

    def held_out_loss(base: Any, params: Any, batch: dict) -> tuple[jax.Array, jax.Array]:
        params = policy_params(params, base, policy.lora)
        return eval_loss(params, batch, cfg)[0], jnp.sum(batch["loss_mask"])  # tokens of the global batch

    eval_fn = functools.partial(jax.jit(held_out_loss), policy.base)
    if is_main_process():
        write_run_files(
            out_dir,
            cfg,
            tokenizer,
            train.checkpoint_dir or out_dir / "checkpoints",
            lora=policy.lora,
            base=(recipe.get("model") or {}).get("hf_path"),
        )
    return SFTRun(
        recipe=recipe,
        out_dir=out_dir,
        cfg=cfg,
        train=train,
        data=data,
        optimizer_cfg=opt_cfg,
        tokenizer=tokenizer,
        state=state,
        step_fn=step_fn,
        batch_sharding=bsh,
        iterator=iterator,
        eval_batches=eval_batches,
        checkpointer=ckpt,
        start_step=start,
        eval_fn=eval_fn,
        base=policy.base,
    )


def evaluate(run: SFTRun, params: Any) -> dict[str, float]:
    """Mean loss over the held-out batches (token-weighted), with the training loss function."""
    if not run.eval_batches:
        return {}
    total, tokens = 0.0, 0
    for batch in run.eval_batches:
        loss, n = run.eval_fn(params, place_on_mesh(batch, run.batch_sharding))
        total, tokens = total + float(loss) * int(n), tokens + int(n)
    return {"eval_loss": total / max(tokens, 1)}


def run_sft(recipe: dict, *, resume: bool = False, progress: bool = True) -> dict:
    """Train to `train.steps`, checkpointing on the way; returns the summary (also `summary.json`). A single-process
    run stopped by Ctrl-C or SIGTERM saves the step it was on and raises `Interrupted` (`train.interrupt`)."""
    run = prepare(recipe, resume=resume)
    main = is_main_process()
    writer = MetricsWriter(run.out_dir, enabled=main, resumed_from=run.start_step)
    state, t_start, tokens_seen, last = run.state, time.perf_counter(), 0, {}
    bar = tqdm(initial=run.start_step, total=run.train.steps, desc="sft", disable=not (progress and main))
    window_t, window_tokens = time.perf_counter(), 0
    over_length = np.zeros(2, np.int64)  # examples cut at / dropped for data.seq_len, this process's rows
    with stop_requests(enabled=process_info()["process_count"] == 1) as stop:
        for step in range(run.start_step, run.train.steps):
            batch = next(run.iterator)
            over_length += [int(np.sum(batch["num_truncated"])), int(np.sum(batch["num_dropped"]))]
            state, metrics = run.step_fn(state, place_on_mesh(batch, run.batch_sharding))
            # Wait for the step before counting it: a step is done once computed, not once dispatched, so a stop
            # waits for this step alone (dispatch would run ahead by many) and the throughput is of computed steps.
            metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
            window_tokens += int(metrics["n_tokens"])  # trained tokens of the global batch
            done = step + 1
            bar.update(1)
            if done % run.train.log_every == 0 or done == run.train.steps:
                now = time.perf_counter()
                last = metrics | {"tokens_per_s": window_tokens / (now - window_t)}
                tokens_seen += window_tokens
                window_t, window_tokens = now, 0
                writer.write(done, last)
                bar.set_postfix(
                    loss=f"{last['loss']:.4f}", lr=f"{last.get('lr', 0):.2e}", tok_s=f"{last['tokens_per_s']:.0f}"
                )
            if run.train.eval_every and done % run.train.eval_every == 0 and done != run.train.steps:
                writer.write(done, evaluate(run, state.params))
            stopping = stop.signal_name is not None and done < run.train.steps  # Ctrl-C or SIGTERM came
            run.checkpointer.save(
                done,
                state,
                data_state={"iterator": run.iterator.get_state()},
                config=run.recipe,
                force=done == run.train.steps or stopping,
            )
            preempted = done < run.train.steps and run.checkpointer.preempted(done)  # all hosts saved this step
            if stopping or preempted:
                run.checkpointer.close()  # waits for the save
                writer.close()
                raise Interrupted(stop.signal_name or "SIGTERM", done, run.out_dir)
    bar.close()
    run.checkpointer.close()
    if process_info()["process_count"] > 1:
        over_length = np.sum(multihost_utils.process_allgather(over_length), axis=0)
    final_eval = evaluate(run, state.params)
    writer.write(run.train.steps, final_eval)
    writer.close()
    if not last:  # resumed at or past the last log: the loss logged then
        last = next((r for r in reversed(read_metrics(run.out_dir / "metrics.jsonl")) if "loss" in r), {})
    summary = {
        "name": run.recipe["name"],
        "steps": run.train.steps,
        "resumed_from": run.start_step,
        "final_loss": last.get("loss"),
        **final_eval,
        "trained_tokens": tokens_seen,
        "truncated": int(over_length[0]),
        "dropped": int(over_length[1]),  # since this run's start
        "wall_s": round(time.perf_counter() - t_start, 2),
        "parameters": model.count_params(run.cfg),
        "trained_parameters": sum(x.size for x in jax.tree.leaves(state.params)),  # the adapters' with LoRA
        "out_dir": str(run.out_dir),
    }
    if main:
        rows = read_metrics(run.out_dir / "metrics.jsonl")
        plot_curves(rows, ["loss", "eval_loss", "lr"], run.out_dir / "sft_loss.png", title=run.recipe["name"])
        (run.out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary
