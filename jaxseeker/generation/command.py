"""``jaxseeker bench generate``: greedy generation throughput of the engine against Hugging Face `generate`."""

from __future__ import annotations

import argparse
import dataclasses
import json

from jaxseeker.generation.bench import BenchShape, format_table, run_generate_bench


def _bench_generate(args: argparse.Namespace) -> int:
    """Runs the benchmark once and prints the table (or JSON)."""
    shape = BenchShape(**{f.name: getattr(args, f.name) for f in dataclasses.fields(BenchShape)})
    result = run_generate_bench(shape)
    print(json.dumps({**dataclasses.asdict(shape), **result}) if args.json else format_table(shape, result))
    return 0


def add_bench_parser(bench_subparsers: argparse._SubParsersAction) -> None:
    """Adds ``bench generate`` to the ``jaxseeker bench`` group."""
    gen = bench_subparsers.add_parser(
        "generate", help="greedy generation tokens/s: jaxseeker Engine vs HF generate, same random weights"
    )
    for field in dataclasses.fields(BenchShape):
        gen.add_argument(
            f"--{field.name.replace('_', '-')}", dest=field.name, type=int, default=field.default,
            help=f"default: {field.default}",
        )
    gen.add_argument("--json", action="store_true", help="print one JSON line instead of the table")
    gen.set_defaults(func=_bench_generate)
