"""The SFT input pipeline: trajectories → tokens + loss mask → over-length policy → packed batches.

    source (JSONL records or an ArrayRecord dataset, random access)
      → this process's shard [process_index::process_count] → shuffle(seed), reshuffled each epoch
      → (permute_names, permute_digits) → token_roles + shift → (mixed with copy-task examples)
      → drop / truncate → first-fit packing
      → batches of [rows, seq]

Everything is a grain dataset, so the iterator of ``batch_iterator`` has ``get_state()`` /
``set_state()``: saved with a checkpoint, it makes a resumed run see exactly the batches it would
have seen. ``place_on_mesh`` turns a host batch into global ``jax.Array``s.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import grain
import jax
import numpy as np

from jaxseeker.data.arrayrecord import is_arrayrecord_dir, open_arrayrecord
from jaxseeker.data.chat import REJECTED, TRAINED, UNTRAINED, token_roles
from jaxseeker.data.copies import copy_shape, copy_tokens, digit_ids, ordinary_ids
from jaxseeker.data.counterfactual import NamePool, permute_digits, permute_names
from jaxseeker.data.packing import OVER_LENGTH_POLICIES, ROW_KEYS, pack_rows, shift_example
from jaxseeker.data.records import MAX_MESSAGES, Message, Trajectory, normalize_messages, read_trajectories
from jaxseeker.data.unlikelihood import repeated_ngrams
from jaxseeker.errors import InputError
from jaxseeker.jsonl import MAX_LINE_BYTES


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Input pipeline settings; the defaults suit the embedded offline run."""

    seq_len: int = 1024  # tokens per packed row
    batch_size: int = 8  # rows per step over all processes (split evenly between them)
    seed: int = 0  # the shuffle's seed
    shuffle: bool = True  # shuffle the records every epoch
    num_epochs: int | None = None  # None: repeat forever (a training run stops by step count)
    over_length: str = "truncate"  # "drop" (counted in num_dropped) or "truncate"
    skip_bad_lines: bool = False  # bad JSONL lines / untokenizable records fail the run; set: named on stderr, skipped
    packing_bins: int = 0  # rows the first-fit packer keeps open; 0: the rows per process
    num_threads: int = 2  # grain threads that read and tokenize
    max_line_bytes: int = MAX_LINE_BYTES  # a longer JSONL line is a bad line, never parsed (docs/security.md)
    max_messages: int = MAX_MESSAGES  # a record of more messages is a bad line (docs/security.md)
    # Loss weight of the tokens the agent did not write (system, question, observations): 0 is masked SFT.
    # A policy trained from scratch gets a language-modelling signal from them (observations repeat names and
    # numbers: copying practice); the loss mask is then float weights (1 on the agent's tokens).
    context_weight: float = 0.0
    # Each draw of a trajectory sees its digits through a fresh random permutation (data.counterfactual): a
    # fact's number cannot be memorised, it has to be copied from the observation. For agent data whose
    # numbers are read, not computed.
    permute_digits: bool = False
    # A name pool file (`group<TAB>name` lines, data.counterfactual.NamePool): each draw of a trajectory renames
    # the names it searches for that are in the pool to other names of their group, so a name has to be copied,
    # not remembered. Empty: off. Keep the evaluation's entities out of the pool.
    name_pool: str = ""
    # Copy replay: this fraction of the drawn examples are copy-task examples (data.copies: a run of random ids,
    # up to `copy_gap` filler ids, the run again; `copy_digit_rate` of the runs end in digits), packed with the
    # trajectories. Keeps the copying heads of a copy warm-up through SFT (docs/results.md). 0: off.
    copy_rate: float = 0.0
    copy_digit_rate: float = 0.5  # copy replay: the fraction of runs that end in digits
    copy_gap: int = 160  # copy replay: filler ids at most between a run and its copy
    # Rejected turns (`"weight": -1` on an assistant message, e.g. the policy's own turns that broke the format):
    # each token that ends an n-gram of `unlikelihood_ngram` ids already seen `unlikelihood_min_seen` times in its
    # own turn gets loss weight -unlikelihood_weight, which `losses.nll` turns into the unlikelihood loss
    # -log(1 - p) (data.unlikelihood). 0: rejected turns are left out of the loss like weight-0 ones.
    unlikelihood_weight: float = 0.0
    unlikelihood_ngram: int = 4  # n of the repeated n-grams
    unlikelihood_min_seen: int = 3  # earlier occurrences in the turn before a repeat is penalised

    def __post_init__(self) -> None:
        if self.over_length not in OVER_LENGTH_POLICIES:
            raise ValueError(f"data.over_length={self.over_length!r}: allowed values are {list(OVER_LENGTH_POLICIES)}")
        for key in ("seq_len", "batch_size", "max_line_bytes", "max_messages"):
            if getattr(self, key) < 1:
                raise ValueError(f"data.{key}={getattr(self, key)} must be >= 1")
        if self.num_epochs is not None and self.num_epochs < 1:
            raise ValueError(f"data.num_epochs={self.num_epochs} must be >= 1 or None")
        if not 0.0 <= self.context_weight <= 1.0:
            raise ValueError(f"data.context_weight={self.context_weight} must be in [0, 1]")
        if not 0.0 <= self.copy_rate < 1.0:  # 1 would leave no trajectory to train on
            raise ValueError(f"data.copy_rate={self.copy_rate} must be in [0, 1)")
        if not 0.0 <= self.copy_digit_rate <= 1.0:
            raise ValueError(f"data.copy_digit_rate={self.copy_digit_rate} must be in [0, 1]")
        if self.copy_gap < 0:
            raise ValueError(f"data.copy_gap={self.copy_gap} must be >= 0")
        if self.unlikelihood_weight < 0:
            raise ValueError(f"data.unlikelihood_weight={self.unlikelihood_weight} must be >= 0")
        for key in ("unlikelihood_ngram", "unlikelihood_min_seen"):
            if getattr(self, key) < 1:
                raise ValueError(f"data.{key}={getattr(self, key)} must be >= 1")
        if self.packing_bins < 0 or self.num_threads < 0:
            raise ValueError("data.packing_bins and data.num_threads must be >= 0")

    @property
    def weighted(self) -> bool:
        """True when the loss mask holds float weights (context or unlikelihood weights), not 0/1 ints."""
        return bool(self.context_weight or self.unlikelihood_weight)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> DataConfig:
        """Builds a config from a mapping; an unknown key is an error that lists the known ones."""
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ValueError(f"unknown data config key(s) {unknown}; known keys: {known}")
        return cls(**values)


def open_source(
    paths: str | Path | Sequence[str | Path],
    *,
    skip_bad_lines: bool = False,
    max_line_bytes: int = MAX_LINE_BYTES,
    max_messages: int = MAX_MESSAGES,
) -> Sequence[Trajectory]:
    """A random-access sequence of trajectories: JSONL files (read now, within ``records.iter_jsonl``'s bounds) or
    one ArrayRecord dataset dir; raises ``InputError`` when the paths hold no trajectory."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    dirs = [p for p in paths if is_arrayrecord_dir(p)]
    if dirs:
        if len(paths) != 1:
            raise InputError(f"give either one ArrayRecord dataset directory or JSONL files, got {list(paths)}")
        records: Sequence[Trajectory] = open_arrayrecord(dirs[0])
    else:
        records = read_trajectories(
            paths, skip_bad_lines=skip_bad_lines, max_line_bytes=max_line_bytes, max_messages=max_messages
        )
    if not len(records):
        raise InputError(f"no trajectories in {[str(p) for p in paths]}")
    return records


def _untokenizable(record: Trajectory, error: ValueError) -> str:
    """``FILE:LINE: reason`` of a record that cannot be tokenized."""
    return f"{record.source or '(a record without a source)'}: {error}"


class _SkippedRecords:
    """The records a dataset skips because they cannot be tokenized, each named on stderr with the count so far the
    first time it is drawn (a later epoch draws it again). Thread-safe: grain's reader threads tokenize."""

    def __init__(self) -> None:
        self.sources: set[str] = set()
        self._lock = threading.Lock()

    def add(self, record: Trajectory, error: ValueError) -> None:
        """Counts a skipped record and names it with the reason on stderr, unless it was skipped before."""
        with self._lock:
            if record.source in self.sources:
                return
            self.sources.add(record.source)
            count = len(self.sources)
        print(
            f"skipped {count} record(s) that cannot be tokenized so far, the latest: {_untokenizable(record, error)}",
            file=sys.stderr,
        )


def _process(process_index: int | None, process_count: int | None) -> tuple[int, int]:
    """This process's index and the process count (jax's by default)."""
    index = jax.process_index() if process_index is None else process_index
    count = jax.process_count() if process_count is None else process_count
    if not 0 <= index < count:
        raise ValueError(f"process_index={index} must lie in [0, process_count={count})")
    return index, count


def tokenized_dataset(
    source: Sequence[Trajectory],
    tokenizer: Any,
    config: DataConfig,
    *,
    process_index: int | None = None,
    process_count: int | None = None,
) -> grain.MapDataset:
    """This process's shard of the source, shuffled per epoch, as shifted examples (see ``shift_example``)."""
    index, count = _process(process_index, process_count)
    if len(source) < count:
        raise ValueError(f"{len(source)} records cannot be sharded over {count} processes")
    ds = grain.MapDataset.source(source)[index::count]
    if config.shuffle:
        ds = ds.shuffle(seed=config.seed)
    ds = ds.repeat(config.num_epochs)
    pool = NamePool.read(config.name_pool) if config.name_pool else None

    def relabel(messages: Sequence[Message], rng: np.random.Generator) -> Sequence[Message]:
        if pool is not None:
            messages = permute_names(messages, rng, pool)
        return permute_digits(messages, rng) if config.permute_digits else messages

    skipped = _SkippedRecords()

    def tokenize(record: Trajectory, rng: np.random.Generator | None = None) -> dict[str, np.ndarray] | None:
        try:  # messages checked before relabelling, which reads them as canonical
            messages = normalize_messages(record.messages, require_assistant=False)
            ids, roles = token_roles(messages if rng is None else relabel(messages, rng), tokenizer)
        except ValueError as e:
            if not config.skip_bad_lines:
                raise InputError(f"{_untokenizable(record, e)} (set data.skip_bad_lines to skip such records)") from e
            skipped.add(record, e)
            return None  # grain leaves the record out
        return shift_example(ids, loss_weights(ids, roles, config))

    # random_map seeds each element's generator from (seed, position in the repeated dataset): a fresh
    # relabelling every epoch, and the same one again when a resumed run replays that position.
    relabelled = config.permute_digits or pool is not None
    examples = ds.random_map(tokenize, seed=config.seed) if relabelled else ds.map(tokenize)
    if not config.copy_rate:
        return examples
    return grain.MapDataset.mix(
        [examples, copy_examples(tokenizer, config, index)], [1.0 - config.copy_rate, config.copy_rate]
    )


def loss_weights(ids: np.ndarray, roles: np.ndarray, config: DataConfig) -> np.ndarray:
    """Each token's loss weight (`[tokens]`, float32 when `config.weighted`, else 0/1 int32): 1 on trained turns,
    `context_weight` on context, -`unlikelihood_weight` on a rejected turn's repeats, 0 on the rest. The context of
    a conversation with a rejected turn gets no weight: after a loop it holds the loop's fallout (format-error
    notes, the results of a looping query), which a policy that learns from context would learn to write."""
    if not config.weighted:
        return (roles == TRAINED).astype(np.int32)
    rejected = roles == REJECTED  # [tokens]
    repeats = (
        repeated_ngrams(ids, roles, config.unlikelihood_ngram, config.unlikelihood_min_seen)
        if config.unlikelihood_weight
        else np.zeros(ids.shape, dtype=bool)
    )  # [tokens]
    context = 0.0 if rejected.any() else config.context_weight
    weights = np.select(
        [roles == TRAINED, repeats, (roles == UNTRAINED) | rejected], [1.0, -config.unlikelihood_weight, 0.0], context
    )  # no context loss on turns
    return weights.astype(np.float32)


def copy_examples(tokenizer: Any, config: DataConfig, process_index: int = 0) -> grain.MapDataset:
    """An endless dataset of shifted copy-task examples (`data.copies`) over the tokenizer's ordinary ids, shaped by
    `config.copy_digit_rate` and `config.copy_gap`, weighted like agent tokens; each process draws its own."""
    vocab = ordinary_ids(tokenizer)
    digits = digit_ids(tokenizer) if config.copy_digit_rate else None
    dtype = np.float32 if config.weighted else np.int32  # the trajectories' loss-mask type, for packing

    def example(_, rng: np.random.Generator) -> dict[str, np.ndarray]:
        shape = copy_shape(rng, digit_rate=config.copy_digit_rate, max_gap=config.copy_gap)
        ids, mask = copy_tokens(rng, shape, vocab, digits)
        return shift_example(ids, mask.astype(dtype))

    seed = int(np.random.SeedSequence([config.seed, process_index, 1]).generate_state(1)[0])
    return grain.MapDataset.range(sys.maxsize).random_map(example, seed=seed)


def batch_dataset(
    source: Sequence[Trajectory],
    tokenizer: Any,
    config: DataConfig,
    *,
    process_index: int | None = None,
    process_count: int | None = None,
) -> grain.IterDataset:
    """Packed batches for this process: ``ROW_KEYS`` each [rows, seq], ``num_dropped``/``num_truncated`` [rows]."""
    _, count = _process(process_index, process_count)
    if config.batch_size % count:
        raise ValueError(f"data.batch_size={config.batch_size} must divide evenly over {count} processes")
    rows = config.batch_size // count
    examples = tokenized_dataset(
        source, tokenizer, config, process_index=process_index, process_count=process_count
    ).to_iter_dataset(grain.ReadOptions(num_threads=config.num_threads, prefetch_buffer_size=4 * rows))
    packed = pack_rows(
        examples,
        seq_len=config.seq_len,
        over_length=config.over_length,
        num_bins=config.packing_bins or rows,
    )
    return packed.batch(rows, drop_remainder=True)


def batch_iterator(
    source: Sequence[Trajectory],
    tokenizer: Any,
    config: DataConfig,
    *,
    process_index: int | None = None,
    process_count: int | None = None,
) -> grain.DatasetIterator:
    """An iterator of packed batches with ``get_state()`` / ``set_state()`` for checkpoints."""
    return iter(batch_dataset(source, tokenizer, config, process_index=process_index, process_count=process_count))


def place_on_mesh(
    batch: Mapping[str, np.ndarray], sharding: jax.sharding.Sharding, keys: Sequence[str] = ROW_KEYS
) -> dict[str, jax.Array]:
    """Global arrays from this process's rows: the ``keys`` of ``batch`` ([rows, seq] each) placed with ``sharding``.

    The global batch stacks every process's rows along the first axis
    (``jax.make_array_from_process_local_data``).
    """
    missing = [k for k in keys if k not in batch]
    if missing:
        raise KeyError(f"batch lacks {missing}; it has {sorted(batch)}")
    return {k: jax.make_array_from_process_local_data(sharding, np.asarray(batch[k])) for k in keys}
