"""`jaxseeker synth RECIPE …` through argparse, as the CLI wires it: JSONL out, summary, plots."""

import argparse

from jaxseeker.synthesis.qa import command, read_jsonl


def parse(argv):
    parser = argparse.ArgumentParser(prog="jaxseeker")
    command.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_synth_writes_questions_summary_and_plots(tmp_path, capsys):
    args = parse(["synth", "sailorfog", "--world", "synthetic:400:2", "--n", "5", "--out", str(tmp_path / "q.jsonl"),
                  "--cache-dir", str(tmp_path / "cache"), "--plots", str(tmp_path / "plots")])
    assert args.func(args) == 0
    records = list(read_jsonl(tmp_path / "q.jsonl"))
    assert len(records) == 5 and all(r.tag == "sailorfog" for r in records)
    out = capsys.readouterr().out
    assert "5 questions" in out and "reference solver pass rate" in out
    assert (tmp_path / "plots" / "sailorfog_levels.png").exists()
