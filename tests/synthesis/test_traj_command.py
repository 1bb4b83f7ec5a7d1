"""`jaxseeker synth trajectories` and `jaxseeker synth report` on a saved world, as a user runs them."""

from __future__ import annotations

import argparse
import json

from jaxseeker.data import read_trajectories
from jaxseeker.synthesis.command import add_synth_subcommands
from jaxseeker.synthesis.qa import get_recipe, write_jsonl
from jaxseeker.world import save_world


def run(*argv: str) -> int:
    """Parse `jaxseeker synth …` arguments with the synth subcommands and run the handler."""
    parser = argparse.ArgumentParser(prog="jaxseeker synth")
    add_synth_subcommands(parser.add_subparsers(dest="synth", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_synth_trajectories_then_report(tmp_path, traj_world, traj_tokenizer, capsys):
    save_world(traj_world, tmp_path / "world")
    traj_tokenizer.save_pretrained(str(tmp_path / "tok"))
    records = get_recipe("e2hqa")(traj_world, 6, seed=4).records + get_recipe("crawlqa")(traj_world, 6, seed=4).records
    write_jsonl(records, tmp_path / "qa.jsonl")
    out = tmp_path / "out" / "traj.jsonl"
    common = ("--questions", str(tmp_path / "qa.jsonl"), "--world", str(tmp_path / "world"), "--tokenizer",
              str(tmp_path / "tok"), "--date", "2025-01-01", "--no-progress", "--tries", "2")
    assert run("trajectories", *common, "--out", str(out), "--levels", "1,2") == 0
    printed = capsys.readouterr().out
    assert "validity" in printed and "wrote" in printed
    kept = read_trajectories(out)  # the SFT reader takes the file as it is
    assert len(kept) >= 0.9 * sum(r.level <= 2 for r in records)
    assert all(t.meta["provenance"]["teacher"] == "expert" for t in kept)
    stats = json.loads((tmp_path / "out" / "traj.jsonl.stats.json").read_text())
    assert stats["entered"]["validity"] >= len(kept) and stats["passed"]["quality"] == len(kept)

    assert run("report", str(out), "--plot", str(tmp_path / "report.png")) == 0
    printed = capsys.readouterr().out
    assert f"{len(kept)} trajectories" in printed and "tool calls per trajectory" in printed
    assert "stage correctness" in printed and "actions: visit" in printed
    assert (tmp_path / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    sailor = tmp_path / "sailor.jsonl"
    assert run("trajectories", *common, "--out", str(sailor), "--funnel", "websailor", "--min-tool-calls", "3",
               "--limit", "6") == 0
    for line in sailor.read_text().splitlines():
        assert json.loads(line)["provenance"]["tool_calls"] > 3
    assert "rft" in capsys.readouterr().out

    slipped = tmp_path / "slips.jsonl"
    assert run("trajectories", *common, "--out", str(slipped), "--slip-rate", "1", "--levels", "1,2") == 0
    weighted = [t for t in read_trajectories(slipped) if any(m.get("weight") == 0 for m in t.messages)]
    assert weighted and all(t.meta["provenance"]["untrained_turns"] >= 1 for t in weighted)
