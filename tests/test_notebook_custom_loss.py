"""The custom-loss notebook runs top to bottom in a fresh working directory: a new objective registered, then RL on
the toy with it and with the built-in one (a file of its own, so that xdist runs it beside the walkthrough)."""

import pytest
from notebook_support import execute, outputs, text_of

pytestmark = pytest.mark.heavy  # a minute or more of CPU: runs first (tests/conftest.py)


def test_custom_loss_notebook_trains_with_both_objectives(tmp_path):
    nb, wall_s = execute("02_custom_loss.ipynb", tmp_path)
    text = text_of(nb)
    assert "sequence_clip (GSPO-style)" in text and "policy_loss (token clip, DAPO)" in text
    assert any("image/png" in o.get("data", {}) for o in outputs(nb))  # the reward curves
    for run in ("policy_loss", "sequence_clip"):
        assert (tmp_path / "runs" / "02_custom_loss" / run / "metrics.jsonl").exists()
    print(f"02_custom_loss: {wall_s:.1f} s")
