"""The book's notebook (docs/src/python/notebook.py) runs, and its three lines give
the README's showcase table: the one `stampede run` prints."""

import re
import runpy
from pathlib import Path

import stampede
from conftest import need

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "docs" / "src" / "python" / "notebook.py"
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


def package_blocks():
    """The ```python,package blocks of the README and the book, in order: (file, text)."""
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs" / "src").rglob("*.md"))]:
        for text in re.findall(r"^```python,package\n(.*?)^```$", page.read_text(), re.S | re.M):
            found.append((page.relative_to(ROOT), text))
    return found


def test_the_books_python_blocks_run(tmp_path, monkeypatch):
    need("duckdb", "python3 -m pip install duckdb")
    blocks = package_blocks()
    assert {str(page) for page, _ in blocks} >= {"README.md", "docs/src/python.md"}, blocks
    monkeypatch.chdir(tmp_path)
    (tmp_path / "latency.csv").write_text(
        "latency_s\n" + "\n".join(str(0.010 + ((i * 37) % 90) / 1000) for i in range(400)) + "\n"
    )
    for page, text in blocks:
        # The showcase's 1,000 replicas are 40 here: the same code, a shorter test.
        text = text.replace(SHOWCASE, 'result = stampede.run("baltor", replicas=40, progress=False)')
        exec(compile(text, f"{page} block", "exec"), {})
