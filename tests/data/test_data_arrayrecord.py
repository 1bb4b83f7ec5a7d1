"""ArrayRecord round trip: JSONL → tfds ArrayRecord dataset (no TensorFlow) → the same trajectories and batches."""

import numpy as np
import pytest

from jaxseeker.data import (
    BadLineError,
    DataConfig,
    batch_iterator,
    build_arrayrecord,
    open_arrayrecord,
    open_source,
    read_trajectories,
)
from jaxseeker.errors import InputError

from .samples import make_records


@pytest.fixture
def jsonl_files(write_jsonl):
    records = make_records(10, seed=5)
    return [write_jsonl("a.jsonl", records[:6]), write_jsonl("b.jsonl", records[6:] + ["{bad"])]


def test_round_trip_gives_back_the_records(jsonl_files, tmp_path):
    dataset_dir, skipped = build_arrayrecord(jsonl_files, tmp_path / "ds", skip_bad_lines=True, num_shards=2)
    assert [str(b) for b in skipped] == [
        f"{jsonl_files[1]}:5: invalid JSON: Expecting property name enclosed in double quotes (column 2)"
    ]
    assert len(list(dataset_dir.glob("*.array_record-*"))) == 2
    assert (dataset_dir / "features.json").is_file()

    stored = open_arrayrecord(tmp_path / "ds")
    original = read_trajectories(jsonl_files, skip_bad_lines=True)
    assert len(stored) == len(original) == 10
    for i in (0, 7, 3):  # random access
        assert stored[i] == original[i]


def test_pipeline_reads_the_dataset_like_the_jsonl(jsonl_files, tmp_path, qwen_tokenizer):
    build_arrayrecord(jsonl_files, tmp_path / "ds", skip_bad_lines=True)
    config = DataConfig(seq_len=256, batch_size=2, seed=1)
    for index in (0, 1):  # each host reads its own shard
        from_jsonl = batch_iterator(
            open_source(jsonl_files, skip_bad_lines=True), qwen_tokenizer, config, process_index=index, process_count=2
        )
        from_records = batch_iterator(
            open_source(tmp_path / "ds"), qwen_tokenizer, config, process_index=index, process_count=2
        )
        for _ in range(3):
            a, b = next(from_jsonl), next(from_records)
            assert all(np.array_equal(a[k], b[k]) for k in a)


def test_bad_lines_fail_the_build_and_an_existing_dataset_is_not_overwritten(jsonl_files, tmp_path):
    with pytest.raises(BadLineError, match="b.jsonl:5: invalid JSON"):
        build_arrayrecord(jsonl_files, tmp_path / "ds")
    build_arrayrecord(jsonl_files[:1], tmp_path / "ds")
    with pytest.raises(FileExistsError, match="already holds"):
        build_arrayrecord(jsonl_files[:1], tmp_path / "ds")
    with pytest.raises(FileNotFoundError, match="no dataset_info.json"):
        open_arrayrecord(tmp_path)


def test_input_errors_name_the_files_and_odd_meta_survives(write_jsonl, tmp_path):
    empty = write_jsonl("empty.jsonl", ["", "  "])
    for call in (lambda: build_arrayrecord([empty], tmp_path / "none"), lambda: open_source(empty)):
        with pytest.raises(InputError, match=f"no trajectories in \\['{empty}'\\]"):
            call()
    odd = write_jsonl(
        "odd.jsonl",
        ['{"id": "x\\ud800", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}'],
    )
    build_arrayrecord([odd], tmp_path / "ds", split="val")
    assert open_arrayrecord(tmp_path / "ds", "val")[0] == read_trajectories(odd)[0]
    with pytest.raises(InputError, match="no split 'train'; splits are \\['val'\\]"):
        open_source(tmp_path / "ds")
    with pytest.raises(InputError, match="give either one ArrayRecord dataset directory or JSONL files"):
        open_source([tmp_path / "ds", odd])
