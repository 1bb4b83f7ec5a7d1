"""`jaxseeker world build` / `world info` through argparse, as the CLI wires them."""

import argparse
import re
import shutil

import pytest
from cli_support import usage_error

from jaxseeker.cli import main
from jaxseeker.world import command, load_world, save_world, synthetic_world
from jaxseeker.world.synthetic import MIN_SIZE


def parse(argv):
    parser = argparse.ArgumentParser(prog="jaxseeker")
    command.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_build_to_a_directory_then_info(tmp_path, capsys):
    args = parse(["world", "build", "--size", "200", "--seed", "5", "--out", str(tmp_path / "w")])
    assert args.func(args) == 0
    assert len(load_world(tmp_path / "w")) == 200
    args = parse(["world", "info", str(tmp_path / "w"), "--search", "University"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "200 entities" in out and "University" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["world", "info", "synthetic:abc"],
            r"world spec 'synthetic:abc': expected synthetic\[:SIZE\[:SEED\]\] with integers",
        ),
        (["world", "info", "synthetic:0"], r"world.size: 0 is too small for a synthetic world"),
        (["world", "info", "nowhere:1"], r"cannot open world 'nowhere:1': give a saved world directory"),
        (["world", "info", "atlas:ZZ"], r"unknown country codes: \['ZZ'\]"),
        (["world", "build", "--source", "pages"], r"source 'pages' needs path= \(`--pages FILE`"),
    ],
)
def test_a_bad_world_spec_or_size_ends_the_command_in_one_line(tmp_path, argv, message):
    with pytest.raises(SystemExit, match=rf"^jaxseeker world: {message}"):
        main([*argv, "--cache-dir", str(tmp_path)])


def test_a_bad_pages_line_or_out_path_ends_the_command_in_one_line(tmp_path):
    pages = tmp_path / "p.jsonl"
    pages.write_text('{"url": "a", "title": "A", "text": "x"}\nnot json\n')
    bad_line = re.escape(f"{pages}:2: invalid JSON") + r".*`world build --skip-bad-lines`"
    with pytest.raises(SystemExit, match=rf"^jaxseeker world: {bad_line}"):
        main(["world", "info", f"pages:{pages}", "--cache-dir", str(tmp_path / "cache")])
    file = tmp_path / "file"
    file.write_text("")
    for out, message in (
        (file, f"--out {file}: is a file, not a directory"),
        (file / "w", f"--out {file / 'w'}: {file} is a file, not a directory"),
    ):
        with pytest.raises(SystemExit, match=rf"^jaxseeker world: {re.escape(message)}$"):
            main(["world", "build", "--size", "200", "--out", str(out)])


def test_a_damaged_saved_world_is_named_by_file_and_line(tmp_path):
    save_world(synthetic_world(200, seed=1), tmp_path / "w")
    for k, (name, content, message) in enumerate(
        [
            ("world.json", b"{not json", "world.json: not a JSON file"),
            ("world.json", b"[1]", "world.json: expected a JSON object, got list"),
            ("pages.jsonl", b'{"url": "u"}\n', "pages.jsonl:1: page is missing key 'title'"),
            ("entities.jsonl", b"\xff\n", "entities.jsonl:1: not UTF-8"),
        ]
    ):
        d = shutil.copytree(tmp_path / "w", tmp_path / f"damaged{k}")
        (d / name).write_bytes(content)
        with pytest.raises(SystemExit, match=rf"^jaxseeker world: {re.escape(str(d / message))}"):
            main(["world", "info", str(d)])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--size", str(MIN_SIZE - 1)], f"--size: must be an integer >= {MIN_SIZE}, got {MIN_SIZE - 1}"),
        (["--size", "-3"], f"--size: must be an integer >= {MIN_SIZE}, got -3"),
        (["--seed", "-1"], "--seed: must be an integer >= 0, got -1"),
    ],
)
def test_world_build_numbers_out_of_range_are_usage_errors(argv, message, capsys):
    assert usage_error(["world", "build", *argv], capsys) == f"jaxseeker world build: error: argument {message}"
