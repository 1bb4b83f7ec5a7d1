"""`jaxseeker import-gguf FILE --out DIR`: a llama.cpp GGUF model as an HF model directory."""

from __future__ import annotations

import argparse
import time
from typing import Any


def _import_gguf(args: argparse.Namespace) -> int:
    from jaxseeker.model import load_config
    from jaxseeker.model.gguf_import import import_gguf
    from jaxseeker.model.pretrained import gguf_source

    start = time.perf_counter()
    source = gguf_source(args.file) or args.file  # a missing file: FileNotFoundError naming it
    out = import_gguf(source, args.out, dtype=args.dtype)
    cfg = load_config(out)
    print(
        f"imported {source} ({cfg.model_type}, {cfg.num_layers} layers, hidden {cfg.hidden_size}, vocab "
        f"{cfg.vocab_size}) into {out} as {cfg.hf_dtype} in {time.perf_counter() - start:.1f}s"
    )
    return 0


def add_parser(subparsers: Any) -> None:
    """Add `import-gguf`: config.json, safetensors and the tokenizer (with its chat template) of a GGUF file."""
    from jaxseeker.model.pretrained import PRETRAINED

    p = subparsers.add_parser("import-gguf", help="write a llama.cpp GGUF model (dequantised) as an HF directory")
    p.add_argument(
        "file",
        metavar="FILE",
        help=f"a .gguf file (Llama, Qwen2, Qwen3), or a registered name: {', '.join(sorted(PRETRAINED))}",
    )
    p.add_argument("--out", required=True, help="HF model directory to write (weight files there are replaced)")
    p.add_argument(
        "--dtype",
        choices=("float32", "bfloat16"),
        default="float32",
        help="dtype of the saved weights (default: %(default)s)",
    )
    p.set_defaults(func=_import_gguf)
