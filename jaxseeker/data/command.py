"""``jaxseeker data inspect|build``: summarise trajectory files, or write them as an ArrayRecord dataset."""

from __future__ import annotations

import argparse
import json
import sys

from tqdm import tqdm

from jaxseeker.argtypes import at_least
from jaxseeker.cli_args import MODEL_FORMS
from jaxseeker.data.records import MAX_MESSAGES, BadLineError, iter_jsonl
from jaxseeker.jsonl import MAX_LINE_BYTES


def _inspect(args: argparse.Namespace) -> int:
    """Prints the JSON summary of the files; bad lines are listed, never fatal."""
    from jaxseeker.data.inspect import inspect_items
    from jaxseeker.data.tokenizer import load_tokenizer
    from jaxseeker.model import resolve_model

    tokenizer = load_tokenizer(resolve_model(args.tokenizer))  # a registered name or a GGUF file: its imported one
    bounds = {"max_line_bytes": args.max_line_bytes, "max_messages": args.max_messages}
    items = (item for path in args.files for item in iter_jsonl(path, **bounds))
    summary = inspect_items(tqdm(items, desc="inspect", unit=" lines", file=sys.stderr), tokenizer)
    print(json.dumps({"files": args.files, **summary}, indent=2, ensure_ascii=False))
    return 0


def _build(args: argparse.Namespace) -> int:
    """Writes the ArrayRecord dataset and prints where it is and how many records it holds."""
    from jaxseeker.data.arrayrecord import build_arrayrecord, open_arrayrecord

    try:
        dataset_dir, skipped = build_arrayrecord(
            args.files,
            args.out,
            split=args.split,
            skip_bad_lines=args.skip_bad_lines,
            num_shards=args.num_shards,
            max_line_bytes=args.max_line_bytes,
            max_messages=args.max_messages,
        )
    except (BadLineError, FileExistsError) as e:  # bad lines, or --out already holds a dataset
        print(str(e), file=sys.stderr)
        return 1
    for bad in skipped:
        print(f"skipped {bad}", file=sys.stderr)
    records = len(open_arrayrecord(dataset_dir, args.split))
    summary = {
        "dataset_dir": str(dataset_dir),
        "split": args.split,
        "records": records,
        "skipped_bad_lines": len(skipped),
    }
    print(json.dumps(summary))
    return 0


def _add_bounds(parser: argparse.ArgumentParser) -> None:
    """``--max-line-bytes`` and ``--max-messages``: the bounds past which a line is a bad line (docs/security.md)."""
    parser.add_argument(
        "--max-line-bytes",
        type=at_least(1),
        default=MAX_LINE_BYTES,
        metavar="N",
        help=f"a longer line is a bad line, never parsed (default: {MAX_LINE_BYTES:,})",
    )
    parser.add_argument(
        "--max-messages",
        type=at_least(1),
        default=MAX_MESSAGES,
        metavar="N",
        help=f"a record of more messages is a bad line (default: {MAX_MESSAGES:,})",
    )


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Adds ``data inspect`` and ``data build`` to the ``jaxseeker`` command line."""
    data = subparsers.add_parser("data", help="trajectory data: inspect JSONL, build ArrayRecord datasets")
    sub = data.add_subparsers(dest="data_command", required=True)

    inspect = sub.add_parser("inspect", help="print a JSON summary of trajectory JSONL files")
    inspect.add_argument("files", nargs="+", metavar="FILE", help="JSONL trajectory files")
    inspect.add_argument(
        "--tokenizer",
        required=True,
        metavar="MODEL",
        help="a tokenizer directory (HF format), or the tokenizer of a model: " + MODEL_FORMS,
    )
    _add_bounds(inspect)
    inspect.set_defaults(func=_inspect)

    build = sub.add_parser("build", help="write trajectory JSONL files as a tfds ArrayRecord dataset")
    build.add_argument("files", nargs="+", metavar="FILE", help="JSONL trajectory files")
    build.add_argument("--out", required=True, metavar="DIR", help="output directory (tfds data_dir)")
    build.add_argument("--split", default="train", help="split name (default: train)")
    build.add_argument(
        "--num-shards", type=at_least(1), default=None, help="ArrayRecord shard files (default: by size)"
    )
    build.add_argument("--skip-bad-lines", action="store_true", help="skip malformed lines instead of failing")
    _add_bounds(build)
    build.set_defaults(func=_build)
