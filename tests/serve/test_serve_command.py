"""`jaxseeker serve` and `jaxseeker bench serve`: the CLI wiring, a real server process, and a short bench."""

import json
import queue
import re
import subprocess
import sys
import threading

import httpx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cli_support import usage_error
from gguf_support import hf_config, hf_state, write_gguf
from serve_support import MODEL_NAME, SHAPE, sentences

from jaxseeker import model
from jaxseeker.cli import build_parser
from jaxseeker.data import train_tokenizer
from jaxseeker.parallel.cpu_devices import fake_cpu_devices_env
from jaxseeker.serve import load_policy
from jaxseeker.serve.bench import ServeBenchShape, format_table, run_serve_bench
from jaxseeker.train.checkpoint import Checkpointer
from jaxseeker.train.state import TrainState


def test_the_cli_has_serve_and_bench_serve():
    args = build_parser().parse_args(["serve", "--model", "m", "--slots", "2", "--max-context", "64"])
    assert (args.model, args.host, args.port, args.slots, args.max_len, args.api_key_env) == (
        "m",
        "127.0.0.1",
        8000,
        2,
        64,
        "JAXSEEKER_API_KEY",
    )
    bench = build_parser().parse_args(["bench", "serve", "--concurrency", "2,4", "--max-tokens", "8"])
    assert (bench.concurrency, bench.max_tokens) == ((2, 4), 8)
    assert build_parser().parse_args(["bench", "serve"]).concurrency == ServeBenchShape().concurrency


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--hidden-size", "0"], "--hidden-size: must be an integer >= 1, got 0"),
        (["--num-layers", "0"], "--num-layers: must be an integer >= 1, got 0"),
        (["--num-heads", "0"], "--num-heads: must be an integer >= 1, got 0"),
        (["--num-kv-heads", "-2"], "--num-kv-heads: must be an integer >= 1, got -2"),
        (["--intermediate-size", "0"], "--intermediate-size: must be an integer >= 1, got 0"),
        (["--vocab-size", "266"], "--vocab-size: must be an integer >= 267, got 266"),
        (["--slots", "0"], "--slots: must be an integer >= 1, got 0"),
        (["--max-context", "1"], "--max-context: must be an integer >= 2, got 1"),
        (["--steps-per-call", "0"], "--steps-per-call: must be an integer >= 1, got 0"),
        (["--prompt-tokens", "0"], "--prompt-tokens: must be an integer >= 1, got 0"),
        (["--max-tokens", "0"], "--max-tokens: must be an integer >= 1, got 0"),
        (["--requests-per-client", "0"], "--requests-per-client: must be an integer >= 1, got 0"),
        (["--concurrency", "8,0"], "--concurrency: each value must be an integer >= 1, got 0 (in '8,0')"),
        (["--concurrency", "8,,32"], "--concurrency: must be comma-separated values, got '8,,32'"),
        (["--seed", "-1"], "--seed: must be an integer >= 0, got -1"),
    ],
)
def test_bench_serve_flags_out_of_range_are_usage_errors(argv, message, capsys):
    assert usage_error(["bench", "serve", *argv], capsys) == f"jaxseeker bench serve: error: argument {message}"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--port", "-1"], "--port: must be an integer >= 0 and <= 65535, got -1"),
        (["--port", "65536"], "--port: must be an integer >= 0 and <= 65535, got 65536"),
        (["--slots", "0"], "--slots: must be an integer >= 1, got 0"),
        (["--max-context", "1"], "--max-context: must be an integer >= 2, got 1"),
        (["--steps-per-call", "0"], "--steps-per-call: must be an integer >= 1, got 0"),
        (["--prefill-chunk", "0"], "--prefill-chunk: must be an integer >= 1, got 0"),
        (["--max-queue", "0"], "--max-queue: must be an integer >= 1, got 0"),
        (["--request-timeout", "0"], "--request-timeout: must be a number >= 0.1, got 0"),
    ],
)
def test_serve_flags_out_of_range_are_usage_errors(argv, message, capsys):
    assert usage_error(["serve", "--model", "m", *argv], capsys) == f"jaxseeker serve: error: argument {message}"


def test_serve_context_is_the_models_when_shorter_and_a_longer_flag_is_one_line(policy_dir):
    from jaxseeker.cli import main
    from jaxseeker.serve.command import engine_shape

    cfg = model.load_config(policy_dir)  # max_position_embeddings 512, under the default 4096
    parse = build_parser().parse_args
    assert engine_shape(parse(["serve", "--model", str(policy_dir)]), cfg).max_len == 512
    assert engine_shape(parse(["serve", "--model", str(policy_dir), "--max-context", "256"]), cfg).max_len == 256
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--model", str(policy_dir), "--max-context", "1024"])
    assert str(exit_.value.code) == (
        "jaxseeker serve: --max-context 1024 exceeds the model's max_position_embeddings (512)"
    )


def test_bench_serve_vocab_floor_is_the_tokenizers_smallest():
    from jaxseeker.data.tokenizer import SPECIAL_TOKENS
    from jaxseeker.serve.command import BENCH_LOWEST

    assert BENCH_LOWEST["vocab_size"] == 256 + len(SPECIAL_TOKENS)
    with pytest.raises(ValueError, match="must be at least"):
        train_tokenizer(["a b c"], BENCH_LOWEST["vocab_size"] - 1)


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--prompt-tokens", "200", "--max-tokens", "64", "--max-context", "256"],
            "--prompt-tokens + --max-tokens (200 + 64) must not exceed --max-context (256)",
        ),
        (["--num-heads", "4", "--num-kv-heads", "3"], "--num-heads (4) must be a multiple of --num-kv-heads (3)"),
        (["--hidden-size", "12", "--num-heads", "4", "--num-kv-heads", "2"], "must be even and >= 2, got 12 // 4 = 3"),
    ],
)
def test_bench_serve_shapes_that_cannot_run_end_before_the_run(argv, message):
    args = build_parser().parse_args(["bench", "serve", *argv])
    with pytest.raises(SystemExit, match="^jaxseeker bench serve: ") as exit_:
        args.func(args)
    assert message in str(exit_.value.code)


def test_jaxseeker_serve_on_a_tensor_mesh_answers_on_loopback_with_the_key_from_the_environment(policy_dir, client):
    """The server process shards the policy over 2 fake CPU devices (`--mesh tensor=2`) and answers greedy as the
    one-device server does. `--port 0`: it binds a free port and prints it (no port drawn here that another test
    could take first)."""
    env = {**fake_cpu_devices_env(2), "MY_SERVE_KEY": "k-123"}
    cmd = [
        sys.executable,
        "-m",
        "jaxseeker.cli",
        "serve",
        "--model",
        str(policy_dir),
        "--port",
        "0",
        "--api-key-env",
        "MY_SERVE_KEY",
        "--slots",
        "1",
        "--max-context",
        "64",
        "--served-model-name",
        "p",
        "--mesh",
        "tensor=2",
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: queue.Queue = queue.Queue()  # its output, read on a thread: a wait for a line has a deadline
    threading.Thread(target=lambda: [*map(lines.put, proc.stdout), lines.put(None)], daemon=True).start()
    out: list[str] = []
    try:
        while not (listening := re.search(r"serving 'p' on (http://127\.0\.0\.1:\d+)/v1 ", "".join(out))):
            line = lines.get(timeout=120)
            assert line is not None, f"the server ended before it listened:\n{''.join(out)}"
            out.append(line)
        url = listening.group(1)
        assert url != "http://127.0.0.1:0"
        health = httpx.get(f"{url}/health", timeout=60).json()  # bound before the line: no refused connection
        assert (health["model"], health["slots"], health["max_len"]) == ("p", 1, 64)
        assert httpx.get(f"{url}/v1/models").status_code == 401
        models = httpx.get(f"{url}/v1/models", headers={"Authorization": "Bearer k-123"}).json()
        assert [m["id"] for m in models["data"]] == ["p"]
        request = {"prompt": "The river town", "max_tokens": 12, "temperature": 0}
        sharded = httpx.post(
            f"{url}/v1/completions",
            json={**request, "model": "p"},
            headers={"Authorization": "Bearer k-123"},
            timeout=120,
        ).json()
        one_device = client.completions.create(model=MODEL_NAME, **request)
        assert sharded["choices"][0]["text"] == one_device.choices[0].text != ""
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    while (line := lines.get(timeout=30)) is not None:
        out.append(line)
    text = "".join(out)
    assert "k-123" not in text and "API key required" in text
    assert "on a data=1,fsdp=1,tensor=2,expert=1 mesh of 2 devices" in text


def test_bench_serve_counts_every_request_and_token(policy_dir):
    shape = ServeBenchShape(
        slots=SHAPE.slots,
        max_len=SHAPE.max_len,
        steps_per_call=SHAPE.steps_per_call,
        prompt_tokens=16,
        max_tokens=8,
        requests_per_client=2,
        concurrency=(2, 4),
    )
    result = run_serve_bench(shape, model_dir=policy_dir)
    assert [(r["clients"], r["requests"], r["tokens"]) for r in result["levels"]] == [(2, 4, 32), (4, 8, 64)]
    assert all(r["tokens_per_s"] > 0 and 0 < r["ttft_p50_s"] <= r["latency_p95_s"] for r in result["levels"])
    assert (result["bare_engine"]["requests"], result["bare_engine"]["tokens"]) == (8, 64)
    table = format_table(shape, result)
    assert "req/s" in table and "bare engine" in table


def test_load_policy_reads_a_gguf_file(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXSEEKER_CACHE", str(tmp_path / "cache"))
    config = hf_config("llama")
    path = write_gguf(tmp_path / "tiny.gguf", hf_state(config), config)
    cfg, params, tokenizer = load_policy(path)
    want_cfg, want = model.load_gguf(path)
    assert cfg == want_cfg and len(tokenizer) == cfg.vocab_size and tokenizer.eos_token == "<|im_end|>"
    np.testing.assert_array_equal(np.asarray(params["embed"]), np.asarray(want["embed"]))


def test_load_policy_reads_a_run_directory_checkpoint(tmp_path):
    cfg = model.ModelConfig.tiny()
    rng = np.random.default_rng(0)
    params = jax.tree.map(
        lambda s: jnp.asarray(rng.normal(0, 0.1, s), jnp.float32),
        model.param_shapes(cfg),
        is_leaf=lambda x: isinstance(x, tuple) and all(isinstance(d, int) for d in x),
    )
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "model_config.json").write_text(json.dumps(model.to_hf_dict(cfg)))
    train_tokenizer(sentences(50), 300, run / "tokenizer")
    with Checkpointer(run / "checkpoints", async_save=False) as checkpoints:
        state = TrainState(step=jnp.int32(3), params=params, opt_state=(), rng=jax.random.PRNGKey(0))
        checkpoints.save(3, state, data_state={}, config={}, force=True)

    loaded_cfg, loaded, tokenizer = load_policy(run / "checkpoints")

    assert (loaded_cfg.hidden_size, loaded_cfg.num_layers, len(tokenizer)) == (cfg.hidden_size, cfg.num_layers, 300)
    jax.tree.map(lambda a, b: np.testing.assert_array_equal(np.asarray(a), np.asarray(b)), params, loaded)
    half_cfg, half, _ = load_policy(run, dtype="bfloat16")  # the run directory itself, cast on restore
    assert half_cfg.param_dtype == "bfloat16"
    assert all(x.dtype == jnp.bfloat16 for x in jax.tree.leaves(half))
    np.testing.assert_allclose(np.asarray(half["embed"], np.float32), np.asarray(params["embed"]), rtol=1e-2)
