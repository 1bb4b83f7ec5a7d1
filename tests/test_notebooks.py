"""The notebooks are stored without outputs, and the walkthrough runs top to bottom on the embedded world in a fresh
working directory and shows what it promises (the custom-loss notebook: test_notebook_custom_loss.py, on another
xdist worker)."""

import nbformat
import pytest
from notebook_support import NOTEBOOKS, execute, outputs, text_of


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
