"""`jaxseeker sft`, `jaxseeker export-hf` and `jaxseeker average`."""

from __future__ import annotations

import argparse

from jaxseeker.argtypes import at_least
from jaxseeker.cli_args import add_config, read_config


def _sft(args: argparse.Namespace) -> int:
    from jaxseeker.train.sft.loop import run_sft

    summary = run_sft(read_config(args, "sft"), resume=args.resume, progress=not args.no_progress)
    from jaxseeker.parallel import is_main_process

    if not is_main_process():  # every host of a slice runs this; one summary is enough
        return 0
    width = max(map(len, summary))
    print("\nSFT summary")
    for key, value in summary.items():
        print(f"  {key:<{width}}  {value:.4f}" if isinstance(value, float) else f"  {key:<{width}}  {value}")
    return 0


def _export(args: argparse.Namespace) -> int:
    from jaxseeker.train.export import export_hf

    out = export_hf(args.model, args.out, step=args.step, dtype=args.dtype, peft_dir=args.peft_adapter)
    print(f"wrote {out}" + (f" and the PEFT adapter {args.peft_adapter}" if args.peft_adapter else ""))
    return 0


def _average(args: argparse.Namespace) -> int:
    from jaxseeker.train.average import average_hf

    try:
        out = average_hf(args.models, args.out, weights=args.weights)
    except ValueError as err:  # a missing or unreadable config.json, other architectures, bad weights
        raise SystemExit(f"jaxseeker average: {err}") from err
    print(f"averaged {len(args.models)} checkpoints into {out}")
    return 0


def add_parser(subparsers) -> None:
    """Add `sft`, `export-hf` and `average`."""
    sft = subparsers.add_parser("sft", help="supervised fine-tuning on trajectory JSONL")
    add_config(sft, what="SFT recipe", recipes=("sft_tiny", "webexplorer_qwen3-8b_sft"))
    sft.add_argument("--resume", action="store_true", help="continue from the latest checkpoint of the run")
    sft.add_argument("--no-progress", action="store_true")
    sft.set_defaults(func=_sft)
    export = subparsers.add_parser("export-hf", help="write a training checkpoint as an HF checkpoint")
    export.add_argument(
        "--model",
        required=True,
        metavar="RUN",
        help="the run directory of `jaxseeker sft` or `rl` (or its checkpoints/ folder)",
    )
    export.add_argument("--out", required=True, help="HF directory to write")
    export.add_argument("--step", type=at_least(0), default=None, help="default: the latest")
    export.add_argument(
        "--dtype",
        choices=("bfloat16", "float32"),
        default="bfloat16",
        help="dtype of the written weights (float32 doubles the size)",
    )
    export.add_argument(
        "--peft-adapter",
        metavar="DIR",
        default=None,
        help="a LoRA run: also write its adapters to DIR as a PEFT adapter of the base model",
    )
    export.set_defaults(func=_export)
    average = subparsers.add_parser(
        "average", help="the weight mean of HF checkpoints fine-tuned from one start (a model soup)"
    )
    average.add_argument("models", nargs="+", help="HF model directories of one architecture")
    average.add_argument("--out", required=True, help="HF directory to write (the first model's tokenizer files)")
    average.add_argument(
        "--weights",
        type=at_least(0.0, float, above=True),
        nargs="+",
        default=None,
        help="one per model (default equal)",
    )
    average.set_defaults(func=_average)


def _bench(args: argparse.Namespace) -> int:
    # both sides time every step after the first (the compile / warm-up): each needs at least two
    for flag, per_step in (("--hf-batch", args.hf_batch), ("--rows", args.rows)):
        if args.trajectories < 2 * per_step:
            raise SystemExit(
                f"jaxseeker bench sft: --trajectories ({args.trajectories}) must be at least twice "
                f"{flag} ({per_step}): the first step is a warm-up, the others are timed"
            )
    from jaxseeker.train.sft.bench import SHAPES, TooFewSteps, run_bench

    if args.shape not in SHAPES:
        raise SystemExit(f"jaxseeker bench sft: --shape {args.shape!r} is not one of {sorted(SHAPES)}")
    try:
        run_bench(
            n_trajectories=args.trajectories,
            seq_len=args.seq_len,
            rows=args.rows,
            hf_batch=args.hf_batch,
            attention=args.attention,
            num_bins=args.bins,
            chunk_size=args.loss_chunk,
            ynn=args.ynn,
            shape=args.shape,
            lora_rank=args.lora_rank,
            lora_alpha=args.lora_alpha,
        )
    except TooFewSteps as err:  # found once the trajectories are packed, before anything compiles
        raise SystemExit(f"jaxseeker bench sft: {err}") from err
    return 0


def add_bench_parser(bench_subparsers) -> None:
    """Add `bench sft`: useful tokens/s of jaxseeker vs transformers + PyTorch on the same trajectories, full and
    LoRA fine-tuning."""
    from jaxseeker.model.config import ATTENTION_IMPLS

    p = bench_subparsers.add_parser("sft", help="SFT throughput vs HF transformers + PyTorch (same run)")
    p.add_argument("--trajectories", type=at_least(2), default=96, help="synthetic conversations trained on")
    p.add_argument("--seq-len", type=at_least(1), default=2048, help="packed row length (jaxseeker)")
    p.add_argument("--rows", type=at_least(1), default=4, help="packed rows per step (jaxseeker)")
    p.add_argument("--hf-batch", type=at_least(1), default=8, help="padded examples per step (HF)")
    p.add_argument("--attention", choices=ATTENTION_IMPLS, default="blocked", help="attention_impl (jaxseeker)")
    p.add_argument("--bins", type=at_least(1), default=64, help="open rows of the first-fit packer (jaxseeker)")
    p.add_argument(
        "--loss-chunk", type=at_least(1), default=256, help="positions per row whose logits are built at once"
    )
    p.add_argument(
        "--ynn",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="compile the step with XLA:CPU's YNNPACK dot fusion (dropped with a note if unsupported)",
    )
    p.add_argument(
        "--shape",
        default="qwen2-40m",
        help="model shape, random weights: qwen2-40m (default) or smollm2-135m (SmolLM2-135M's Llama)",
    )
    p.add_argument(
        "--lora-rank",
        type=at_least(0),
        default=16,
        help="rank of the LoRA rows' adapters (jaxseeker, and PEFT when installed); 0: full fine-tuning only",
    )
    p.add_argument(
        "--lora-alpha",
        type=at_least(0.0, float, above=True),
        default=32.0,
        help="LoRA alpha (the update is scaled by alpha / rank)",
    )
    p.set_defaults(func=_bench)
