"""`jaxseeker …` subcommands. Each stage adds its own through `add_parser`; this module only joins them."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shlex
import sys

from jaxseeker import __version__
from jaxseeker.cache_dir import cache_root
from jaxseeker.cli_args import MODEL_FORMS, config_name, set_error
from jaxseeker.cli_parser import Parser
from jaxseeker.errors import InputError
from jaxseeker.tools.http import HttpError
from jaxseeker.tools.llm_client import LLMError
from jaxseeker.train.interrupt import Stopped, stop_signals
from jaxseeker.train.recipe import RecipeError

# Stage modules with an `add_parser(subparsers)` and/or an `add_bench_parser(bench_subparsers)`;
# the only place that imports every stage.
COMMAND_MODULES = (
    "jaxseeker.model.command",
    "jaxseeker.data.command",
    "jaxseeker.generation.command",
    "jaxseeker.world.command",
    "jaxseeker.world.pages_bench",
    "jaxseeker.synthesis.qa.command",
    "jaxseeker.train.command",
    "jaxseeker.train.rl.command",
    "jaxseeker.planning.command",
    "jaxseeker.agent.command",
    "jaxseeker.eval.command",
    "jaxseeker.pipeline.command",
    "jaxseeker.serve.command",
    "jaxseeker.tools.sandbox_bench",
)


def _info(args: argparse.Namespace) -> int:
    from jaxseeker.model import load_config, resolve_model
    from jaxseeker.model.flops import summary

    path = args.path if args.path.endswith(".json") else resolve_model(args.path)  # a name or GGUF: imported once
    info = summary(load_config(path), context=args.context)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    width = max(map(len, info))
    for key, value in info.items():
        if key.endswith(("bytes_bf16", "bytes_f32")):
            value = f"{value / 2**30:.3f} GiB"
        elif isinstance(value, int | float) and key != "context_for_flops":
            value = f"{value:,.0f}"
        print(f"{key:<{width}}  {value}")
    return 0


DESCRIPTION = "Train deep-search agents in one JAX program: synthesise questions and trajectories, SFT, RL, eval."
EPILOG = """examples:
  jaxseeker pipeline --config demo                     the offline end-to-end run behind `make demo`
  jaxseeker eval --config demo --model rl              measure its policy again, another way
  jaxseeker plan --config webexplorer_qwen3-8b_sft     memory and fit of a paper-scale run
  jaxseeker serve --model runs/demo/rl/hf              an OpenAI-compatible API for a policy
A --config names a YAML file or a recipe shipped in jaxseeker/configs (the repository's configs/).
`jaxseeker COMMAND --help` lists a command's options."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = Parser(prog="jaxseeker", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"jaxseeker {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    info = sub.add_parser("info", help="architecture, parameters, FLOPs per token and memory of an HF checkpoint")
    info.add_argument("path", metavar="MODEL", help=f"{MODEL_FORMS}, or a config.json")
    info.add_argument("--context", type=int, default=4096, help="attended context for the FLOPs figure")
    info.add_argument("--json", action="store_true", help="print JSON")
    info.set_defaults(func=_info)
    bench = sub.add_parser("bench", help="benchmarks against a baseline measured in the same run")
    bench_sub = bench.add_subparsers(dest="bench", required=True)
    for name in COMMAND_MODULES:
        module = importlib.import_module(name)
        if hasattr(module, "add_parser"):
            module.add_parser(sub)
        if hasattr(module, "add_bench_parser"):
            module.add_bench_parser(bench_sub)
    return parser


def compilation_cache() -> dict[str, str]:
    """Environment that turns on jax's persistent compilation cache in `$JAXSEEKER_CACHE/xla` (default
    `~/.cache/jaxseeker/xla`): a command compiles a program once per machine, not once per run (the engine's
    unrolled decode step takes tens of seconds to compile on a CPU). The size limit turns on jax's file lock, as
    several processes may share the cache."""
    return {"JAX_COMPILATION_CACHE_DIR": str(cache_root() / "xla"), "JAX_COMPILATION_CACHE_MAX_SIZE": str(4 << 30)}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `jaxseeker` console script."""
    from jaxseeker.parallel.cpu_devices import size_cpu_thread_pool
    from jaxseeker.planning.preallocation import preallocation_env

    os.environ.update(size_cpu_thread_pool())  # before JAX starts: fake CPU devices must not deadlock
    os.environ.update(preallocation_env())  # a GPU preallocates the memory the plan budgets, not JAX's 75%
    for key, value in compilation_cache().items():
        os.environ.setdefault(key, value)
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    try:
        with stop_signals():  # Ctrl-C or SIGTERM: a training loop stops after its step, anything else at once
            return args.func(args)
    except (InputError, OSError, HttpError, LLMError) as err:  # bad input or a failed file / network operation,
        # not a bug: the message names the file, row, key or URL
        source = getattr(args, "config", None)
        overridden = set_error(err, getattr(args, "set", ())) if isinstance(err, RecipeError) else None
        if overridden is not None:  # a key of an override: the override, not the file, is to blame
            raise SystemExit(f"jaxseeker {args.command}: {overridden}") from err
        shown = source and config_name(source)
        from_recipe = source and isinstance(err, RecipeError) and not str(err).startswith((str(source), shown, "--set"))
        where = f"{shown}: " if from_recipe else ""
        raise SystemExit(f"jaxseeker {args.command}: {where}{err}") from err
    except Stopped as err:  # what was saved stays: training resumes from its checkpoint, evals and synth from theirs
        print(f"\njaxseeker {args.command}: {err}; to go on: {resume_command(args, argv)}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:  # Ctrl-C outside the commands' block (e.g. while it closes)
        print(f"\njaxseeker {args.command}: stopped by Ctrl-C", file=sys.stderr)
        return 130


def resume_command(args: argparse.Namespace, argv: list[str]) -> str:
    """The command line that goes on from a stopped run: the same one, with `--resume` where the command has it."""
    again = list(argv)
    if hasattr(args, "resume") and "--resume" not in again:
        again.append("--resume")
    return shlex.join(["jaxseeker", *again])


if __name__ == "__main__":
    sys.exit(main())
