"""Greedy generation throughput: our engine against Hugging Face `generate` on the same weights, in one run.

The weights are a random Qwen2 model of a given shape, or a real checkpoint (`model_dir`: an HF directory, a GGUF
file or a registered name such as "smollm2-135m-instruct"), loaded by both sides from the same files."""

from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path

import numpy as np


@dataclasses.dataclass(frozen=True)
class BenchShape:
    """The benchmarked model (Qwen2-shaped, ≈40M parameters by default), workload and repetitions."""

    hidden_size: int = 512
    num_layers: int = 8
    num_heads: int = 8
    num_kv_heads: int = 4
    intermediate_size: int = 1408
    vocab_size: int = 16000
    batch: int = 16
    group_size: int = 1  # rows a prompt (an RL step's group of rollouts): batch / group_size distinct prompts
    prompt_len: int = 64
    new_tokens: int = 128
    steps_per_call: int = 16
    repeats: int = 2  # timed runs of each side, interleaved; the best is reported
    seed: int = 0


def _hf_model(shape: BenchShape):
    """A random HF Qwen2 model of `shape` in float32 (eager attention, eval mode)."""
    import torch
    import transformers

    torch.manual_seed(shape.seed)
    config = transformers.Qwen2Config(
        vocab_size=shape.vocab_size,
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.num_layers,
        num_attention_heads=shape.num_heads,
        num_key_value_heads=shape.num_kv_heads,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=0,
    )
    return transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()


def hf_pretrained(model_dir: Path):
    """The HF model in `model_dir` in float32 (eager attention, eval mode)."""
    import torch
    import transformers

    return transformers.AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=torch.float32, attn_implementation="eager"
    ).eval()


def _hf_generate(hf, prompts: np.ndarray, new_tokens: int) -> np.ndarray:
    """Greedy HF `generate` of exactly `new_tokens` tokens → `[batch, new_tokens]`."""
    import torch

    with torch.no_grad():
        out = hf.generate(
            torch.tensor(prompts),
            attention_mask=torch.ones(prompts.shape, dtype=torch.long),
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=False,
            pad_token_id=0,
        )
    return out[:, prompts.shape[1] :].numpy()


def _engine_generate(
    params,
    cfg,
    prompts: np.ndarray,
    new_tokens: int,
    steps_per_call: int,
    share_prefix: int = 16,
    host: list[tuple[float, int]] | None = None,
) -> np.ndarray:
    """Greedy generation of every prompt at once on a fresh engine (cache exactly prompt + new tokens); rows with
    the same prompt copy it from the first one's cache row unless `share_prefix` is 0. Appends the engine's host
    seconds and decode calls to `host`."""
    from jaxseeker.generation.engine import Engine

    engine = Engine(
        params,
        cfg,
        slots=prompts.shape[0],
        max_len=prompts.shape[1] + new_tokens,
        steps_per_call=steps_per_call,
        prefill_chunk=prompts.shape[1],
        share_prefix=share_prefix,
    )
    for i, prompt in enumerate(prompts):
        engine.submit(str(i), prompt.tolist(), max_new_tokens=new_tokens)
    out: dict[str, list[int]] = {}
    while engine.has_work():
        for event in engine.step():
            out[event.request_id] = event.tokens
    if host is not None:
        host.append((engine.host_s, engine.decode_calls))
    return np.array([out[str(i)] for i in range(prompts.shape[0])])


def compiled_programs() -> int:
    """Programs the engine's device steps have compiled in this process (decode and prefill shapes)."""
    from jaxseeker.generation import steps

    return steps.decode._cache_size() + steps.prefill._cache_size()


def _timed(fn, *args) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - start, result


def run_generate_bench(shape: BenchShape = BenchShape(), model_dir: Path | None = None) -> dict:
    """Time HF `generate` and our engine on identical weights (random of `shape`, or `model_dir`'s) and prompts.

    After a warm-up of each (ours compiles there), the two run `repeats` times in turn and the best time of
    each counts (the machine may be shared). Returns tokens/s of both, their ratio, our compile overhead and host
    time (the wall of `Engine.step` not spent waiting for the device, and the decode calls), the
    fraction of rows whose greedy tokens agree exactly, and the workload's roofline (`generation.roofline`, the
    machine's ceilings measured before and after the timed runs, the best kept) with each side's fraction of it.
    With `group_size` > 1 our engine also runs without sharing the group's prompt (`unshared_s`), so the copy's gain
    is measured in the same run.
    """
    import torch

    from jaxseeker import model
    from jaxseeker.generation import roofline

    if model_dir is not None:
        hf = hf_pretrained(model_dir)
        cfg, params = model.load_hf(model_dir)
    else:
        hf = _hf_model(shape)
        with tempfile.TemporaryDirectory() as tmp:
            hf.save_pretrained(tmp)
            cfg, params = model.load_hf(tmp)
    distinct = np.random.default_rng(shape.seed).integers(
        1, cfg.vocab_size, (shape.batch // shape.group_size, shape.prompt_len)
    )
    prompts = np.repeat(distinct, shape.group_size, axis=0)  # [batch, prompt_len], a group's rows side by side
    n = shape.new_tokens
    grouped = shape.group_size > 1
    _hf_generate(hf, prompts, 4)
    ceilings = [roofline.measure()]
    first_s, _ = _timed(_engine_generate, params, cfg, prompts, n, shape.steps_per_call)
    if grouped:
        _engine_generate(params, cfg, prompts, n, shape.steps_per_call, 0)  # compiles its prefill shape
    hf_times, our_times, unshared_times, host = [], [], [], []
    for _ in range(max(shape.repeats, 1)):
        hf_s, hf_tokens = _timed(_hf_generate, hf, prompts, n)
        ours_s, our_tokens = _timed(_engine_generate, params, cfg, prompts, n, shape.steps_per_call, 16, host)
        hf_times.append(hf_s)
        our_times.append(ours_s)
        if grouped:
            unshared_times.append(_timed(_engine_generate, params, cfg, prompts, n, shape.steps_per_call, 0)[0])
    hf_s, ours_s = min(hf_times), min(our_times)
    host_s, calls = host[our_times.index(ours_s)]  # the best run's
    ceilings.append(roofline.measure())
    flops_s, bytes_s = (max(c[i] for c in ceilings) for i in (0, 1))  # the machine's best, measured in this run
    work = roofline.generate_workload(
        cfg, rows=shape.batch, prompt_len=shape.prompt_len, new_tokens=n, distinct_prompts=len(distinct)
    )
    roof_s = work.seconds(flops_s, bytes_s)
    generated = shape.batch * n
    shared = {"unshared_s": min(unshared_times), "unshared_runs_s": unshared_times} if grouped else {}
    return {
        "model": str(model_dir) if model_dir is not None else "random",
        "hidden_size": cfg.hidden_size,
        "num_layers": cfg.num_layers,
        "vocab_size": cfg.vocab_size,
        "params_M": model.count_params(cfg) / 1e6,
        "torch_threads": torch.get_num_threads(),
        "generated_tokens": generated,
        "hf_s": hf_s,
        "hf_tok_s": generated / hf_s,
        "ours_s": ours_s,
        "ours_tok_s": generated / ours_s,
        "speedup": hf_s / ours_s,
        "ours_compile_s": first_s - ours_s,
        "ours_host_s": host_s,
        "ours_decode_calls": calls,
        "hf_runs_s": hf_times,
        "ours_runs_s": our_times,
        "rows_equal": float(np.mean(np.all(hf_tokens == our_tokens, axis=1))),
        "matmul_gflop_s": flops_s / 1e9,
        "bandwidth_gb_s": bytes_s / 1e9,
        "roofline_s": roof_s,
        "ours_of_roofline": roof_s / ours_s,
        "hf_of_roofline": roof_s / hf_s,
        "compiled_programs": compiled_programs(),
        **shared,
    }


def format_table(shape: BenchShape, result: dict) -> str:
    """The benchmark result as a small text table."""
    gen = result["generated_tokens"]
    lines = [
        (
            f"greedy generation, batch {shape.batch} ({shape.group_size} a prompt), prompt {shape.prompt_len}, "
            f"+{shape.new_tokens} tokens, f32, "
            f"{result['params_M']:.1f}M params ({result['model']}: hidden {result['hidden_size']}, "
            f"{result['num_layers']} layers, vocab {result['vocab_size']}), steps/call {shape.steps_per_call}, "
            f"torch threads {result['torch_threads']}"
        ),
        f"{'best of ' + str(len(result['hf_runs_s'])):<22}{'seconds':>10}{'tokens/s':>12}",
        f"{'HF generate (torch)':<22}{result['hf_s']:>10.2f}{result['hf_tok_s']:>12.0f}",
        f"{'jaxseeker Engine':<22}{result['ours_s']:>10.2f}{result['ours_tok_s']:>12.0f}",
        *(
            [f"{'Engine, no sharing':<22}{result['unshared_s']:>10.2f}{gen / result['unshared_s']:>12.0f}"]
            if "unshared_s" in result
            else []
        ),
        f"{'roofline':<22}{result['roofline_s']:>10.2f}{gen / result['roofline_s']:>12.0f}",
        f"speedup ours / HF: {result['speedup']:.2f}x (the roofline is {result['hf_s'] / result['roofline_s']:.2f}x)",
        f"fraction of the roofline: ours {result['ours_of_roofline']:.0%}, HF {result['hf_of_roofline']:.0%} "
        f"(FLOPs at {result['matmul_gflop_s']:.0f} GFLOP/s + weights and KV read at {result['bandwidth_gb_s']:.1f} "
        "GB/s, both measured in this run)",
        f"engine programs compiled: {result['compiled_programs']}",
        f"engine host time: {result['ours_host_s']:.2f} s of {result['ours_s']:.2f} "
        f"({1000 * result['ours_host_s'] / max(result['ours_decode_calls'], 1):.1f} ms a decode call, "
        f"{result['ours_decode_calls']} calls)",
        f"our compile (first call only, excluded above): {result['ours_compile_s']:.1f} s",
        f"rows with identical greedy tokens: {result['rows_equal']:.0%}",
    ]
    return "\n".join(lines)
