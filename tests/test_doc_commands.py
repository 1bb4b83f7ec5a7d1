"""Every `jaxseeker …` line of a shell block of the README and docs/ runs, in one temporary working directory and in
the pages' order: for real where it takes seconds (plan, world, synth on a small pages file, report), as `--dry-run`
where the command trains, rolls out or evaluates (pipeline, eval) or synthesises on a large world (synth). What a
test cannot have is listed below with the reason; `tests/test_docs.py` parses every command the pages quote."""

import json
import shlex
import shutil
from pathlib import Path

import pytest
from test_docs import PAGES, ROOT, fenced_commands

from jaxseeker.cli import main
from jaxseeker.synthesis.qa.writer import DEFAULT_PROMPT

# (the command's first words, or `--world` and a kind of world) → why a test cannot run it; a dry run is never here.
OUT_OF_REACH = {
    ("serve",): "a server that runs until stopped (tests/serve/ run one over loopback)",
    ("export-hf",): "reads a trained run's checkpoints (tests/train/ export tiny ones)",
    ("average",): "reads fine-tuned HF checkpoints (tests/train/ average tiny ones)",
    ("import-gguf",): "downloads the GGUF file",
    ("compare",): "reads the results of four evals (tests/eval/ compare tiny ones)",
    ("bench", "sft"): "trains SmolLM2-135M's shape for minutes on a CPU",
    ("sft",): "the docs' SFT recipes train 8B+ models on a TPU slice (sft_tiny runs in tests/test_cli_examples.py)",
    ("rl",): "the docs' RL recipes train 8B+ models on a TPU slice (rl_tiny runs in tests/train/rl/)",
    ("--world", "atlas"): "reads the questions a dry run did not write, over the atlas world (seconds to open)",
}

# The pages file the own-corpus guide builds a world from: a ring of pages, each linking to the next.
NAMES = [
    "Alpha River",
    "Beta Town",
    "Gamma Hill",
    "Delta Lake",
    "Epsilon Bridge",
    "Zeta Park",
    "Eta Mill",
    "Theta Fort",
]
# Inputs a page's commands read that an out-of-reach command before them writes: a copy of a file an earlier page's
# commands wrote in its place.
STAND_INS = {"t.jsonl": "sft.jsonl", "data/sft.jsonl": "sft.jsonl"}


def world_kind(argv: list[str]) -> str:
    """The kind of world `argv` names (`atlas` of `--world atlas:FR,DE`); a synth command's default is synthetic."""
    return argv[argv.index("--world") + 1].partition(":")[0] if "--world" in argv else "synthetic"


def dry_run(argv: list[str]) -> bool:
    """Whether `argv` runs as `--dry-run`: it trains, rolls out or evaluates (minutes to hours), or synthesises on a
    world of thousands of entities (a small pages file's synthesis runs for real)."""
    if argv[0] in ("pipeline", "eval"):
        return True
    return argv[0] == "synth" and argv[1] not in ("stats", "report") and world_kind(argv) != "pages"


def out_of_reach(argv: list[str]) -> str | None:
    """Why `argv` cannot run in a test, or None."""
    for key, reason in OUT_OF_REACH.items():
        if key[0] == "--world" and "--world" in argv and world_kind(argv) == key[1]:
            return reason
        if tuple(argv[: len(key)]) == key:
            return reason
    return None


def write_pages(path: Path) -> None:
    """`my_pages.jsonl` of the own-corpus guide."""
    url = "https://pages.example/{}".format
    rows = [
        {"url": url(n.replace(" ", "_")), "title": n, "text": f"{n} lies next to {m}; some words about {n}.",
         "links": [url(m.replace(" ", "_"))]}
        for n, m in zip(NAMES, NAMES[1:] + NAMES[:1], strict=True)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def run(argv: list[str]) -> int | str | None:
    """The exit status of `jaxseeker ARGV` (`--version` exits 0 through argparse)."""
    try:
        return main(argv)
    except SystemExit as exit_:
        return exit_.code


def test_every_fenced_command_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JAXSEEKER_CACHE", str(tmp_path / "cache"))  # the worlds the commands build
    (tmp_path / "configs").symlink_to(ROOT / "configs")  # the docs run from the repository's root
    write_pages(tmp_path / "my_pages.jsonl")
    shutil.copy(DEFAULT_PROMPT, tmp_path / "my_prompt.md")  # the question-synthesis guide: "Copy it, change it"
    ran, dry, skipped, failed = [], [], set(), []
    for page in PAGES:
        for argv in fenced_commands(page):
            if dry_run(argv):
                argv, done = [*argv, "--dry-run"], dry
            elif reason := out_of_reach(argv):
                skipped.add(reason)
                continue
            else:
                done = ran
            for stand_in, source in STAND_INS.items():
                if stand_in in argv and not Path(stand_in).exists():
                    Path(stand_in).parent.mkdir(parents=True, exist_ok=True)
                    Path(stand_in).write_bytes(Path(source).read_bytes())
            status = run(argv)
            done.append(argv)
            if status not in (0, None):
                failed.append(f"{page.relative_to(ROOT)}: jaxseeker {shlex.join(argv)}: exit {status}")
    assert not failed, "\n".join(failed) + "\n" + capsys.readouterr().err[-3000:]
    assert skipped == set(OUT_OF_REACH.values()), "an entry of OUT_OF_REACH no page needs"
    assert len(ran) >= 15 and len(dry) >= 10, (len(ran), len(dry))
    questions = [json.loads(line) for line in (tmp_path / "qa.jsonl").read_text().splitlines()]
    assert questions and {q["answer"] for q in questions} <= set(NAMES)  # crawlqa asked about the pages file
    trajectories = [json.loads(line) for line in (tmp_path / "sft.jsonl").read_text().splitlines()]
    answers = {q["question"]: q["answer"] for q in questions}  # the expert followed the pages' links to each answer
    assert len(trajectories) == len(questions)
    assert all(f"<answer>{answers[t['question']]}</answer>" in t["messages"][-1]["content"] for t in trajectories)


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["serve", "--model", "runs/demo/rl/hf"], OUT_OF_REACH[("serve",)]),
        (["synth", "stats", "q.jsonl", "--world", "atlas:FR,DE"], OUT_OF_REACH[("--world", "atlas")]),
        (["world", "info", "pages:my_pages.jsonl", "--search", "atlas"], None),
        (["bench", "sft", "--shape", "smollm2-135m"], OUT_OF_REACH[("bench", "sft")]),
        (["bench", "rl"], None),
        (["synth", "report", "atlas.jsonl"], None),
    ],
)
def test_out_of_reach_matches_commands_and_flags(argv, reason):
    """A command matches by its first words, or by the kind of world its `--world` names."""
    assert out_of_reach(argv) == reason


@pytest.mark.parametrize(
    ("argv", "dry"),
    [
        (["synth", "sailorfog", "--world", "atlas", "--n", "40", "--out", "q.jsonl"], True),
        (["synth", "e2hqa", "--n", "5", "--out", "q.jsonl"], True),  # the default world: synthetic:2000:0
        (["synth", "crawlqa", "--world", "pages:my_pages.jsonl", "--out", "qa.jsonl"], False),
        (["synth", "report", "t.jsonl"], False),
        (["eval", "--config", "demo"], True),
        (["plan", "--config", "demo"], False),
    ],
)
def test_long_commands_run_as_dry_runs(argv, dry):
    """Training, rollouts, evals and synthesis on a large world are dry runs; a small pages world's runs for real."""
    assert dry_run(argv) == dry
