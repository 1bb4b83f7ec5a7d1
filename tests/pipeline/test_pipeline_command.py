"""`jaxseeker pipeline --until STAGE` through the command line: a stage of the config stops the run after it, any
other name ends the command in one line before anything runs."""

import json
import os
import signal

import pytest
from kill_support import DEADLINE_S, launch, paused, wait_until

from jaxseeker.cli import main
from jaxseeker.pipeline import pipeline_config
from jaxseeker.train.recipe import CONFIGS_DIR, read_recipe


def test_until_stops_after_that_stage_and_a_name_the_config_lacks_is_one_line(tmp_path, capsys):
    assert main(["pipeline", "--quick", "--until", "qa", "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    assert "[qa] stopping here (until qa)" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["plots", "qa", "report.json", "report.md"]
    assert list(json.loads((tmp_path / "run" / "report.json").read_text())["stage_wall_s"]) == ["qa"]

    stages = pipeline_config(read_recipe(CONFIGS_DIR / "demo.yaml", []), quick=True).stages()
    with pytest.raises(SystemExit) as exit_:
        main(["pipeline", "--quick", "--until", "rl_round2", "--out", str(tmp_path / "other")])
    assert str(exit_.value.code) == (
        f"jaxseeker pipeline: --until 'rl_round2' is not a stage of "
        f"{CONFIGS_DIR / 'demo.yaml'}; one of {', '.join(stages)}"
    )
    assert not (tmp_path / "other").exists()  # ended before the run started


def test_sigterm_during_the_last_sft_step_ends_the_run_before_the_next_stage(tmp_path, capsys):
    out, log = tmp_path / "run", tmp_path / "run.log"
    argv = ["pipeline", "--quick", "--out", str(out), "--no-progress"]
    cfg = pipeline_config(read_recipe(CONFIGS_DIR / "demo.yaml", []), quick=True)
    stages, last = cfg.stages(), cfg.sft.train["steps"]
    run = launch(argv, log, pause_at=last)  # waits once the SFT's last step is logged (no stage before logs a step)
    wait_until(paused(log).exists, run, log, f"SFT step {last}")
    os.kill(run.pid, signal.SIGTERM)  # to the process: whichever of its threads the kernel picks
    assert run.wait(timeout=DEADLINE_S) == 143, log.read_text()[-4000:]
    after = stages[stages.index("sft") + 1]
    assert (
        f"jaxseeker pipeline: stopped by SIGTERM before stage {after}; the stages before it are saved; "
        f"to go on: jaxseeker {' '.join(argv)}" in log.read_text()
    )
    assert (out / "sft" / "done.json").exists() and not (out / after).exists()  # the SFT finished, nothing after
    assert json.loads((out / "sft" / "done.json").read_text())["metrics"]["final_loss"] > 0
    capsys.readouterr()
    assert main([*argv, "--dry-run"]) == 0  # the same command goes on from the next stage
    sft = stages.index("sft") + 1
    assert capsys.readouterr().out.splitlines()[-2:] == [
        f"would run: {', '.join(stages[sft:])}",
        f"reused: {', '.join(stages[:sft])}",
    ]
