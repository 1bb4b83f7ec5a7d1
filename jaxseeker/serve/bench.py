"""`jaxseeker bench serve`: requests/s and tokens/s of the server under concurrent streaming clients, against
the same engine driven directly (no HTTP) in the same run."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from jaxseeker.serve.shape import EngineShape

if TYPE_CHECKING:  # jax loads when the benchmark runs, so `jaxseeker bench serve --help` is quick
    from jaxseeker.generation import Engine

WORDS = (
    "the river town bridge arches founded weaver glass village chapel north south long short blue question "
    "answer search visit page year people water stone tower market road hill"
).split()


@dataclasses.dataclass(frozen=True)
class ServeBenchShape:
    """The random Qwen3-shaped model (≈3.6M parameters by default), the engine, and the client workload."""

    hidden_size: int = 256
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 704
    vocab_size: int = 2048
    slots: int = 32
    max_len: int = 256
    steps_per_call: int = 8
    prompt_tokens: int = 64
    max_tokens: int = 64
    requests_per_client: int = 4
    concurrency: tuple[int, ...] = (8, 32)
    seed: int = 0


def random_policy(shape: ServeBenchShape, out: Path) -> Path:
    """Save a random Qwen3 model of `shape` and a byte-level BPE (chat template included) as an HF directory."""
    import jax

    from jaxseeker import model
    from jaxseeker.data import train_tokenizer

    cfg = model.ModelConfig(
        model_type="qwen3",
        vocab_size=shape.vocab_size,
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_layers=shape.num_layers,
        num_heads=shape.num_heads,
        num_kv_heads=shape.num_kv_heads,
        head_dim=shape.hidden_size // shape.num_heads,
        max_position_embeddings=max(shape.max_len, 512),
    )
    rng = np.random.default_rng(shape.seed)

    def leaf(path, leaf_shape: tuple[int, ...]) -> np.ndarray:
        name = str(path[-1].key)
        if name.endswith("norm"):
            return np.ones(leaf_shape, np.float32)
        if name.endswith("bias"):
            return np.zeros(leaf_shape, np.float32)
        return rng.normal(0.0, 0.05, leaf_shape).astype(np.float32)

    params = jax.tree_util.tree_map_with_path(
        leaf, model.param_shapes(cfg), is_leaf=lambda x: isinstance(x, tuple) and all(isinstance(d, int) for d in x)
    )
    model.save_hf(params, cfg, out)
    words = np.random.default_rng(shape.seed).choice(WORDS, size=(400, 12))
    train_tokenizer([" ".join(w) for w in words], min(shape.vocab_size, 1024), out)
    return out


def _prompts(encode, shape: ServeBenchShape, n: int) -> list[list[int]]:
    """`n` prompts of exactly `prompt_tokens` token ids, from random words."""
    rng = np.random.default_rng(shape.seed + 1)
    prompts = []
    for _ in range(n):
        ids: list[int] = []
        while len(ids) < shape.prompt_tokens:
            ids += encode(" " + " ".join(rng.choice(WORDS, size=16)))
        prompts.append(ids[: shape.prompt_tokens])
    return prompts


async def _client(http, url: str, model: str, prompts: list[list[int]], max_tokens: int, out: list[dict]) -> None:
    """Send `prompts` one after the other as streamed completions; record TTFT, latency and tokens of each."""
    for prompt in prompts:
        body = {
            "model": model,
            "prompt": prompt,
            "max_tokens": max_tokens,
            "temperature": 1.0,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        start = time.perf_counter()
        first, tokens = None, 0
        async with http.stream("POST", url, json=body) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                if first is None and chunk["choices"]:
                    first = time.perf_counter() - start
                if chunk.get("usage"):
                    tokens = chunk["usage"]["completion_tokens"]
        out.append({"ttft_s": first, "latency_s": time.perf_counter() - start, "tokens": tokens})


async def _load(base_url: str, model: str, prompts: list[list[int]], clients: int, max_tokens: int) -> dict:
    """`clients` concurrent clients sharing `prompts` round-robin; wall time and per-request records."""
    import httpx

    records: list[dict] = []
    limits = httpx.Limits(max_connections=clients + 4)
    async with httpx.AsyncClient(base_url=base_url, timeout=600, limits=limits) as http:
        start = time.perf_counter()
        await asyncio.gather(
            *(_client(http, "/v1/completions", model, prompts[i::clients], max_tokens, records) for i in range(clients))
        )
        wall = time.perf_counter() - start
    latencies = sorted(r["latency_s"] for r in records)
    tokens = sum(r["tokens"] for r in records)
    return {
        "clients": clients,
        "requests": len(records),
        "wall_s": wall,
        "requests_per_s": len(records) / wall,
        "tokens": tokens,
        "tokens_per_s": tokens / wall,
        "ttft_p50_s": statistics.median(r["ttft_s"] for r in records),
        "latency_p50_s": statistics.median(latencies),
        "latency_p95_s": latencies[int(0.95 * (len(latencies) - 1))],
    }


def _run_engine(engine: Engine, prompts: list[list[int]], max_tokens: int) -> int:
    """Sample `max_tokens` after every prompt (temperature 1, own seeds), keeping every slot busy; tokens sampled."""
    from jaxseeker.generation import SamplingConfig

    waiting, tokens = list(enumerate(prompts))[::-1], 0
    while waiting or engine.has_work():
        while waiting and engine.free_slots():
            i, prompt = waiting.pop()
            engine.submit(str(i), prompt, max_new_tokens=max_tokens, sampling=SamplingConfig(temperature=1.0, seed=i))
        for event in engine.step():
            tokens += len(event.tokens)
            engine.release(event.request_id)
    return tokens


def _warm_up(engine: Engine, prompt: list[int]) -> None:
    """Compile what the server will run: prefill of 1, 2, 4 … slots rows at once, and per-row sampling decode
    (the engine's jitted steps are shared by every engine of the same shape)."""
    rows = 1
    while rows < engine.slots * 2:
        _run_engine(engine, [prompt] * min(rows, engine.slots), 2)
        rows *= 2


def _bare_engine(engine: Engine, prompts: list[list[int]], max_tokens: int) -> dict:
    """The same requests on an engine of the same shape driven directly, every slot kept busy."""
    start = time.perf_counter()
    tokens = _run_engine(engine, prompts, max_tokens)
    wall = time.perf_counter() - start
    return {
        "requests": len(prompts),
        "wall_s": wall,
        "requests_per_s": len(prompts) / wall,
        "tokens": tokens,
        "tokens_per_s": tokens / wall,
    }


def run_serve_bench(shape: ServeBenchShape = ServeBenchShape(), model_dir: str | Path | None = None) -> dict:
    """Serve a policy (`model_dir`, else a random one of `shape`) on loopback and load it with each number of
    concurrent streaming clients (`requests_per_client` requests each, `max_tokens` sampled tokens per request,
    EOS ignored); then the bare engine on the largest level's requests. The engine's shapes are compiled first,
    and one untimed pass of each level warms the HTTP side."""
    from jaxseeker import model
    from jaxseeker.generation import Engine
    from jaxseeker.serve.server import Background, build_served, load_policy

    engine_shape = EngineShape(
        slots=shape.slots,
        max_len=shape.max_len,
        steps_per_call=shape.steps_per_call,
        prefill_chunk=min(128, shape.max_len),
        max_queue=max(max(shape.concurrency), 1) * 2,
    )
    if shape.prompt_tokens + shape.max_tokens > shape.max_len:
        raise ValueError(
            f"prompt_tokens + max_tokens = {shape.prompt_tokens + shape.max_tokens} exceeds max_len = {shape.max_len}"
        )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(model_dir) if model_dir is not None else random_policy(shape, Path(tmp))
        cfg, params, tokenizer = load_policy(path)
    name = "bench-policy"
    served = build_served(cfg, params, tokenizer, model_name=name, shape=engine_shape)
    prompts = _prompts(served.encode, shape, max(shape.concurrency) * shape.requests_per_client)
    bare_engine = Engine(
        params,
        cfg,
        slots=engine_shape.slots,
        max_len=engine_shape.max_len,
        steps_per_call=engine_shape.steps_per_call,
        prefill_chunk=engine_shape.prefill_chunk,
        pages=engine_shape.pages,
    )
    _warm_up(bare_engine, prompts[0])
    levels = []
    with Background(served) as server:
        for clients in shape.concurrency:
            asyncio.run(_load(server.url, name, prompts[:clients], clients, shape.max_tokens))
        for clients in shape.concurrency:
            levels.append(
                asyncio.run(
                    _load(server.url, name, prompts[: clients * shape.requests_per_client], clients, shape.max_tokens)
                )
            )
    bare = _bare_engine(bare_engine, prompts, shape.max_tokens)
    return {"params_M": model.count_params(cfg) / 1e6, "levels": levels, "bare_engine": bare}


def format_table(shape: ServeBenchShape, result: dict) -> str:
    """The benchmark result as a small text table."""
    lines = [
        (
            f"jaxseeker serve, {result['params_M']:.1f}M params, {shape.slots} slots x {shape.max_len} tokens, "
            f"prompt {shape.prompt_tokens} + {shape.max_tokens} sampled tokens per request (EOS ignored, "
            f"temperature 1), streamed /v1/completions over loopback"
        ),
        f"{'clients':>8}{'requests':>10}{'seconds':>9}{'req/s':>8}{'tok/s':>9}{'TTFT p50':>10}"
        f"{'lat p50':>9}{'lat p95':>9}",
    ]
    for r in result["levels"]:
        lines.append(
            f"{r['clients']:>8}{r['requests']:>10}{r['wall_s']:>9.2f}{r['requests_per_s']:>8.1f}"
            f"{r['tokens_per_s']:>9.0f}{r['ttft_p50_s']:>10.3f}{r['latency_p50_s']:>9.3f}"
            f"{r['latency_p95_s']:>9.3f}"
        )
    bare = result["bare_engine"]
    lines.append(
        f"bare engine, same shape, no HTTP: {bare['requests']} requests in {bare['wall_s']:.2f}s, "
        f"{bare['requests_per_s']:.1f} req/s, {bare['tokens_per_s']:.0f} tok/s"
    )
    return "\n".join(lines)
