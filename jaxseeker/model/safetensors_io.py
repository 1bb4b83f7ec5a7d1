"""Reading and writing safetensors files as numpy, bf16 included.

Written here rather than with `safetensors.numpy` because that cannot read or write bfloat16; the format
is an 8-byte header length, a JSON header and raw little-endian bytes, so memory-mapped reads are simple
and never hold a second copy of the file.
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Iterable
from pathlib import Path

import ml_dtypes
import numpy as np

from jaxseeker.errors import InputError

DTYPES = {
    "F64": np.dtype(np.float64),
    "F32": np.dtype(np.float32),
    "F16": np.dtype(np.float16),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "I64": np.dtype(np.int64),
    "I32": np.dtype(np.int32),
    "I16": np.dtype(np.int16),
    "I8": np.dtype(np.int8),
    "U8": np.dtype(np.uint8),
    "BOOL": np.dtype(np.bool_),
}
NAMES = {v: k for k, v in DTYPES.items()}
INDEX_FILE = "model.safetensors.index.json"


class SafetensorsError(InputError):
    """A safetensors file or index is malformed or lacks a tensor."""


def read_header(path: Path) -> tuple[dict, int]:
    """The JSON header of a safetensors file and the byte offset where its data starts."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise SafetensorsError(f"{path}: too short to be a safetensors file")
        (n,) = struct.unpack("<Q", raw)
        if n > os.fstat(f.fileno()).st_size - 8:
            raise SafetensorsError(f"{path}: header length {n} exceeds the file (truncated or not safetensors)")
        try:
            header = json.loads(f.read(n))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise SafetensorsError(f"{path}: unreadable header: {e}") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: header is not a JSON object")
    return header, 8 + n


def _weight_map(index: Path) -> dict[str, str]:
    try:
        weight_map = json.loads(index.read_text()).get("weight_map")
    except json.JSONDecodeError as e:
        raise SafetensorsError(f"{index}:{e.lineno}: invalid JSON: {e.msg}") from None
    except AttributeError:
        weight_map = None
    if not isinstance(weight_map, dict):
        raise SafetensorsError(f"{index}: expected an object with a 'weight_map' object")
    return weight_map


class TensorReader:
    """Memory-mapped access by name to the tensors of a checkpoint directory (one file or sharded + index)."""

    def __init__(self, directory: str | Path):
        directory = Path(directory)
        self.directory = directory
        self.read: set[str] = set()  # the names `get` has returned
        index = directory / INDEX_FILE
        if index.exists():
            files = sorted(set(_weight_map(index).values()))
            for name in files:
                if not (directory / name).is_file():
                    raise SafetensorsError(f"{index}: names shard '{name}', which is missing")
        else:
            files = sorted(p.name for p in directory.glob("*.safetensors"))
            if not files:
                raise SafetensorsError(f"{directory}: no *.safetensors files")
        self._where: dict[str, tuple[np.memmap, dict, int, Path]] = {}
        for name in files:
            path = directory / name
            header, start = read_header(path)
            mm = np.memmap(path, dtype=np.uint8, mode="r")
            for key, info in header.items():
                if key == "__metadata__":
                    continue
                if key in self._where:
                    raise SafetensorsError(f"{path}: tensor '{key}' is also in {self._where[key][3]}")
                self._where[key] = (mm, info, start, path)

    def __contains__(self, name: str) -> bool:
        return name in self._where

    def names(self) -> list[str]:
        """All tensor names."""
        return list(self._where)

    def get(self, name: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
        """A read-only array view of tensor `name`; given `shape`, a float tensor of exactly that shape."""
        if name not in self._where:
            raise SafetensorsError(f"{self.directory}: checkpoint lacks tensor '{name}'")
        mm, info, start, path = self._where[name]
        try:
            kind, dims, (lo, hi) = info["dtype"], tuple(info["shape"]), info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise SafetensorsError(f"{path}: tensor '{name}' has a malformed header entry {info}") from None
        if kind not in DTYPES:
            raise SafetensorsError(f"{path}: tensor '{name}' has unsupported dtype {kind}")
        if not 0 <= lo <= hi <= mm.size - start or hi - lo != math.prod(dims) * DTYPES[kind].itemsize:
            raise SafetensorsError(
                f"{path}: tensor '{name}' ({kind} {list(dims)}) has data_offsets [{lo}, {hi}] "
                f"that do not fit it or the file ({mm.size - start} data bytes; truncated?)"
            )
        if shape is not None and (dims != tuple(shape) or kind not in ("F64", "F32", "F16", "BF16")):
            raise SafetensorsError(f"{path}: tensor '{name}' is {kind} {list(dims)}, expected a float {list(shape)}")
        self.read.add(name)
        return mm[start + lo : start + hi].view(DTYPES[kind]).reshape(dims)


def write_file(path: Path, tensors: dict[str, np.ndarray], metadata: dict[str, str] | None = None) -> None:
    """Write `tensors` to one safetensors file (8-byte aligned header, data in name order)."""
    header: dict = {"__metadata__": metadata or {"format": "pt"}}
    offset = 0
    for name, arr in tensors.items():
        nbytes = arr.nbytes
        header[name] = {"dtype": NAMES[arr.dtype], "shape": list(arr.shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for arr in tensors.values():
            f.write(np.ascontiguousarray(arr).tobytes())


def write_sharded(directory: Path, tensors: Iterable[tuple[str, np.ndarray]], max_shard_bytes: int) -> list[str]:
    """Write `tensors`, (name, array) pairs in file order, as `model.safetensors`, or as numbered shards plus an
    index when over `max_shard_bytes`. The pairs are drawn one shard at a time and each shard is written before
    the next is drawn, so a lazy iterable holds at most one shard's arrays in memory."""
    written: list[tuple[Path, list[str]]] = []  # (temporary file, its tensor names)
    shard: dict[str, np.ndarray] = {}
    size = total = 0

    def flush() -> None:
        path = directory / f".shard-{len(written) + 1:05d}.safetensors.partial"
        write_file(path, shard)
        written.append((path, list(shard)))

    for name, arr in tensors:
        if shard and size + arr.nbytes > max_shard_bytes:
            flush()
            shard, size = {}, 0
        shard[name] = arr
        size += arr.nbytes
        total += arr.nbytes
    flush()
    if len(written) == 1:
        written[0][0].rename(directory / "model.safetensors")
        return ["model.safetensors"]
    names = [f"model-{i + 1:05d}-of-{len(written):05d}.safetensors" for i in range(len(written))]
    weight_map = {}
    for fname, (path, shard_names) in zip(names, written):
        path.rename(directory / fname)
        weight_map.update({k: fname for k in shard_names})
    (directory / INDEX_FILE).write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2)
    )
    return names
