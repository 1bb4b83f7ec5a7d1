"""`jaxseeker pipeline --until STAGE` through the command line: a stage of the config stops the run after it, any
other name ends the command in one line before anything runs (SIGTERM during a stage:
test_pipeline_shipped_quick.py, whose demo run it stops)."""

import json

import pytest

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
