"""Writes docs/src/notebooks/from-traces-to-a-policy.ipynb from the cells below and
executes it (nbclient, from the repository's root), so the notebook in the book
carries its outputs. Rerun after changing a cell or the package:

    PYTHONPATH=<a folder holding the stampede package> python3 docs/src/notebooks/build.py

The package's tests execute the notebook again (python/tests/test_notebook.py)."""

import os
import sys

import nbformat
from nbclient import NotebookClient

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
NOTEBOOK = os.path.join(HERE, "from-traces-to-a-policy.ipynb")

CELLS = [
    ("markdown", """# From traces to a policy

The notebook workflow, on the examples shipped in `docs/src/examples/`: **import** a
service graph from traces, **calibrate** a model against production's metrics, **map**
where it tips, **optimize** a setting with a constraint, and **plot**. Every step is
the command of the same name; each returns a value Python can use. It runs from the
repository's root in a minute or two on two cores."""),
    ("code", """%matplotlib inline
import os
import tempfile

import matplotlib.pyplot as plt
import pandas as pd
import stampede

work = tempfile.mkdtemp(prefix="stampede-notebook-")
examples = "docs/src/examples\""""),
    ("markdown", """## 1. Import traces

`import_traces` reads OTLP, Jaeger, Zipkin or Alibaba's CSV and writes a graph scenario:
services, call plans, self times and entry rates from the spans. What traces cannot
tell (workers, timeouts, retry policies) is written as defaults marked
`# not in the traces`."""),
    ("code", """shop = stampede.import_traces(f"{examples}/shop.otlp.json", out=os.path.join(work, "shop.toml"))
imported = shop.to_dict()
sorted(imported["services"]), [w["entry"] for w in imported["workload"]]"""),
    ("code", """first = stampede.run(shop.path, replicas=4, progress=False)
p99 = [c for c in first.summary.column_names if c.endswith(".p99_all_s_mean")]
first.summary.select(p99).to_pandas().T.rename(columns={0: "p99 (s), mean of 4 replicas"})"""),
    ("markdown", """## 2. Calibrate against production

`checkout` is an api with a slow database behind it; production's Prometheus export
(`calibrate-production.json`) says how busy the api's workers were as the load rose.
`calibrate` fits the api's worker count so that the model's busy workers follow
production's, with an interval, and reports each mapped metric's error."""),
    ("code", """fitted = stampede.calibrate(
    f"{examples}/calibrate-model.toml", f"{examples}/calibrate-production.json",
    map=['api.read.offered_rps=api:http_requests:rate20s{handler="/read"}',
         'api.busy=job:busy_workers:avg20s{job="api"}'],
    fit="services.api.workers=2..16:int", replicas=4, progress=False)
print("api workers:", fitted.fitted["services.api.workers"], "(value, 95% interval)")
pd.DataFrame(fitted.fidelity)[["name", "mape", "bias", "correlation", "inside_band"]]"""),
    ("code", """calibrated = fitted.calibrated
calibrated["run"].update(horizon_s=60.0, replicas=4)
# Production's schedule of rising load out, a constant rate in: the map varies it.
calibrated["workload"][0].pop("load", None)
calibrated["workload"][0]["rate_per_s"] = 250.0
calibrated["services"]["api"]["workers\"]"""),
    ("markdown", """## 3. Where does it tip?

`map` bisects, for each database size, the request rate at which the api's mean
latency crosses 200 ms."""),
    ("code", """tipping = stampede.map(calibrated, x="workload.0.rate_per_s=100..900", y="services.db.workers=4..8:int",
                       ys=3, metric="api.read.mean_s", level=0.2, replicas=4, progress=False)
pd.DataFrame(tipping.boundary(), columns=["db workers", "rate where latency passes 200 ms"])"""),
    ("markdown", """## 4. The smallest database that meets a latency goal

At 400 requests a second, `optimize` searches the database's worker count for the
busiest database (the fewest workers) whose mean latency stays under 100 ms — the
constraint's one-sided interval must be on the right side."""),
    ("code", """calibrated["workload"][0]["rate_per_s"] = 400.0
chosen = stampede.optimize(calibrated, maximize="db.utilisation", range="services.db.workers=2..16:int",
                           require="api.read.mean_s <= 0.1", replicas=4, first_stage=4, budget_replicas=400, progress=False)
chosen["chosen"]["params"] if chosen.ok else "nothing feasible\""""),
    ("markdown", """## 5. Plot

The map's boundary: below each line the api keeps up; the optimizer's choice sits at
400 requests a second."""),
    ("code", """figure, axes = plt.subplots(figsize=(6, 3.5))
boundary = [(workers, rate) for workers, rate in tipping.boundary() if rate is not None]
axes.plot([rate for _, rate in boundary], [workers for workers, _ in boundary], "o-", label="latency passes 200 ms")
axes.axvline(400, color="grey", linestyle=":", label="the load optimized for")
axes.set_xlabel("requests per second")
axes.set_ylabel("database workers")
axes.legend()
plt.show()"""),
]


def build() -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for kind, source in CELLS:
        make = nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell
        notebook.cells.append(make(source))
    return notebook


def execute(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Runs every cell from the repository's root; a failing cell raises."""
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": ROOT}}).execute()
    return notebook


if __name__ == "__main__":
    executed = execute(build())
    nbformat.write(executed, NOTEBOOK)
    print(f"wrote {NOTEBOOK}", file=sys.stderr)
