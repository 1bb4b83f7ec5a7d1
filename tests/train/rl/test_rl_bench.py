"""`jaxseeker bench rl --pack --ynn` at a tiny size: all three sides (one padded row per episode, packed rows, then
YNNPACK's dots) run a measured step of the toy, and each prints its full table (the seconds are the machine's)."""

import re
from functools import partial

import pytest

from jaxseeker.cli import main
from jaxseeker.planning.fit import planned_recipe
from jaxseeker.train.recipe import RecipeError
from jaxseeker.train.rl.bench import run_bench

PHASES = [
    "phase",
    "rollout",
    "engine (device)",
    "waiting for tools",
    "judge / reward",
    "old-logprob pass",
    "update",
    "other (host)",
    "step",
]


def test_bench_rl_runs_one_row_per_episode_then_packed_rows_then_ynn_dots_and_prints_each_table(capsys):
    argv = [
        "bench",
        "rl",
        "--hidden-size",
        "16",
        "--num-layers",
        "1",
        "--questions",
        "2",
        "--group-size",
        "2",
        "--mini-batches",
        "1",
        "--steps",
        "1",
        "--max-context",
        "512",
        "--pack",
        "--ynn",
    ]
    assert main(argv) == 0
    tables = capsys.readouterr().out.split("\nbench rl: ")[1:]
    assert len(tables) == 3
    sides = ("one padded row per episode", "packed", "one padded row per episode")
    options = ("none", "none", "xla_cpu_experimental_ynn_fusion_type=LIBRARY_FUSION_TYPE_DOT")
    for table, rows, xla in zip(tables, sides, options, strict=True):
        lines = table.splitlines()
        assert lines[0].startswith("0.0M-param Qwen3 shape (1 layers, hidden 16), 2 questions × 2 rollouts, cpu")
        # the plan takes the whole mini-batch, 4 episodes of 512, in one pass
        assert lines[0].endswith(f"; update at remat none, 2048 tokens a pass; XLA options: {xla}")
        assert [line[:22].strip() for line in lines[1:10]] == PHASES
        seconds = {line[:22].strip(): float(line[22:31]) for line in lines[2:10]}
        assert seconds["update"] > 0 and seconds["step"] > 0 and lines[9].endswith("100.0%")
        sampled = re.match(r"episodes: (\d+) sampled / (\d+) context tokens, ", lines[10])
        assert int(sampled.group(1)) > 0 and int(sampled.group(2)) > int(sampled.group(1))  # the prompt and more
        update_rows = int(re.search(r"; (\d+) update rows", lines[10]).group(1))
        assert update_rows <= 4 and f"({rows})" in lines[10]  # at most the 4 episodes (A = 0 ones are left out)
        assert lines[11].startswith("device utilisation ")
        # MFU over the tokens the update trained on; with every group flat there is no update to rate
        assert ("update MFU " in lines[11]) == (update_rows > 0) != lines[11].endswith("agreed (A = 0)")
        work = re.fullmatch(
            r"rollout: [\d.]+x its roofline \(([\d.e+-]+) s: (\d+) prefilled and (\d+) decoded tokens, (\d+) decode "
            r"steps of ([\d.]+) rows on average\)",
            lines[12],
        )
        assert float(work.group(1)) > 0  # the engine decoded every sampled token (the table's mean of 4 is rounded):
        assert int(work.group(3)) / 4 == pytest.approx(int(sampled.group(1)), abs=0.5)
        steps, rows = int(work.group(4)), float(work.group(5))  # rows: tokens / steps, printed to 0.1
        assert 1 <= rows <= 4 and steps * rows == pytest.approx(int(work.group(3)), abs=0.05 * steps)
    assert re.fullmatch(
        r"packed update rows: update [\d.]+ s vs [\d.]+ s one row per episode \([\d.]+×\), "
        r"\d+ vs \d+ rows, fill \d+% vs \d+%",
        tables[1].splitlines()[-1],
    )
    assert re.fullmatch(
        r"YNNPACK dots: update [\d.]+ s vs [\d.]+ s \([\d.]+×\), old-logprob pass [\d.]+ s vs [\d.]+ s",
        tables[2].splitlines()[-1],
    )


def test_a_size_whose_update_cannot_fit_is_refused_before_anything_runs():
    # SmolLM2's width (9 heads of 64, so 3 KV heads) at 2,048 tokens against a 64 MiB budget: even one row a pass
    # under full remat is over, and the planner's message names the phases and what to shorten, as `jaxseeker rl`'s.
    match = r"\(1 × 2048 tokens per pass, remat full\) does not fit .*update [\d.]+ GiB.* Set a shorter rl\.context"
    with pytest.raises(RecipeError, match=match):
        run_bench(hidden=576, layers=1, max_context=2048, steps=1, plan=partial(planned_recipe, budget=64 * 2**20))
