"""``jaxseeker bench generate``: greedy generation throughput of the engine against Hugging Face `generate`."""

from __future__ import annotations

import argparse
import dataclasses
import json

from jaxseeker.argtypes import at_least, head_flags_problem
from jaxseeker.generation.bench import BenchShape, format_table, run_generate_bench

# Lower bounds of the BenchShape fields other than 1: prompts draw ids in [1, vocab_size); numpy seeds are >= 0.
LOWEST = {"vocab_size": 2, "seed": 0}
MODEL_FIELDS = ("hidden_size", "num_layers", "num_heads", "num_kv_heads", "intermediate_size", "vocab_size")


def _check_shape(shape: BenchShape) -> None:
    """SystemExit naming the flags when the heads of `shape` make no model or its batch does not split into groups
    (what the parser cannot check alone)."""
    problem = head_flags_problem(shape.hidden_size, shape.num_heads, shape.num_kv_heads)
    if not problem and shape.batch % shape.group_size:
        problem = f"--batch {shape.batch} is not a multiple of --group-size {shape.group_size}"
    if problem:
        raise SystemExit(f"jaxseeker bench generate: {problem}")


def _bench_generate(args: argparse.Namespace) -> int:
    """Runs the benchmark once and prints the table (or JSON)."""
    shape = BenchShape(**{f.name: getattr(args, f.name) for f in dataclasses.fields(BenchShape)})
    _check_shape(shape)
    model_dir = None
    if args.model is not None:
        from jaxseeker.model import resolve_model

        model_dir = resolve_model(args.model)  # a registered name or GGUF file is imported once into the cache
    result = run_generate_bench(shape, model_dir)
    row = dataclasses.asdict(shape)
    if model_dir is not None:  # the model's shape, not the (unused) shape flags' defaults
        from jaxseeker.model import load_config

        cfg = load_config(model_dir)
        row |= {name: getattr(cfg, name) for name in MODEL_FIELDS}
    print(json.dumps({**row, **result}) if args.json else format_table(shape, result))
    return 0


def add_bench_parser(bench_subparsers: argparse._SubParsersAction) -> None:
    """Adds ``bench generate`` to the ``jaxseeker bench`` group."""
    gen = bench_subparsers.add_parser(
        "generate", help="greedy generation tokens/s: jaxseeker Engine vs HF generate, same weights"
    )
    gen.add_argument(
        "--model",
        "--hf-path",
        dest="model",
        metavar="MODEL",
        help="a real model instead of random weights: an HF directory, a GGUF file or a registered name "
        "(smollm2-135m-instruct); the shape flags are then unused",
    )
    for field in dataclasses.fields(BenchShape):
        gen.add_argument(
            f"--{field.name.replace('_', '-')}",
            dest=field.name,
            type=at_least(LOWEST.get(field.name, 1)),
            default=field.default,
            help=f"default: {field.default}",
        )
    gen.add_argument("--json", action="store_true", help="print one JSON line instead of the table")
    gen.set_defaults(func=_bench_generate)
