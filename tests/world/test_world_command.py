"""`jaxseeker world build` / `world info` through argparse, as the CLI wires them."""

import argparse

from jaxseeker.world import command, load_world


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
