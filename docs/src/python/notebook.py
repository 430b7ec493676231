# %% [markdown]
# # stampede in a notebook
#
# A notebook in percent format: Jupyter (with jupytext), VS Code and PyCharm run it
# cell by cell; `python notebook.py` runs it whole. It needs the package and what this
# page draws with: `pip install './python[notebook]'` from a clone.
#
# ## The README's showcase, in three lines

# %%
import stampede

result = stampede.run("baltor")
result

# %% [markdown]
# `result` shows the table `stampede run` prints; the numbers behind it are Arrow
# tables: `result.summary` (a row per grid point), `result.replicas` (a row per
# replica), `result.histograms` (latency quantiles with their intervals).

# %%
result.summary.select(["grid_point", "success_ratio_mean", "success_ratio_ci_lo", "success_ratio_ci_hi"]).to_pandas()

# %% [markdown]
# ## A grid: the tail against the retry budget
#
# retry-storm's budgeted client, its budget ratio swept: `set=` fixes the policy
# (replacing the scenario's own grid axis), `grid=` adds the axis.

# %%
budgets = [0.02, 0.05, 0.1, 0.2, 0.5]
grid = stampede.run(
    "retry-storm",
    replicas=40,
    set={"retry": {"policy": "backoff", "budget": "ratio"}},
    grid={"retry.budget_ratio": budgets},
)

# %% [markdown]
# DuckDB queries the Arrow tables where they are (no copy, no files): the p99 with
# its 95% interval comes from `histograms`, the budget from `summary`.

# %%
import duckdb

summary, histograms = grid.summary, grid.histograms
p99 = duckdb.sql(
    """
    select s."retry.budget_ratio" as budget_ratio,
           h.p99_s * 1e3 as p99_ms, h.p99_s_ci_lo * 1e3 as lo_ms, h.p99_s_ci_hi * 1e3 as hi_ms,
           s.amplification_ratio_mean as amplification
    from summary s join histograms h using (grid_point)
    where h.metric = 'response_s'  -- successes; response_all_s counts every outcome
    order by budget_ratio
    """
).df()
p99

# %%
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(6, 3.5))
ax.errorbar(
    p99.budget_ratio,
    p99.p99_ms,
    yerr=[p99.p99_ms - p99.lo_ms, p99.hi_ms - p99.p99_ms],
    marker="o",
    capsize=3,
)
ax.set_xscale("log")
ax.set_xticks(budgets, [str(b) for b in budgets])
ax.minorticks_off()
ax.set_xlabel("retry budget (retries per request)")
ax.set_ylabel("p99 of answered requests, ms")
ax.set_title("retry-storm, budgeted client: 40 replicas a point, 95% intervals")
fig.tight_layout()
fig.savefig("retry-budget-p99.svg")
