"""Trajectories as a tensorflow-datasets dataset in ArrayRecord format, written and read without TensorFlow.

``build_arrayrecord`` writes ``OUT/jaxseeker_trajectories/1.0.0/`` (``dataset_info.json``,
``features.json`` and ``…-train.array_record-0000i-of-0000n`` shards) through a small
``tfds.core.GeneratorBasedBuilder``; ``store_as_tfds_dataset`` is not used because it probes for
``tf.data.Dataset`` and so imports TensorFlow. Each example holds the canonical messages and the
record's other keys as JSON text, so one dataset serves any tokenizer. ``open_arrayrecord`` gives
random access (``tfds``' ArrayRecord data source); the pipeline shards it by process index.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import tensorflow_datasets as tfds

from jaxseeker.data.records import MAX_MESSAGES, BadLine, BadLineError, Trajectory, iter_jsonl
from jaxseeker.errors import InputError
from jaxseeker.jsonl import MAX_LINE_BYTES

DATASET_NAME = "jaxseeker_trajectories"
VERSION = "1.0.0"


def _features() -> tfds.features.FeaturesDict:
    """Example layout: canonical messages, other keys and origin, each as text."""
    return tfds.features.FeaturesDict(
        {
            "messages": tfds.features.Text(doc="JSON list of canonical {role, content} messages"),
            "meta": tfds.features.Text(doc="JSON object of the record's other keys"),
            "source": tfds.features.Text(doc="FILE:LINE the record was read from"),
        }
    )


class _TrajectoryBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """Ad-hoc builder over an in-memory list of examples (no TensorFlow needed)."""

    name = DATASET_NAME
    VERSION = tfds.core.Version(VERSION)
    # No downloads and no checksums file: tfds would otherwise look for one next to this module's
    # source through importlib resources, which fails for namespace and editable installs.
    url_infos = None

    def __init__(self, *, split: str, examples: Sequence[dict[str, str]], **kwargs: Any):
        self._split = split
        self._examples = examples
        super().__init__(**kwargs)

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description="Agent trajectories in canonical chatml messages (jaxseeker).",
            features=_features(),
            disable_shuffling=True,
        )

    def _split_generators(self, dl_manager: Any) -> dict[str, Iterator[tuple[int, dict[str, str]]]]:
        del dl_manager
        return {self._split: enumerate(self._examples)}

    def _generate_examples(self, **kwargs: Any) -> Iterator[tuple[int, dict[str, str]]]:
        raise NotImplementedError("examples come from _split_generators")


def _example(trajectory: Trajectory) -> dict[str, str]:
    """The stored form of one trajectory."""
    return {
        "messages": json.dumps(list(trajectory.messages), ensure_ascii=False),
        "meta": json.dumps(dict(trajectory.meta)),  # ASCII escapes: a lone surrogate in a value survives UTF-8
        "source": trajectory.source,
    }


def build_arrayrecord(
    paths: Sequence[str | Path],
    out_dir: str | Path,
    *,
    split: str = "train",
    skip_bad_lines: bool = False,
    num_shards: int | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
    max_messages: int = MAX_MESSAGES,
) -> tuple[Path, list[BadLine]]:
    """Writes JSONL trajectories as a tfds ArrayRecord dataset; returns its directory and the skipped bad lines
    (``records.iter_jsonl``'s, with its bounds on line size and messages)."""
    examples: list[dict[str, str]] = []
    bad: list[BadLine] = []
    for path in paths:
        for item in iter_jsonl(path, max_line_bytes=max_line_bytes, max_messages=max_messages):
            if isinstance(item, BadLine):
                bad.append(item)
            else:
                examples.append(_example(item))
    if bad and not skip_bad_lines:
        raise BadLineError(bad)
    if not examples:
        raise InputError(f"no trajectories in {[str(p) for p in paths]}")
    builder = _TrajectoryBuilder(split=split, examples=examples, data_dir=str(out_dir), file_format="array_record")
    if builder.is_prepared():
        raise FileExistsError(f"{builder.data_dir} already holds a built dataset; choose another --out")
    # tfds prints its banner to stdout; keep stdout for the command's JSON summary.
    with tempfile.TemporaryDirectory() as downloads, contextlib.redirect_stdout(sys.stderr):
        builder.download_and_prepare(
            download_dir=downloads,
            download_config=tfds.download.DownloadConfig(num_shards=num_shards),
        )
    return Path(builder.data_dir), bad


def _dataset_dir(path: str | Path) -> Path | None:
    """The versioned dataset directory at or under ``path`` (the one holding dataset_info.json), if any."""
    path = Path(path)
    if (path / "dataset_info.json").is_file():
        return path
    found = sorted(path.glob(f"{DATASET_NAME}/*/dataset_info.json")) if path.is_dir() else []
    return found[-1].parent if found else None


def is_arrayrecord_dir(path: str | Path) -> bool:
    """True if ``path`` is (or contains) a dataset written by ``build_arrayrecord``."""
    return _dataset_dir(path) is not None


class ArrayRecordTrajectories(Sequence[Trajectory]):
    """Random-access trajectories of one split of an ArrayRecord dataset."""

    def __init__(self, path: str | Path, split: str = "train"):
        dataset_dir = _dataset_dir(path)
        if dataset_dir is None:
            raise FileNotFoundError(f"{path}: no dataset_info.json (expected the --out dir of `jaxseeker data build`)")
        builder = tfds.builder_from_directory(str(dataset_dir))
        if split not in builder.info.splits:
            raise InputError(f"{dataset_dir}: no split {split!r}; splits are {list(builder.info.splits)}")
        self.path = dataset_dir
        self._source = builder.as_data_source(split=split)

    def __len__(self) -> int:
        return len(self._source)

    def __getitem__(self, index: int) -> Trajectory:  # type: ignore[override]
        example = self._source[index]
        return Trajectory(
            messages=tuple(json.loads(example["messages"])),
            meta=json.loads(example["meta"]),
            source=example["source"].decode("utf-8"),
        )


def open_arrayrecord(path: str | Path, split: str = "train") -> ArrayRecordTrajectories:
    """Opens a dataset written by ``build_arrayrecord`` (its --out dir or the versioned dir under it)."""
    return ArrayRecordTrajectories(path, split)
