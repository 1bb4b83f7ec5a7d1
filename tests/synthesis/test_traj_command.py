"""`jaxseeker synth trajectories` and `jaxseeker synth report` on a saved world, as a user runs them."""

from __future__ import annotations

import argparse
import json
import re

import numpy as np
import pytest
from cli_support import usage_error

from jaxseeker import model
from jaxseeker.agent import tool_calling_model
from jaxseeker.cli import main
from jaxseeker.data import read_trajectories
from jaxseeker.synthesis import trajectories
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
    common = (
        "--questions",
        str(tmp_path / "qa.jsonl"),
        "--world",
        str(tmp_path / "world"),
        "--tokenizer",
        str(tmp_path / "tok"),
        "--date",
        "2025-01-01",
        "--no-progress",
        "--tries",
        "2",
    )
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
    assert (
        run(
            "trajectories",
            *common,
            "--out",
            str(sailor),
            "--funnel",
            "websailor",
            "--min-tool-calls",
            "3",
            "--limit",
            "6",
        )
        == 0
    )
    for line in sailor.read_text().splitlines():
        assert json.loads(line)["provenance"]["tool_calls"] > 3
    assert "rft" in capsys.readouterr().out

    slipped = tmp_path / "slips.jsonl"
    assert run("trajectories", *common, "--out", str(slipped), "--slip-rate", "1", "--levels", "1,2") == 0
    weighted = [t for t in read_trajectories(slipped) if any(m.get("weight") == 0 for m in t.messages)]
    assert weighted and all(t.meta["provenance"]["untrained_turns"] >= 1 for t in weighted)


def test_a_stopped_run_goes_on_from_its_journal_and_writes_what_an_uninterrupted_one_does(
    tmp_path, traj_world, traj_tokenizer, capsys, monkeypatch
):
    save_world(traj_world, tmp_path / "world")
    traj_tokenizer.save_pretrained(str(tmp_path / "tok"))
    write_jsonl(get_recipe("e2hqa")(traj_world, 10, seed=4).records, tmp_path / "qa.jsonl")
    common = (
        "--questions",
        str(tmp_path / "qa.jsonl"),
        "--world",
        str(tmp_path / "world"),
        "--tokenizer",
        str(tmp_path / "tok"),
        "--date",
        "2025-01-01",
        "--no-progress",
        "--tries",
        "2",
        "--slip-rate",
        "0.5",
        "--detour-rate",
        "0.5",
    )
    whole, stopped = tmp_path / "whole.jsonl", tmp_path / "stopped.jsonl"
    assert run("trajectories", *common, "--out", str(whole)) == 0
    assert not (tmp_path / "whole.jsonl.partial").exists()  # removed once the trajectories are written

    outcome, calls = trajectories._outcome, []

    def ctrl_c_after_four(*args, **kwargs):
        if len(calls) == 4:
            raise KeyboardInterrupt
        calls.append(1)
        return outcome(*args, **kwargs)

    monkeypatch.setattr(trajectories, "_outcome", ctrl_c_after_four)
    capsys.readouterr()
    assert run("trajectories", *common, "--out", str(stopped)) == 130
    journal = tmp_path / "stopped.jsonl.partial"
    assert "the 4 episodes that finished are in" in capsys.readouterr().err and not stopped.exists()
    assert len(journal.read_text().splitlines()) == 1 + 4  # the inputs' key, then one line an episode
    monkeypatch.undo()
    assert run("trajectories", *common, "--out", str(stopped)) == 0
    assert f"resuming: 4 episodes of a stopped run are in {journal}" in capsys.readouterr().out
    assert stopped.read_text() == whole.read_text() and not journal.exists()
    stats = [json.loads((tmp_path / f"{name}.jsonl.stats.json").read_text()) for name in ("whole", "stopped")]
    assert [{k: v for k, v in st.items() if k != "wall_s"} for st in stats][0] == {
        k: v for k, v in stats[1].items() if k != "wall_s"
    }

    journal.write_text(json.dumps({"key": "another run"}) + "\n")
    with pytest.raises(
        SystemExit, match=f"^jaxseeker synth: {re.escape(str(journal))}: holds the episodes of a run with other inputs"
    ):
        main(["synth", "trajectories", *common, "--out", str(stopped)])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--levels", "x"], "--levels 'x': expected levels separated by commas, e.g. 1,2"),
        (["--short-cot", "--slip-rate", "0.5"], "--slip-rate cannot be combined with --short-cot"),
        (["--tools", "search,bogus"], "--tools search,bogus: tools.enabled: unknown tool(s) ['bogus']"),
        (["--out", "{tmp}"], "--out {tmp}: is a directory, not a file"),
        (["--out", "{tmp}/file/t.jsonl"], "--out {tmp}/file/t.jsonl: {tmp}/file is a file, not a directory"),
        (["--teacher", "policy"], "--teacher policy needs --model"),
    ],
)
def test_bad_flags_end_the_command_in_one_line_before_anything_loads(tmp_path, argv, message):
    (tmp_path / "file").write_text("")
    argv = [a.format(tmp=tmp_path) for a in argv]
    common = [
        "--questions",
        str(tmp_path / "qa.jsonl"),
        "--world",
        str(tmp_path / "world"),
        "--out",
        str(tmp_path / "t.jsonl"),
    ]
    with pytest.raises(SystemExit, match="^jaxseeker synth: " + re.escape(message.format(tmp=tmp_path))):
        main(["synth", "trajectories", *common, *argv])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--tries", "0"], "--tries: must be an integer >= 1, got 0"),
        (["--max-actions", "0"], "--max-actions: must be an integer >= 1, got 0"),
        (["--max-tokens", "0"], "--max-tokens: must be an integer >= 1, got 0"),
        (["--min-tool-calls", "-1"], "--min-tool-calls: must be an integer >= 0, got -1"),
        (["--limit", "-1"], "--limit: must be an integer >= 0, got -1"),
        (["--temperature", "-0.5"], "--temperature: must be a number >= 0, got -0.5"),
        (["--detour-rate", "2"], "--detour-rate: must be a number >= 0 and <= 1, got 2"),
        (["--slip-rate", "-0.1"], "--slip-rate: must be a number >= 0 and <= 1, got -0.1"),
        (["--mode", "reflection", "--n-max", "0"], "--n-max: must be an integer >= 1, got 0"),
        (["--k-verify", "0"], "--k-verify: must be an integer >= 1, got 0"),
        (["--mix-ratio", "-1"], "--mix-ratio: must be a number >= 0, got -1"),
        (["--verifier-error-rate", "1.5"], "--verifier-error-rate: must be a number >= 0 and <= 1, got 1.5"),
        (["--max-tool-calls", "0"], "--max-tool-calls: must be an integer >= 1, got 0"),
        (["--max-context", "1"], "--max-context: must be an integer >= 2, got 1"),
        (["--seed", "-1"], "--seed: must be an integer >= 0, got -1"),
    ],
)
def test_trajectories_numbers_out_of_range_are_usage_errors(argv, message, capsys):
    err = usage_error(
        ["synth", "trajectories", "--questions", "q.jsonl", "--world", "w", "--out", "t.jsonl", *argv], capsys
    )
    assert err == f"jaxseeker synth trajectories: error: argument {message}"


@pytest.mark.parametrize(
    "lines, message",
    [
        ("", "{qa}: no questions"),
        ('{"question": "q"}\n{"answer": "a"}\n', "{qa}:2: 'question' must be a non-empty string, got None"),
        ("5\n", "{qa}:1: expected a string or an object with a 'question', got int"),
        (
            '\n{"question": "q", "answer": "a"}\n',
            "{qa}:2: the expert needs a QA record with meta.query and meta.entities",
        ),
        (
            '{"question": "q", "meta": {"query": {}, "entities": []}}\n',
            "{qa}:1: malformed meta.query (KeyError('vars'))",
        ),
    ],
)
def test_bad_question_records_are_named_by_file_and_line(tmp_path, lines, message):
    qa = tmp_path / "qa.jsonl"
    qa.write_text(lines)
    with pytest.raises(SystemExit, match="^jaxseeker synth: " + re.escape(message.format(qa=qa))):
        main(
            [
                "synth",
                "trajectories",
                "--questions",
                str(qa),
                "--world",
                str(tmp_path / "w"),
                "--out",
                str(tmp_path / "t.jsonl"),
            ]
        )


def test_a_directory_without_a_tokenizer_ends_the_command_in_one_line(tmp_path, traj_world):
    save_world(traj_world, tmp_path / "world")
    write_jsonl(get_recipe("crawlqa")(traj_world, 1, seed=4).records, tmp_path / "qa.jsonl")
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "tokenizer.json").write_text("{not json")
    with pytest.raises(
        SystemExit,
        match=f"^jaxseeker synth: --tokenizer: {re.escape(str(tmp_path / 'tok'))}/tokenizer.json:1: not a JSON file",
    ):
        main(
            [
                "synth",
                "trajectories",
                "--questions",
                str(tmp_path / "qa.jsonl"),
                "--world",
                str(tmp_path / "world"),
                "--tokenizer",
                str(tmp_path / "tok"),
                "--out",
                str(tmp_path / "t.jsonl"),
            ]
        )


CALL = '{"name": "search", "arguments": {"query": ["Velmora bridge"]}}'
GOOD_RECORD = {
    "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "<answer>a</answer>"}],
    "provenance": {"teacher": "expert", "tokens": 12, "tries": 1},
}


@pytest.mark.parametrize(
    "record, stats, message",
    [
        ({"messages": [1]}, None, "{file}:1: messages[0] must be an object with a 'role'"),
        (
            {"messages": [{"role": "assistant"}]},
            None,
            "{file}:1: messages[0]: an assistant message needs a string 'content'",
        ),
        ({**GOOD_RECORD, "provenance": "x"}, None, "{file}:1: 'provenance' must be an object, got str"),
        (
            {**GOOD_RECORD, "provenance": {"tokens": "many"}},
            None,
            "{file}:1: provenance.tokens must be an integer, got 'many'",
        ),
        (GOOD_RECORD, "not json", "{file}.stats.json: not a JSON file"),
        (GOOD_RECORD, '{"entered": 3}', "{file}.stats.json: expected a JSON object whose 'entered' and 'passed'"),
    ],
)
def test_a_bad_trajectory_or_stats_file_is_named_in_one_line(tmp_path, record, stats, message):
    file = tmp_path / "traj.jsonl"
    file.write_text(json.dumps(record) + "\n")
    if stats is not None:
        (tmp_path / "traj.jsonl.stats.json").write_text(stats)
    with pytest.raises(SystemExit, match="^jaxseeker synth: " + re.escape(message.format(file=file))):
        main(["synth", "report", str(file), "--no-plot"])


def test_a_bad_plot_path_fails_before_the_report_and_a_bare_name_reports_the_png(tmp_path, capsys):
    file = tmp_path / "traj.jsonl"
    file.write_text(json.dumps(GOOD_RECORD) + "\n")
    for plot, message in (
        (tmp_path, f"--plot {tmp_path}: is a directory, not a file"),
        (tmp_path / "p.txt", f"{tmp_path / 'p.txt'}: matplotlib writes no .txt files"),
    ):
        with pytest.raises(SystemExit, match="^jaxseeker synth: " + re.escape(message)):
            main(["synth", "report", str(file), "--plot", str(plot)])
    assert capsys.readouterr().out == ""
    assert main(["synth", "report", str(file), "--plot", str(tmp_path / "bare")]) == 0
    assert f"plot: {tmp_path / 'bare.png'}" in capsys.readouterr().out and (tmp_path / "bare.png").is_file()


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory):
    """A tiny real checkpoint, an HF directory with its tokenizer, whose model writes a search call every turn:
    (directory, cfg, params)."""
    tokenizer, cfg, params = tool_calling_model(CALL, mean_think_tokens=3.0)
    out = tmp_path_factory.mktemp("policy")
    model.save_hf(params, cfg, out)
    tokenizer.save_pretrained(str(out))
    return out, cfg, params


@pytest.mark.parametrize(
    "flags, temperature", [([], 0.6), (["--temperature", "0"], 0.0), (["--temperature", "1"], 1.0)]
)
def test_the_policy_teacher_samples_at_the_temperature_given_zero_too(policy_dir, traj_world, flags, temperature):
    from jaxseeker.synthesis.command import _teacher

    path, cfg, params = policy_dir
    parser = argparse.ArgumentParser()
    add_synth_subcommands(parser.add_subparsers())
    args = parser.parse_args(
        [
            "trajectories",
            "--questions",
            "q",
            "--world",
            "w",
            "--out",
            "o",
            "--teacher",
            "policy",
            "--model",
            str(path),
            *flags,
        ]
    )
    teacher = _teacher(args, traj_world)
    assert teacher.sampling.temperature == temperature
    assert (teacher.cfg.vocab_size, teacher.cfg.num_layers, teacher.cfg.hidden_size) == (
        cfg.vocab_size,
        cfg.num_layers,
        cfg.hidden_size,
    )
    np.testing.assert_array_equal(np.asarray(teacher.params["embed"]), np.asarray(params["embed"]))  # the checkpoint's


def test_the_policy_teacher_rolls_out_its_checkpoint_through_the_command(policy_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("JAXSEEKER_CACHE", str(tmp_path / "cache"))  # where the pages world is built
    page = {"url": "https://w.test/velmora", "title": "Velmora", "text": "Velmora has a bridge with nine arches."}
    (tmp_path / "pages.jsonl").write_text(json.dumps(page) + "\n")
    (tmp_path / "qa.jsonl").write_text(json.dumps({"question": "How many arches has the bridge?", "answer": "nine"}))
    out = tmp_path / "t.jsonl"
    assert (
        main(
            [
                "synth",
                "trajectories",
                "--teacher",
                "policy",
                "--model",
                str(policy_dir[0]),
                "--questions",
                str(tmp_path / "qa.jsonl"),
                "--world",
                f"pages:{tmp_path / 'pages.jsonl'}",
                "--tools",
                "search",
                "--out",
                str(out),
                "--funnel",
                "none",
                "--tries",
                "2",
                "--max-tool-calls",
                "2",
                "--max-context",
                "2048",
                "--date",
                "2025-01-01",
                "--no-progress",
            ]
        )
        == 0
    )  # its tokenizer: the checkpoint's
    stats = json.loads((tmp_path / "t.jsonl.stats.json").read_text())
    assert stats["rounds"] == [1, 1] and out.read_text() == ""  # it only ever searches: never an answer, never kept
    assert stats["reasons"] == {"validity: ended by max_tool_calls, not an answer": 2}


def test_trajectories_dry_run_reads_and_writes_nothing(tmp_path, capsys):
    """`--dry-run` checks the flags and the output and says what a run would write: the questions file need not be
    there yet (a dry run of the synthesis before it wrote none)."""
    questions, out = tmp_path / "qa.jsonl", tmp_path / "data" / "t.jsonl"
    argv = ["synth", "trajectories", "--questions", str(questions), "--world", "synthetic:200:0", "--out", str(out)]
    assert main([*argv, "--dry-run"]) == 0
    assert capsys.readouterr().out.strip() == (
        f"would write the expert teacher's trajectories of {questions} on synthetic:200:0 to {out}"
    )
    assert not any(tmp_path.iterdir())
    with pytest.raises(SystemExit, match="^jaxseeker synth: --teacher policy needs --model"):
        main([*argv, "--teacher", "policy", "--dry-run"])
