"""Sharded safetensors writing: shards by size, an index, and one shard in memory at a time."""

import json

import numpy as np

from jaxseeker.model.safetensors_io import INDEX_FILE, TensorReader, write_sharded


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
