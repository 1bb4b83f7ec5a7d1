"""Every example a `--help` gives runs: each shipped recipe a `--config` help names is one of the command's kind
and validates (`jaxseeker plan`), each `jaxseeker …` line of a help runs as `--dry-run` where the command has one
(parses otherwise), and the small recipes run for real."""

import argparse
import json
import re
import shlex

import pytest

from jaxseeker.cli import build_parser, main
from jaxseeker.train.recipe import read_recipe, recipe_kind, shipped_configs

KIND = {"sft": "sft", "rl": "rl", "pipeline": "pipeline", "eval": "pipeline", "bench rollout": "pipeline", "plan": None}


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command words, parser) of every command and subcommand under `parser`."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


COMMANDS = list(commands(build_parser()))


def config_examples():
    """(command, recipe name) for each shipped recipe a `--config` help names."""
    for path, parser in COMMANDS:
        for action in parser._actions:
            if "--config" in action.option_strings:
                listed = re.search(r"\(e\.g\. ([^)]*)\)", action.help or "")
                for name in listed.group(1).split(", ") if listed else ():
                    yield " ".join(path), name


def help_lines():
    """Every `jaxseeker …` line of every help, as argv."""
    for _, parser in COMMANDS:
        for line in parser.format_help().splitlines():
            found = re.match(r"\s*(jaxseeker (?:\S+ ?)+?)(?:\s{2,}|$)", line)
            if found:
                yield shlex.split(found.group(1))[1:]


def test_every_config_help_names_shipped_recipes():
    examples = list(config_examples())
    assert {c for c, _ in examples} == set(KIND)  # every command that reads a recipe names some
    for command, name in examples:
        assert name in shipped_configs(), (command, name)
        assert KIND[command] in (None, recipe_kind(read_recipe(name))), (command, name)


@pytest.mark.parametrize("name", sorted({name for _, name in config_examples()}))
def test_every_recipe_a_help_names_validates(name, capsys):
    assert main(["plan", "--config", name]) == 0  # the planner checks every section and key of the recipe
    assert name in capsys.readouterr().out


def test_every_help_line_runs_as_a_dry_run_or_parses(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    lines = list(help_lines())
    assert len(lines) >= 4
    parser = build_parser()
    for argv in lines:
        args = parser.parse_args(argv)
        if argv[0] == "plan":
            assert main(argv) == 0
        elif any("--dry-run" in a.option_strings for a in parser._innermost(args)._actions):
            assert main([*argv, "--dry-run"]) == 0, argv


def test_the_tiny_recipes_run(tmp_path, monkeypatch, capsys):
    """sft_tiny on the quick pipeline's trajectories and tokenizer, as its comments say to make them."""
    monkeypatch.chdir(tmp_path)
    assert main(["pipeline", "--config", "demo", "--quick", "--until", "tokenizer", "--no-progress"]) == 0
    assert main(["sft", "--config", "sft_tiny", "--set", "train.steps=2"]) == 0
    summary = json.loads((tmp_path / "runs" / "sft_tiny" / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["final_loss"] > 0 and summary["trained_tokens"] > 0
