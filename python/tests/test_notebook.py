"""The book's notebook (docs/src/notebooks/from-traces-to-a-policy.ipynb) runs: every
cell executed again by nbclient from the repository's root, as a reader runs it, and
its answers keep their shape (the imported services, a fitted worker count inside its
interval, a boundary that rises with the database's workers)."""

import importlib.util
from pathlib import Path

from conftest import need

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "docs" / "src" / "notebooks" / "from-traces-to-a-policy.ipynb"


def test_the_notebook_runs_from_traces_to_a_policy():
    need("nbclient", "python3 -m pip install nbclient ipykernel")
    # The kernel's package, looked for, not imported: imported here, this process
    # would look like a notebook to the package (progress bars by default).
    if importlib.util.find_spec("ipykernel") is None:
        need("ipykernel", "python3 -m pip install ipykernel")
    import nbformat

    # The builder's own execution, so the test runs the notebook as it was made.
    spec = importlib.util.spec_from_file_location("notebook_build", NOTEBOOK.parent / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    notebook = build.execute(nbformat.read(NOTEBOOK, as_version=4))
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    errors = [output for cell in code for output in cell.outputs if output.output_type == "error"]
    assert not errors, errors
    texts = ["".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in cell.outputs) for cell in code]
    assert "'bank', 'cart', 'frontend', 'inventory', 'payment'" in texts[1], texts[1]
    assert "api workers:" in texts[3], texts[3]
    assert any(o.get("data", {}).get("image/png") for o in code[-1].outputs), "the plot is drawn"
