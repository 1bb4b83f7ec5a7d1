"""`jaxseeker data inspect|build` through the argparse wiring the CLI uses."""

import argparse
import json

import pytest
from cli_support import usage_error

from jaxseeker.data import open_arrayrecord
from jaxseeker.data.command import add_parser

from .samples import make_records


def _run(argv):
    parser = argparse.ArgumentParser(prog="jaxseeker")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_inspect_prints_json_and_lists_bad_lines(write_jsonl, tokenizer_dirs, capsys):
    path = write_jsonl("t.jsonl", make_records(3) + ["not json"])
    assert _run(["data", "inspect", path, "--tokenizer", str(tokenizer_dirs["chatml"])]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["records"] == 3 and summary["tokens"] > 0
    assert summary["bad_lines"][0].startswith(f"{path}:4: invalid JSON")


def test_build_writes_a_readable_dataset(write_jsonl, tmp_path, capsys):
    path = write_jsonl("t.jsonl", make_records(4) + ["{bad"])
    assert _run(["data", "build", path, "--out", str(tmp_path / "ds")]) == 1
    assert f"{path}:5: invalid JSON" in capsys.readouterr().err

    assert _run(["data", "build", path, "--out", str(tmp_path / "ds"), "--skip-bad-lines"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["records"] == 4 and out["skipped_bad_lines"] == 1
    assert len(open_arrayrecord(out["dataset_dir"])) == 4


def test_build_into_a_built_dataset_is_refused_in_one_line(write_jsonl, tmp_path, capsys):
    path = write_jsonl("t.jsonl", make_records(2))
    assert _run(["data", "build", path, "--out", str(tmp_path / "ds")]) == 0
    capsys.readouterr()
    assert _run(["data", "build", path, "--out", str(tmp_path / "ds")]) == 1
    assert "already holds a built dataset; choose another --out" in capsys.readouterr().err


@pytest.mark.parametrize("shards", ["0", "-1"])
def test_build_num_shards_out_of_range_is_a_usage_error(shards, capsys):
    assert usage_error(["data", "build", "t.jsonl", "--out", "ds", "--num-shards", shards], capsys) == (
        f"jaxseeker data build: error: argument --num-shards: must be an integer >= 1, got {shards}"
    )


def test_inspect_bounds_can_be_raised_or_lowered(write_jsonl, tokenizer_dirs, capsys):
    path = write_jsonl("t.jsonl", make_records(2))
    tokenizer = ["--tokenizer", str(tokenizer_dirs["chatml"])]
    assert _run(["data", "inspect", path, *tokenizer, "--max-messages", "2", "--max-line-bytes", "100000"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["records"] == 0 and len(summary["bad_lines"]) == 2
    assert (
        summary["bad_lines"][0].startswith(f"{path}:1: ")
        and "over the limit of 2 (max_messages)" in summary["bad_lines"][0]
    )
    assert _run(["data", "inspect", path, *tokenizer, "--max-line-bytes", "20"]) == 0
    assert json.loads(capsys.readouterr().out)["bad_lines"][1].startswith(f"{path}:2: a line of ")
    assert usage_error(["data", "inspect", path, *tokenizer, "--max-messages", "0"], capsys) == (
        "jaxseeker data inspect: error: argument --max-messages: must be an integer >= 1, got 0"
    )
