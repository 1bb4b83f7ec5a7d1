"""Trajectory data: JSONL / ArrayRecord records → chat rendering with a loss mask → packed grain batches."""

from jaxseeker.data.arrayrecord import build_arrayrecord, open_arrayrecord
from jaxseeker.data.chat import render_chat, render_generation_prompt, tokenize_chat
from jaxseeker.data.inspect import inspect_files
from jaxseeker.data.packing import pack_examples, pack_rows, shift_example
from jaxseeker.data.pipeline import DataConfig, batch_dataset, batch_iterator, open_source, place_on_mesh
from jaxseeker.data.records import (
    BadLine,
    BadLineError,
    Trajectory,
    iter_jsonl,
    normalize_messages,
    parse_record,
    read_trajectories,
)
from jaxseeker.data.tokenizer import SPECIAL_TOKENS, load_tokenizer, train_tokenizer

__all__ = [
    "BadLine",
    "BadLineError",
    "DataConfig",
    "SPECIAL_TOKENS",
    "Trajectory",
    "batch_dataset",
    "batch_iterator",
    "build_arrayrecord",
    "inspect_files",
    "iter_jsonl",
    "load_tokenizer",
    "normalize_messages",
    "open_arrayrecord",
    "open_source",
    "pack_examples",
    "pack_rows",
    "parse_record",
    "place_on_mesh",
    "read_trajectories",
    "render_chat",
    "render_generation_prompt",
    "shift_example",
    "tokenize_chat",
    "train_tokenizer",
]
