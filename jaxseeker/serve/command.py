"""`jaxseeker serve` (an OpenAI-compatible server for a policy) and `jaxseeker bench serve`."""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path
from typing import Any

from jaxseeker.argtypes import at_least, comma_list, head_flags_problem
from jaxseeker.cli_args import MODEL_FORMS, add_max_context, add_mesh
from jaxseeker.parallel.mesh_config import mesh_text
from jaxseeker.serve.shape import EngineShape

API_KEY_ENV = "JAXSEEKER_API_KEY"
# `bench serve` lower bounds other than 1: its tokenizer has 256 byte tokens + 11 special ones
# (`data.train_tokenizer`), numpy seeds are >= 0.
BENCH_LOWEST = {"vocab_size": 256 + 11, "seed": 0}


def _add_shape_args(p: argparse.ArgumentParser, defaults: EngineShape) -> None:
    helps = {
        "slots": "completions decoded at once (continuous batching)",
        "steps_per_call": "decode steps per device call",
        "prefill_chunk": "prompt tokens written per prefill call",
        "max_queue": "completions that may wait for a slot; more are answered 429",
        "pages": "KV cache pages of 128 positions (default: every slot at its whole context); fewer hold more slots "
        "than would fit at their whole context: a completion waits for pages, the last to come is preempted",
    }
    for field in dataclasses.fields(EngineShape):
        if field.name == "max_len":  # the default depends on the model: `context_length`
            add_max_context(
                p,
                dest="max_len",
                help=f"context tokens of a slot, prompt + completion (default: "
                f"{defaults.max_len}, or the model's max_position_embeddings when smaller)",
            )
        else:
            p.add_argument(
                f"--{field.name.replace('_', '-')}",
                dest=field.name,
                type=at_least(1),
                default=getattr(defaults, field.name),
                metavar="N" if field.name == "pages" else None,
                help=helps[field.name],
            )


def context_length(flag: int | None, limit: int, default: int = EngineShape.max_len) -> int:
    """A slot's context: `--max-context` when given, else `default`, at most the model's `limit`
    (max_position_embeddings); SystemExit in one line when the flag asks for more than the model has."""
    if flag is None:
        return min(default, limit)
    if flag > limit:
        raise SystemExit(f"jaxseeker serve: --max-context {flag} exceeds the model's max_position_embeddings ({limit})")
    return flag


def engine_shape(args: argparse.Namespace, cfg: Any) -> EngineShape:
    """The engine shape of `serve`'s flags for a model of config `cfg` (its context: `context_length`)."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(EngineShape)}
    return EngineShape(**{**values, "max_len": context_length(args.max_len, cfg.max_position_embeddings)})


def _serve(args: argparse.Namespace) -> int:
    from jaxseeker.serve.connections import ConnectionLimits
    from jaxseeker.serve.server import build_served, host_address, load_policy, loopback, serve_forever

    api_key = os.environ.get(args.api_key_env) or None
    if api_key is None and not loopback(args.host):
        raise SystemExit(
            f"jaxseeker serve: --host {args.host} is reachable from other machines, and anyone who reaches it could "
            f"use the model: set ${args.api_key_env} (--api-key-env) to a key clients must send, or bind 127.0.0.1"
        )
    cfg, params, tokenizer = load_policy(args.model, dtype=args.dtype, mesh=args.mesh)
    name = args.served_model_name or Path(args.model).resolve().name
    shape = engine_shape(args, cfg)
    served = build_served(
        cfg,
        params,
        tokenizer,
        model_name=name,
        shape=shape,
        api_key=api_key,
        allowed_hosts=(*args.allowed_host, *([] if host_address(args.host) else [args.host])),  # a name bound
        mesh=args.mesh,
    )
    limits = ConnectionLimits(
        header_timeout_s=args.header_timeout,
        request_timeout_s=args.request_timeout,
        max_connections=args.max_connections,
    )

    def announce(url: str) -> None:
        print(
            f"serving {name!r} on {url}/v1 ({shape.slots} slots × {shape.max_len} tokens on {mesh_text(args.mesh)}; "
            f"API key {'required' if api_key else 'not required'})",
            flush=True,
        )

    serve_forever(served, args.host, args.port, limits, on_listening=announce)
    return 0


def add_parser(subparsers: Any) -> None:
    """Add `serve`: an OpenAI-compatible HTTP server (chat, completions, models, health) for a policy."""
    p = subparsers.add_parser("serve", help="serve a policy behind an OpenAI-compatible API")
    p.add_argument("--model", required=True, help=f"{MODEL_FORMS}, or a jaxseeker run directory")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default: %(default)s, this machine only); any other needs the key of --api-key-env",
    )
    p.add_argument(
        "--port",
        type=at_least(0, high=65535),
        default=8000,
        help="TCP port (default: %(default)s; 0: a free one, printed when the server listens)",
    )
    p.add_argument("--served-model-name", help="the model id clients send (default: the model directory's name)")
    p.add_argument(
        "--api-key-env",
        default=API_KEY_ENV,
        help="environment variable holding the key clients must send as a Bearer token; unset or empty: "
        "no key, allowed only on a loopback --host (default: %(default)s)",
    )
    p.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a name clients may send in the Host header besides localhost and this server's addresses (the "
        "check that stops DNS rebinding); repeatable; '*': any",
    )
    p.add_argument("--dtype", choices=("float32", "bfloat16"), help="parameter dtype (default: the checkpoint's)")
    p.add_argument(
        "--header-timeout",
        type=at_least(0.1, float),
        default=10.0,
        help="seconds a client has to send a request's headers, then its connection is closed",
    )
    p.add_argument(
        "--request-timeout",
        type=at_least(0.1, float),
        default=30.0,
        help="seconds a client has to send a whole request, headers and body, then it is answered 408 and closed",
    )
    p.add_argument(
        "--max-connections", type=at_least(1), default=256, help="open connections at most; one more is closed at once"
    )
    add_mesh(p)
    _add_shape_args(p, EngineShape())
    p.set_defaults(func=_serve)


def _bench(args: argparse.Namespace) -> int:
    import json

    from jaxseeker.serve.bench import ServeBenchShape, format_table, run_serve_bench

    shape = ServeBenchShape(**{f.name: getattr(args, f.name) for f in dataclasses.fields(ServeBenchShape)})
    problem = head_flags_problem(shape.hidden_size, shape.num_heads, shape.num_kv_heads)
    if problem:
        raise SystemExit(f"jaxseeker bench serve: {problem}")
    if shape.prompt_tokens + shape.max_tokens > shape.max_len:
        raise SystemExit(
            f"jaxseeker bench serve: --prompt-tokens + --max-tokens ({shape.prompt_tokens} + "
            f"{shape.max_tokens}) must not exceed --max-context ({shape.max_len})"
        )
    result = run_serve_bench(shape)
    print(json.dumps({**dataclasses.asdict(shape), **result}) if args.json else format_table(shape, result))
    return 0


def add_bench_parser(bench_subparsers: Any) -> None:
    """Add `bench serve`: requests/s and tokens/s of the server under concurrent streaming clients."""
    from jaxseeker.serve.bench import ServeBenchShape

    p = bench_subparsers.add_parser(
        "serve", help="requests/s and tokens/s of `jaxseeker serve` under concurrent clients, vs the bare engine"
    )
    for field in dataclasses.fields(ServeBenchShape):
        if field.name == "concurrency":
            p.add_argument(
                "--concurrency",
                type=comma_list(at_least(1)),
                default=",".join(map(str, field.default)),
                help="comma-separated numbers of concurrent clients",
            )
        elif field.name == "max_len":
            add_max_context(p, dest="max_len", default=field.default, help="context tokens of a slot")
        else:
            p.add_argument(
                f"--{field.name.replace('_', '-')}",
                dest=field.name,
                type=at_least(BENCH_LOWEST.get(field.name, 1)),
                default=field.default,
            )
    p.add_argument("--json", action="store_true", help="print one JSON line instead of the table")
    p.set_defaults(func=_bench)
