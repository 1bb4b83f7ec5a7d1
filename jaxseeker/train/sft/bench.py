"""`jaxseeker bench sft`: jaxseeker SFT vs transformers + PyTorch on the same trajectories, in one run.

Both train the same model shape (`SHAPES`: the default ≈40M Qwen2, or SmolLM2-135M's Llama; random weights) with
AdamW on the same variable-length agent trajectories for one pass: full fine-tuning on both sides, then LoRA
adapters on every attention and MLP matrix (jaxseeker's `model.lora`, and PEFT's on the HF side when peft is
installed). jaxseeker packs them into fixed rows (segment-masked attention computed tile by tile, skipping
the masked tiles; a loss that builds logits for the trained tokens only) and, on CPU, compiles the step with
its dots through YNNPACK; the HF side pads each batch to its longest example, as its data collator does.
The figure of merit is useful tokens/s: tokens that carry loss (the agent's own tokens), per wall second,
compile excluded.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import random
import time
from typing import Any

import jax
import numpy as np

from jaxseeker import model
from jaxseeker.data import pack_examples, tokenize_chat, train_tokenizer
from jaxseeker.model.flops import flops_per_token, matmul_ceiling
from jaxseeker.parallel import MeshConfig, batch_sharding, make_mesh, param_shardings
from jaxseeker.train.optimizer import OptimizerConfig, make_optimizer
from jaxseeker.train.sft.bench_hf import bench_hf, peft_installed
from jaxseeker.train.sft.step import make_sft_step, sft_loss, with_base
from jaxseeker.train.state import create_train_state

SHAPES = {
    "qwen2-40m": dict(
        model_type="qwen2",
        vocab_size=16000,
        hidden_size=512,
        intermediate_size=1408,
        num_layers=8,
        num_heads=8,
        num_kv_heads=4,
        head_dim=64,
        qkv_bias=True,
        qk_norm=False,
        tie_word_embeddings=False,
    ),
    "smollm2-135m": dict(  # SmolLM2-135M-Instruct's shape (the demo's policy)
        model_type="llama",
        vocab_size=49152,
        hidden_size=576,
        intermediate_size=1536,
        num_layers=30,
        num_heads=9,
        num_kv_heads=3,
        head_dim=64,
        qk_norm=False,
        tie_word_embeddings=True,
        rope_theta=100000.0,
        rms_norm_eps=1e-5,
    ),
}
# XLA:CPU: run the dots through YNNPACK (≈15% faster SFT steps here, jax 0.10); other backends ignore it.
YNN_DOT = {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_DOT"}
_WORDS = (
    "river city museum capital founded population search visit page answer born died wrote painter novel "
    "bridge tower station university according result query first second which who when where"
).split()


class TooFewSteps(ValueError):
    """The packed rows make fewer than two steps of `rows`: one to compile, at least one to time."""


def synthetic_trajectories(n: int, seed: int = 0) -> list[list[dict]]:
    """`n` agent conversations of 1–6 tool rounds with observations of varied length (real chatml shape)."""
    rng = random.Random(seed)

    def words(k):
        return " ".join(rng.choice(_WORDS) for _ in range(k))

    out = []
    for i in range(n):
        msgs = [
            {"role": "system", "content": "You are a deep search agent."},
            {"role": "user", "content": f"Question {i}: {words(rng.randint(10, 30))}?"},
        ]
        for _ in range(rng.randint(1, 6)):
            msgs.append(
                {
                    "role": "assistant",
                    "content": f"<think>{words(rng.randint(10, 60))}</think>\n"
                    f'<tool_call>{{"name": "search", "arguments": {{"query": "{words(4)}"}}}}</tool_call>',
                }
            )
            msgs.append(
                {"role": "user", "content": f"<tool_response>\n{words(rng.randint(20, 250))}\n</tool_response>"}
            )
        msgs.append(
            {"role": "assistant", "content": f"<think>{words(rng.randint(5, 30))}</think>\n<answer>{words(2)}</answer>"}
        )
        out.append(msgs)
    return out


def cpu_threads() -> int:
    """CPUs this process may run on (what XLA's CPU client sizes its thread pool by)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def compile_sft_step(
    cfg: model.ModelConfig,
    optimizer,
    loss_fn,
    state,
    batch: dict,
    *,
    mesh,
    state_shardings,
    batch_sharding,
    compiler_options: dict | None,
    lora: model.LoraConfig | None = None,
    base: Any = None,
) -> tuple:
    """The SFT step compiled ahead of time for `batch`'s shapes, and the XLA options it was compiled with. With
    `lora`, the step of adapters (`state.params`) on the frozen `base`, called `step(state, batch, base)`.

    An XLA that rejects `compiler_options` (an older or newer jaxlib without that option) gets a printed
    note and a compile without them.
    """
    args = (state, batch) if lora is None else (state, batch, base)
    base_shardings = None if lora is None else param_shardings(cfg, mesh)

    def compile_with(options):
        step = make_sft_step(
            cfg,
            optimizer,
            loss_fn,
            mesh=mesh,
            state_shardings=state_shardings,
            batch_sharding=batch_sharding,
            compiler_options=options or None,
            lora=lora,
            base_shardings=base_shardings,
        )
        return step.lower(*args).compile()

    try:
        return compile_with(compiler_options), dict(compiler_options or {})
    except RuntimeError as e:  # jax.errors.JaxRuntimeError: INVALID_ARGUMENT, no such option or value
        if not compiler_options:
            raise
        print(
            f"note: this XLA rejects compiler options {compiler_options} ({str(e).splitlines()[0]}); "
            "compiling without them"
        )
        return compile_with(None), {}


def bench_jax(
    examples: list[tuple[np.ndarray, np.ndarray]],
    cfg: model.ModelConfig,
    *,
    seq_len: int,
    rows: int,
    num_bins: int = 64,
    chunk_size: int = 256,
    compiler_options: dict | None = None,
    lora: model.LoraConfig | None = None,
) -> dict:
    """One pass of packed SFT with jaxseeker: useful tokens/s and time per step.

    num_bins: open rows of the first-fit packer. chunk_size: positions per row whose logits the loss builds
    at once. compiler_options: XLA options for the step (dropped, with a note, if this XLA rejects them).
    lora: train these adapters on frozen random weights instead of all the weights.
    """
    packed = pack_examples(examples, seq_len=seq_len, over_length="truncate", num_bins=num_bins)
    keys = ("tokens", "targets", "loss_mask", "segment_ids", "positions")
    n_batches = len(packed["tokens"]) // rows
    if n_batches < 2:
        raise TooFewSteps(
            f"{len(packed['tokens'])} packed rows of --seq-len {seq_len} make {n_batches} step(s) of "
            f"--rows {rows}; need 2 (one to compile, one to time): lower --seq-len or --rows, or "
            "raise --trajectories"
        )
    batches = [{k: packed[k][i * rows : (i + 1) * rows] for k in keys} for i in range(n_batches)]
    mesh = make_mesh(MeshConfig(fsdp=1), jax.devices()[:1])
    optimizer = make_optimizer(OptimizerConfig(lr=1e-4, warmup_steps=0, total_steps=1000, clip_norm=1.0))
    base = None
    if lora is None:
        init, axes = functools.partial(model.init_params, cfg), model.param_axes(cfg)
    else:
        init, axes = functools.partial(model.init_lora, cfg, lora), model.lora_axes(cfg, lora)
        base = jax.device_put(model.init_params(cfg, jax.random.PRNGKey(1)), param_shardings(cfg, mesh))
    state, shardings = create_train_state(init, axes, optimizer, 0, mesh)
    bsh = batch_sharding(mesh, (rows, seq_len))
    t = time.perf_counter()
    step, options = compile_sft_step(
        cfg,
        optimizer,
        functools.partial(sft_loss, chunk_size=chunk_size),
        state,
        batches[0],
        mesh=mesh,
        state_shardings=shardings,
        batch_sharding=bsh,
        compiler_options=compiler_options,
        lora=lora,
        base=base,
    )
    if lora is not None:
        step = with_base(step, base)
    state, m = step(state, batches[0])
    jax.block_until_ready(m)
    compile_s = time.perf_counter() - t
    t = time.perf_counter()
    for b in batches[1:]:
        state, m = step(state, b)
    jax.block_until_ready(m)
    wall = time.perf_counter() - t
    useful = sum(int(b["loss_mask"].sum()) for b in batches[1:])
    total = sum(int((b["segment_ids"] != 0).sum()) for b in batches[1:])
    return {
        "useful_tok_s": useful / wall,
        "step_s": wall / (len(batches) - 1),
        "compile_s": compile_s,
        "steps": len(batches) - 1,
        "fill": total / ((len(batches) - 1) * rows * seq_len),
        "tokens": total,
        "compiler_options": options,
        "loss": float(m["loss"]),
    }


def run_bench(
    n_trajectories: int = 96,
    seq_len: int = 2048,
    rows: int = 4,
    hf_batch: int = 8,
    attention: str = "blocked",
    num_bins: int = 64,
    chunk_size: int = 256,
    ynn: bool = True,
    shape: str | model.ModelConfig = "qwen2-40m",
    lora_rank: int = 16,
    lora_alpha: float = 32.0,
) -> dict:
    """Every side on the same trajectories; prints a table and returns the figures.

    attention: the jaxseeker `attention_impl`; num_bins, chunk_size: see `bench_jax`; ynn: compile the
    step with `YNN_DOT`. shape: a key of `SHAPES` or a ModelConfig (its vocabulary must hold the 2,000-token
    tokenizer's ids). lora_rank, lora_alpha: the LoRA rows' adapters on every attention and MLP matrix (rank 0: no
    LoRA rows); PEFT's row only when peft is installed. PyTorch gets as many intra-op threads as XLA's CPU client uses.
    """
    import torch

    convs = synthetic_trajectories(n_trajectories)
    tok = train_tokenizer([m["content"] for c in convs[:40] for m in c], 2000)
    examples = [tokenize_chat(c, tok) for c in convs]
    base_cfg = shape if isinstance(shape, model.ModelConfig) else model.ModelConfig(**SHAPES[shape])
    cfg = dataclasses.replace(base_cfg, attention_impl=attention)
    lora = model.LoraConfig(rank=lora_rank, alpha=lora_alpha) if lora_rank else None
    threads = cpu_threads()
    ceiling = matmul_ceiling()
    jax_run = functools.partial(
        bench_jax,
        examples,
        cfg,
        seq_len=seq_len,
        rows=rows,
        num_bins=num_bins,
        chunk_size=chunk_size,
        compiler_options=YNN_DOT if ynn else None,
    )
    ours = jax_run()
    ours_lora = jax_run(lora=lora) if lora else None
    torch.set_num_threads(threads)
    theirs = bench_hf(examples, cfg, batch=hf_batch, max_len=seq_len)
    theirs_lora = (
        bench_hf(examples, cfg, batch=hf_batch, max_len=seq_len, lora=lora) if lora and peft_installed() else None
    )
    mean_len = float(np.mean([len(e[0]) for e in examples]))
    flops_tok = flops_per_token(cfg, int(mean_len / 2), training=True)
    trained = float(np.mean([e[1].mean() for e in examples]))
    mfu = ours["useful_tok_s"] / trained * flops_tok / ceiling
    result = {
        "jaxseeker": ours,
        "jaxseeker_lora": ours_lora,
        "hf_torch": theirs,
        "hf_peft_lora": theirs_lora,
        "ratio": ours["useful_tok_s"] / theirs["useful_tok_s"],
        "matmul_ceiling_gflops": ceiling / 1e9,
        "jaxseeker_mfu": mfu,
        "mean_example_tokens": mean_len,
        "trained_fraction": trained,
        "parameters": model.count_params(cfg),
        "threads": threads,
    }
    if ours_lora:
        result["lora_ratio_vs_full"] = ours_lora["useful_tok_s"] / ours["useful_tok_s"]
    if ours_lora and theirs_lora:
        result["lora_ratio"] = ours_lora["useful_tok_s"] / theirs_lora["useful_tok_s"]
    name = shape if isinstance(shape, str) else cfg.model_type
    xla = ", ".join(f"{k}={v}" for k, v in ours["compiler_options"].items()) or "none"
    print(
        f"\nbench sft: {model.count_params(cfg) / 1e6:.1f}M-param {name} shape, {len(examples)} trajectories "
        f"(mean {mean_len:.0f} tokens, {trained:.0%} trained), f32, {jax.devices()[0].platform}, {threads} threads each"
    )
    print(f"{'':<18}{'useful tok/s':>14}{'s/step':>10}{'steps':>7}")

    def row(label: str, r: dict, note: str) -> None:
        print(f"{label:<18}{r['useful_tok_s']:>14.1f}{r['step_s']:>10.2f}{r['steps']:>7}   {note}")

    row(
        "jaxseeker",
        ours,
        f"(packed {rows}×{seq_len} from {num_bins} open rows, fill {ours['fill']:.0%}, "
        f"compile {ours['compile_s']:.1f} s)",
    )
    if ours_lora:
        row(
            "jaxseeker LoRA",
            ours_lora,
            f"(rank {lora.rank}, alpha {lora.alpha:g}, all attention and MLP matrices; "
            f"compile {ours_lora['compile_s']:.1f} s)",
        )
    row("HF+torch", theirs, f"(padded batches of {hf_batch}, sdpa attention)")
    if theirs_lora:
        row("HF+torch PEFT LoRA", theirs_lora, "(peft LoraConfig of the same rank, alpha and targets)")
    elif lora:
        print("HF+torch PEFT LoRA: skipped (peft is not installed)")
    print(f"ratio {result['ratio']:.2f}×   matmul ceiling {ceiling / 1e9:.0f} GFLOP/s   jaxseeker MFU {mfu:.1%}")
    if ours_lora:
        against = f", vs PEFT LoRA {result['lora_ratio']:.2f}×" if theirs_lora else ""
        print(f"ratio LoRA: jaxseeker LoRA vs jaxseeker full {result['lora_ratio_vs_full']:.2f}×{against}")
    print(f"jaxseeker options: attention_impl={attention}, loss chunk {chunk_size}, XLA options: {xla}")
    return result
