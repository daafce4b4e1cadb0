"""Execute the notebooks (small sizes) so that they stay runnable.

The notebooks read ``GPURPO_NOTEBOOK_SIZE``: ``"small"`` shrinks their problems so that each one runs in well under a
minute on two cores.
"""

from __future__ import annotations

from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes_without_error(path, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat", reason="nbformat comes with the test extra (nbmake)")
    nbclient = pytest.importorskip("nbclient", reason="nbclient comes with the test extra (nbmake)")
    pytest.importorskip("matplotlib", reason="the notebooks plot with matplotlib")
    monkeypatch.setenv("GPURPO_NOTEBOOK_SIZE", "small")  # the kernel inherits the environment
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook, timeout=600, kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    code_cells = [c for c in notebook.cells if c.cell_type == "code"]
    assert code_cells, f"{path.name} has no code cell"
    errors = [o for c in code_cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors
    assert any(c.get("outputs") for c in code_cells), f"{path.name} produced no output"


def test_there_is_a_notebook():
    assert NOTEBOOKS, "notebooks/ holds no notebook"
