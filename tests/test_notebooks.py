"""The notebooks run top to bottom on the embedded world in a fresh working directory, and show what they promise."""

import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).parents[1] / "notebooks"
CELL_TIMEOUT_S = 300


def execute(name: str, workdir: Path) -> tuple[nbformat.NotebookNode, float]:
    """Run notebook `name` with `workdir` as its working directory; (executed notebook, wall seconds).

    A cell that raises fails the test with nbclient's CellExecutionError (the cell and the traceback).
    """
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = NotebookClient(
        nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}
    )
    start = time.perf_counter()
    client.execute()
    return nb, time.perf_counter() - start


def outputs(nb: nbformat.NotebookNode) -> list[dict]:
    """Every output of every code cell."""
    return [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]


def text_of(nb: nbformat.NotebookNode) -> str:
    """The printed text of all cells."""
    return "".join(o.get("text", "") for o in outputs(nb) if o["output_type"] == "stream")


@pytest.mark.parametrize("name", ["01_walkthrough.ipynb", "02_custom_loss.ipynb"])
def test_notebooks_are_stored_without_outputs(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)


def test_walkthrough_runs_every_stage(tmp_path):
    nb, wall_s = execute("01_walkthrough.ipynb", tmp_path)
    text = text_of(nb)
    assert "kept " in text and "validity" in text  # the funnel's summary
    assert "<tool_response>" in text and "<answer>" in text  # an expert trajectory was shown
    masks = [o for o in outputs(nb) if "text/html" in o.get("data", {})]
    assert masks and "background:#c8f7c5" in masks[0]["data"]["text/html"]  # trained tokens rendered
    assert "step 4: loss" in text and "termination:" in text
    print(f"01_walkthrough: {wall_s:.1f} s")


def test_custom_loss_notebook_trains_with_both_objectives(tmp_path):
    nb, wall_s = execute("02_custom_loss.ipynb", tmp_path)
    text = text_of(nb)
    assert "sequence_clip (GSPO-style)" in text and "policy_loss (token clip, DAPO)" in text
    assert any("image/png" in o.get("data", {}) for o in outputs(nb))  # the reward curves
    for run in ("policy_loss", "sequence_clip"):
        assert (tmp_path / "runs" / "02_custom_loss" / run / "metrics.jsonl").exists()
    print(f"02_custom_loss: {wall_s:.1f} s")
