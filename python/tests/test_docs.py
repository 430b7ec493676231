"""The book's notebook (docs/src/python/notebook.py) runs, and its three lines give
the README's showcase table: the one `stampede run` prints."""

import re
import runpy
from pathlib import Path

import stampede
from conftest import need

NOTEBOOK = Path(__file__).resolve().parents[2] / "docs" / "src" / "python" / "notebook.py"
SHOWCASE = 'result = stampede.run("baltor")'


def test_the_three_lines_print_the_clis_showcase_table(cli, tmp_path):
    assert SHOWCASE in NOTEBOOK.read_text()
    # Fewer replicas than the showcase's 1,000, to keep the test short; the table is the same code.
    printed = cli("run", "baltor", "--replicas", "40", "--out", tmp_path, "--no-report").stdout
    result = stampede.run("baltor", replicas=40, progress=False)
    table = printed.split("\nwrote ")[0]
    # Measured, not simulated: the header's wall time and the ns per event.
    timing = re.compile(r" · [0-9.]+s$|^ns per event.*$", re.M)
    assert timing.sub("", repr(result)) == timing.sub("", table.rstrip("\n"))
    assert "naive" in repr(result) and "success_ratio" in repr(result)


def test_the_notebook_runs(tmp_path, monkeypatch):
    need("matplotlib", "python3 -m pip install matplotlib")
    need("duckdb", "python3 -m pip install duckdb")
    text = NOTEBOOK.read_text().replace(SHOWCASE, 'result = stampede.run("baltor", replicas=40, progress=False)')
    text = text.replace("replicas=40,\n", "replicas=10, progress=False,\n")
    script = tmp_path / "notebook.py"
    script.write_text(text)
    monkeypatch.chdir(tmp_path)
    names = runpy.run_path(str(script), run_name="__main__")
    p99 = names["p99"]
    assert list(p99.budget_ratio) == names["budgets"]
    assert (p99.lo_ms <= p99.p99_ms).all() and (p99.p99_ms <= p99.hi_ms).all()
    assert (tmp_path / "retry-budget-p99.svg").stat().st_size > 1000
