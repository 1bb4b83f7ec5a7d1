"""Names `jaxseeker.data` exports, each imported from its module on first use (lazy_loader reads this stub)."""

from .arrayrecord import build_arrayrecord, open_arrayrecord
from .chat import render_chat, render_generation_prompt, tokenize_chat
from .inspect import inspect_files
from .packing import pack_examples, pack_rows, shift_example
from .pipeline import DataConfig, batch_dataset, batch_iterator, open_source, place_on_mesh
from .records import BadLine, BadLineError, Trajectory, iter_jsonl, normalize_messages, parse_record, read_trajectories
from .tokenizer import SPECIAL_TOKENS, load_tokenizer, train_tokenizer

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
