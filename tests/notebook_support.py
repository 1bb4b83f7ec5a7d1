"""Run a notebook of notebooks/ top to bottom in a fresh working directory, and read what it printed."""

import time
from pathlib import Path

import nbformat
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
