"""Sharded safetensors writing: shards by size, an index, and one shard in memory at a time."""

import json
import struct

import numpy as np
import pytest

from jaxseeker.model.safetensors_io import (
    INDEX_FILE,
    SafetensorsError,
    TensorReader,
    write_file,
    write_sharded,
)


def test_write_sharded_writes_each_shard_before_drawing_the_next_tensors(tmp_path):
    tensors = {f"layers.{i}.weight": np.full((4, 8), i, np.float32) for i in range(7)}  # 128 bytes each
    on_disk_when_drawn = []

    def lazily():
        for name, arr in tensors.items():
            on_disk_when_drawn.append(len(list(tmp_path.glob("*.safetensors*"))))
            yield name, arr

    names = write_sharded(tmp_path, lazily(), max_shard_bytes=300)  # two tensors a shard
    assert names == [f"model-0000{i}-of-00004.safetensors" for i in range(1, 5)]
    assert on_disk_when_drawn == [0, 0, 0, 1, 1, 2, 2]  # never more than a shard and one tensor in memory
    index = json.loads((tmp_path / INDEX_FILE).read_text())
    assert index["metadata"]["total_size"] == 7 * 128 and index["weight_map"]["layers.6.weight"] == names[-1]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*names, INDEX_FILE])  # no partial file left
    reader = TensorReader(tmp_path)
    for name, arr in tensors.items():
        np.testing.assert_array_equal(reader.get(name), arr)


def test_a_model_under_the_shard_size_is_one_file(tmp_path):
    names = write_sharded(tmp_path, iter([("w", np.ones(3, np.float32))]), max_shard_bytes=1 << 20)
    assert names == ["model.safetensors"]
    assert [p.name for p in tmp_path.iterdir()] == ["model.safetensors"]
    np.testing.assert_array_equal(TensorReader(tmp_path).get("w"), np.ones(3, np.float32))


def test_a_truncated_file_names_the_file_and_tensor(tmp_path):
    write_file(tmp_path / "model.safetensors", {"a": np.ones(8, np.float32), "b": np.ones(8, np.float32)})
    data = (tmp_path / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(data[:-4])
    with pytest.raises(SafetensorsError, match=r"model.safetensors: tensor 'b' \(F32 \[8\]\) has data_offsets"):
        TensorReader(tmp_path).get("b")
    (tmp_path / "model.safetensors").write_bytes(data[:40])  # cut inside the header
    with pytest.raises(SafetensorsError, match=r"model.safetensors: header length \d+ exceeds the file"):
        TensorReader(tmp_path)


def test_a_header_that_is_not_an_object_is_refused(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", 2) + b"[]")
    with pytest.raises(SafetensorsError, match=r"model.safetensors: header is not a JSON object"):
        TensorReader(tmp_path)


def test_a_bad_index_is_named(tmp_path):
    write_sharded(tmp_path, iter([("a", np.ones(8, np.float32)), ("b", np.ones(8, np.float32))]), max_shard_bytes=40)
    (tmp_path / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(
        SafetensorsError,
        match=rf"{INDEX_FILE}: names shard 'model-00002-of-00002.safetensors', "
        "which is missing",
    ):
        TensorReader(tmp_path)
    (tmp_path / INDEX_FILE).write_text("[]")
    with pytest.raises(SafetensorsError, match=rf"{INDEX_FILE}: expected an object with a 'weight_map' object"):
        TensorReader(tmp_path)


def test_a_tensor_in_two_files_is_refused(tmp_path):
    write_file(tmp_path / "model.safetensors", {"w": np.ones(2, np.float32)})
    write_file(tmp_path / "consolidated.safetensors", {"w": np.zeros(2, np.float32)})
    with pytest.raises(SafetensorsError, match=r"model.safetensors: tensor 'w' is also in .*consolidated.safetensors"):
        TensorReader(tmp_path)
