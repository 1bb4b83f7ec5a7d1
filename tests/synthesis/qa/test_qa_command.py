"""`jaxseeker synth RECIPE …` through argparse, as the CLI wires it: JSONL out, summary, plots."""

import argparse
import re

import pytest
from cli_support import usage_error

from jaxseeker.cli import main
from jaxseeker.synthesis.qa import command, read_jsonl


def parse(argv):
    parser = argparse.ArgumentParser(prog="jaxseeker")
    command.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_synth_writes_questions_summary_and_plots(tmp_path, capsys):
    args = parse(
        [
            "synth",
            "sailorfog",
            "--world",
            "synthetic:400:2",
            "--n",
            "5",
            "--out",
            str(tmp_path / "q.jsonl"),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--plots",
            str(tmp_path / "plots"),
        ]
    )
    assert args.func(args) == 0
    records = list(read_jsonl(tmp_path / "q.jsonl"))
    assert len(records) == 5 and all(r.tag == "sailorfog" for r in records)
    out = capsys.readouterr().out
    assert "5 questions" in out and "reference solver pass rate" in out
    assert (tmp_path / "plots" / "sailorfog_levels.png").exists()


def test_synth_apart_writes_questions_on_entities_the_files_never_use(tmp_path, capsys):
    first, fresh = tmp_path / "train.jsonl", tmp_path / "test2.jsonl"
    common = ["--world", "synthetic:400:2", "--cache-dir", str(tmp_path / "cache"), "--no-solver"]
    args = parse(["synth", "e2hqa", *common, "--n", "40", "--rounds", "0", "1", "--out", str(first)])
    assert args.func(args) == 0
    args = parse(
        [
            "synth",
            "e2hqa",
            *common,
            "--n",
            "10",
            "--seed",
            "1",
            "--rounds",
            "0",
            "1",
            "--apart",
            str(first),
            "--out",
            str(fresh),
        ]
    )
    assert args.func(args) == 0
    assert "shares an evidence entity" in capsys.readouterr().out
    used = {e for r in read_jsonl(first) for e in r.meta["entities"]}
    records = list(read_jsonl(fresh))
    assert len(records) == 10 and not any(set(r.meta["entities"]) & used for r in records)
    assert {r.meta["rounds"] for r in records} <= {0, 1}


def test_synth_rounds_must_be_ordered(tmp_path):
    with pytest.raises(SystemExit, match="^jaxseeker synth: --rounds MIN MAX needs 0 <= MIN <= MAX, got 2 1$"):
        main(
            [
                "synth",
                "e2hqa",
                "--n",
                "1",
                "--rounds",
                "2",
                "1",
                "--out",
                str(tmp_path / "q.jsonl"),
                "--cache-dir",
                str(tmp_path / "cache"),
            ]
        )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--out", "{tmp}"], "--out {tmp}: is a directory, not a file"),
        (["--out", "{tmp}/file/q.jsonl"], "--out {tmp}/file/q.jsonl: {tmp}/file is a file, not a directory"),
        (["--plots", "{tmp}/file"], "--plots {tmp}/file: is a file, not a directory"),
        (["--apart", "{tmp}/file"], "{tmp}/file:1: bad QA record"),
    ],
)
def test_bad_counts_paths_and_apart_files_end_the_command_in_one_line(tmp_path, argv, message):
    (tmp_path / "file").write_text('{"question": "q"}\n')
    argv = [a.format(tmp=tmp_path) for a in argv]
    common = [
        "--world",
        "synthetic:200:0",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--no-solver",
        "--n",
        "2",
        "--out",
        str(tmp_path / "q.jsonl"),
    ]
    with pytest.raises(SystemExit, match="^jaxseeker synth: " + re.escape(message.format(tmp=tmp_path))):
        main(["synth", "sailorfog", *common, *argv])


def test_a_world_without_entities_ends_the_command_in_one_line(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    world = f"pages:{tmp_path / 'empty.jsonl'}"
    for recipe in ("sailorfog", "crawlqa"):
        empty = f"^jaxseeker synth: --world {re.escape(world)}: the world has no entities"
        with pytest.raises(SystemExit, match=empty):
            main(
                [
                    "synth",
                    recipe,
                    "--world",
                    world,
                    "--cache-dir",
                    str(tmp_path / "cache"),
                    "--n",
                    "2",
                    "--out",
                    str(tmp_path / "q.jsonl"),
                ]
            )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["sailorfog", "--n", "0"], "--n: must be an integer >= 1, got 0"),
        (["sailorfog", "--n", "-2"], "--n: must be an integer >= 1, got -2"),
        (["sailorfog", "--seed", "-1"], "--seed: must be an integer >= 0, got -1"),
        (["e2hqa", "--rounds", "-1", "2"], "--rounds: must be an integer >= 0, got -1"),
        (["e2hqa", "--rounds", "1", "-2"], "--rounds: must be an integer >= 0, got -2"),
    ],
)
def test_synth_numbers_out_of_range_are_usage_errors(argv, message, capsys):
    err = usage_error(["synth", *argv, "--out", "q.jsonl"], capsys)
    assert err == f"jaxseeker synth {argv[0]}: error: argument {message}"


def test_only_openseeker_takes_a_solver(tmp_path, capsys):
    err = usage_error(["synth", "e2hqa", "--solver", "openai", "--out", "q.jsonl"], capsys)
    assert err.startswith("jaxseeker synth e2hqa: error: unrecognized arguments: --solver openai")  # e2hqa asks none
    out = str(tmp_path / "q.jsonl")
    with pytest.raises(SystemExit, match=r"^jaxseeker synth: --solver openai needs --llm-model"):
        main(["synth", "openseeker", "--solver", "openai", "--out", out, "--cache-dir", str(tmp_path / "cache")])


def test_synth_plain_writes_the_earlier_questions_and_the_default_the_natural_ones(tmp_path):
    from jaxseeker.synthesis.qa import e2hqa
    from jaxseeker.world import open_world

    common = ["--world", "synthetic:400:2", "--cache-dir", str(tmp_path / "cache"), "--no-solver", "--n", "8"]
    for flags, name in ((["--plain"], "plain.jsonl"), ([], "natural.jsonl")):
        args = parse(["synth", "e2hqa", *common, "--rounds", "0", "1", *flags, "--out", str(tmp_path / name)])
        assert args.func(args) == 0
    world = open_world("synthetic:400:2", cache_dir=tmp_path / "cache")
    for natural, name in ((False, "plain.jsonl"), (True, "natural.jsonl")):
        config = e2hqa.E2HQAConfig(min_rounds=0, max_rounds=1, natural=natural)
        expected = [r.to_json() for r in e2hqa.synthesize(world, 8, config=config).records]
        assert [r.to_json() for r in read_jsonl(tmp_path / name)] == expected


def test_synth_dry_run_checks_the_flags_and_opens_and_writes_nothing(tmp_path, capsys):
    """`--dry-run` says what a run would write; a flag it cannot run with still ends it in one line."""
    out = tmp_path / "qa" / "q.jsonl"
    common = ["--world", "synthetic:400:2", "--n", "5", "--cache-dir", str(tmp_path / "cache"), "--dry-run"]
    assert main(["synth", "sailorfog", *common, "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"would write 5 sailorfog questions on synthetic:400:2 to {out}"
    assert not any(tmp_path.iterdir())  # no world built into the cache, no output directory
    with pytest.raises(SystemExit, match="^jaxseeker synth: --rounds MIN MAX needs 0 <= MIN <= MAX, got 2 1$"):
        main(["synth", "e2hqa", *common, "--rounds", "2", "1", "--out", str(out)])
