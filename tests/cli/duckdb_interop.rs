//! DuckDB and pandas load the output folder with the queries the README shows.
//!
//! Needs Python with `duckdb`, `pyarrow` and `pandas` (`.ci/run` installs them).
//! Set `STAMPEDE_SKIP_PYTHON=1` to skip on a machine without them; CI never does.

use std::process::Command;

use crate::common::{python_with_duckdb, skip, stampede, stderr};

const CHECK: &str = r#"
import sys, duckdb, pandas as pd, pyarrow.parquet as pq
out = sys.argv[1]
con = duckdb.connect()

summary = con.execute(f"SELECT * FROM read_parquet('{out}/*/summary.parquet', filename=true) ORDER BY grid_point").df()
assert list(summary["grid_point"]) == [0, 1, 2], summary
assert list(summary["queue.servers"]) == [2, 3, 4]
assert (summary["replicas"] == 6).all()
for column in ["wait_mean_s_mean", "wait_mean_s_sd", "wait_mean_s_ci_lo", "wait_mean_s_ci_hi", "events_mean", "throughput_rps_ci_hi"]:
    assert column in summary.columns, column
assert (summary["wait_mean_s_ci_lo"] < summary["wait_mean_s_mean"]).all()
assert (summary["wait_mean_s_mean"] < summary["wait_mean_s_ci_hi"]).all()
# More servers, shorter waits.
assert summary["wait_mean_s_mean"].is_monotonic_decreasing

replicas = con.execute(f"SELECT grid_point, count(*) AS n, avg(wait_mean_s) AS w, min(events) AS e FROM '{out}/mmc/replicas.parquet' GROUP BY grid_point ORDER BY grid_point").fetchall()
assert [r[1] for r in replicas] == [6, 6, 6], replicas
for (g, _, w, e), mean in zip(replicas, summary["wait_mean_s_mean"]):
    assert abs(w - mean) < 1e-12 * max(1.0, mean), (g, w, mean)
    assert e > 100000
types = {row[0]: row[1] for row in con.execute(f"DESCRIBE SELECT * FROM '{out}/mmc/replicas.parquet'").fetchall()}
assert types["grid_point"] == "UINTEGER" and types["seed"] == "UBIGINT" and types["events"] == "UBIGINT", types
assert types["wait_mean_s"] == "DOUBLE"

hist = con.execute(f"SELECT grid_point, metric, count, p50_s, p90_s, p99_s, p999_s, max_s, octet_length(hdr) FROM '{out}/mmc/histograms.parquet' ORDER BY grid_point").fetchall()
assert [h[1] for h in hist] == ["response_s"] * 3
for h in hist:
    assert h[2] > 0 and 0 < h[3] <= h[4] <= h[5] <= h[6] <= h[7], h
    assert h[8] > 40

# The README's analysis query.
best = con.execute(f"""
    SELECT "queue.servers" AS servers, round(wait_mean_s_mean * 1000, 3) AS wait_ms
    FROM read_parquet('{out}/*/summary.parquet')
    WHERE wait_mean_s_ci_hi < 0.005
    ORDER BY servers LIMIT 1""").fetchall()
assert best and best[0][0] == 3, best

# The README's pandas snippet.
df = pd.read_parquet(f"{out}/mmc/summary.parquet")
assert len(df) == 3 and df["queue.servers"].tolist() == [2, 3, 4]
table = pq.read_table(f"{out}/mmc/histograms.parquet")
assert table.num_rows == 3
# The hdr column holds V2 HdrHistogram bytes: the cookie 0x1c849313.
assert table.column("hdr")[0].as_py()[:4] == bytes([0x1c, 0x84, 0x93, 0x13])
print("interop ok")
"#;

#[test]
fn duckdb_and_pandas_load_the_output() {
    let Some(stdout) = run_and_check(&["mmc", "--replicas", "6"], CHECK) else { return };
    assert!(stdout.contains("interop ok"));
}

const CLUSTER_CHECK: &str = r#"
import sys, duckdb
out = sys.argv[1]
con = duckdb.connect()
rows = con.execute(f"""
    SELECT "router.capacity_factor" AS c, "retry.budget_ratio" AS budget,
           "retry.breaker.failure_rate_threshold" AS breaker,
           round(recovery_s_ci_hi, 3) AS recovery_ci_hi_s, round(wasted_work_s_mean, 2) AS wasted_s
    FROM read_parquet('{out}/policy-grid/summary.parquet')
    WHERE recovered_ratio_ci_lo >= 0.95 AND recovery_s_ci_hi <= 1.5
    ORDER BY wasted_work_s_mean LIMIT 5""").fetchall()
assert 1 <= len(rows) <= 5, rows
assert all(r[3] <= 1.5 for r in rows), rows
n = con.execute(f"SELECT count(*) FROM '{out}/policy-grid/summary.parquet'").fetchone()[0]
assert n == 27, n
ts = con.execute(f"""SELECT t_s, queue_depth_mean, queue_depth_ci_lo, queue_depth_ci_hi, goodput_rps_mean
    FROM '{out}/policy-grid/timeseries.parquet' WHERE grid_point = 0 ORDER BY bucket""").fetchall()
assert len(ts) == 1000, len(ts)
assert ts[301][0] == 3.01
before = sum(r[1] for r in ts[200:300]) / 100
during = max(r[1] for r in ts[300:360])
assert during > 5 * before, (before, during)
assert all(r[2] <= r[1] <= r[3] for r in ts[150:])
hops = con.execute(f"SELECT grid_point, sum(count), sum(share) FROM '{out}/policy-grid/hops.parquet' GROUP BY grid_point ORDER BY grid_point").fetchall()
assert len(hops) == 27 and all(abs(h[2] - 1.0) < 1e-9 for h in hops if h[1] > 0), hops
plain = con.execute(f"SELECT count FROM '{out}/policy-grid/hops.parquet' WHERE grid_point = 0 AND hops > 0").fetchall()
assert sum(c[0] for c in plain) == 0, "c = inf never walks past a shard"
print("cluster interop ok")
"#;

#[test]
fn duckdb_answers_the_policy_grid_question() {
    run_and_check(&["policy-grid", "--replicas", "8"], CLUSTER_CHECK);
}

const GATEWAY_CHECK: &str = r#"
import sys, duckdb
out = sys.argv[1]
con = duckdb.connect()
# The README's gateway query.
rows = con.execute(f"""
    SELECT case_label, turn_completion_ratio_mean, answer_call_p95_s_mean, wasted_usd_mean
    FROM '{out}/llm-breaker/summary.parquet' ORDER BY grid_point""").fetchall()
assert [r[0] for r in rows] == [
    "rate-limited, 429 excluded", "rate-limited, 429 counted", "brownout, no breaker", "brownout, breaker",
    "brownout, breaker, answer falls back to haiku", "dead tier, constant open time",
    "dead tier, growing open time"], rows
# A dead tier refuses at once: its p95 to answer or failure is exactly 0.
assert all(0.0 <= r[1] <= 1.0 and r[2] >= 0 and r[3] > 0 for r in rows), rows
assert rows[5][2] == 0.0 and rows[2][2] > 30, rows
# A case's fields are columns of their own: filter on one without matching TOML text.
fallback = con.execute(f"""SELECT grid_point FROM '{out}/llm-breaker/summary.parquet'
    WHERE "stack.answer_fallback_tier" = 'haiku'""").fetchall()
assert fallback == [(4,)], fallback
counted = con.execute(f"""SELECT grid_point FROM '{out}/llm-breaker/summary.parquet'
    WHERE "gateway.breaker_counts_429" """).fetchall()
assert counted == [(1,)], counted
# Per class, the reasons add up to the failed calls, replica by replica.
reasons = ["admission_shed", "admission_infeasible", "admission_fair_share", "queue_full", "queue_deadline",
           "codel_drop", "limiter", "breaker_open", "local_quota", "timeout_connect", "timeout_first_token",
           "timeout_inter_token", "timeout_total", "timeout_deadline", "http_429", "http_529", "http_500"]
for cls in ["guard", "rewrite", "answer", "think", "title", "answer_fallback"]:
    total = " + ".join(f"{cls}_failed_{r}" for r in reasons)
    bad = con.execute(f"SELECT count(*) FROM '{out}/llm-breaker/replicas.parquet' WHERE {total} <> {cls}_failed").fetchone()[0]
    assert bad == 0, cls
print("gateway interop ok")
"#;

const TYPED_CHECK: &str = r#"
import sys, duckdb
out = sys.argv[1]
con = duckdb.connect()
# A table-valued axis's fields are typed columns; a point that does not set one has
# NULL there, and `<field>_used` holds the value it ran with (no breaker: false).
rows = con.execute(f"""SELECT grid_point, "retry.breaker.enabled", "retry.breaker.enabled_used", "retry.policy"
    FROM '{out}/baltor/summary.parquet' ORDER BY grid_point""").fetchall()
assert rows == [(0, None, False, "naive"), (1, None, False, "backoff"), (2, True, True, "backoff")], rows
on = con.execute(f"""SELECT grid_point FROM '{out}/baltor/summary.parquet' WHERE "retry.breaker.enabled" """).fetchall()
assert on == [(2,)], on
unset = con.execute(f"""SELECT grid_point FROM '{out}/baltor/summary.parquet'
    WHERE "retry.breaker.enabled" IS NULL ORDER BY grid_point""").fetchall()
assert unset == [(0,), (1,)], unset
off = con.execute(f"""SELECT count(*) FROM '{out}/baltor/summary.parquet' WHERE NOT "retry.breaker.enabled_used" """).fetchone()[0]
assert off == 2, off
# A field every point sets has no `_used` column.
names = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM '{out}/baltor/summary.parquet'").fetchall()]
assert "retry.policy_used" not in names, names
kind = con.execute(f"""SELECT typeof("retry.breaker.enabled") FROM '{out}/baltor/summary.parquet' LIMIT 1""").fetchone()[0]
assert kind == "BOOLEAN", kind
# An undefined value is NULL, not NaN: the naive client's replicas that never
# recovered have no recovery time, IS NULL finds them, avg() skips them.
nulls, total, mean = con.execute(f"""SELECT count(*) FILTER (WHERE recovery_s IS NULL), count(*), avg(recovery_s)
    FROM '{out}/baltor/replicas.parquet' WHERE grid_point = 0""").fetchone()
assert nulls == total == 2 and mean is None, (nulls, total, mean)
nan = con.execute(f"""SELECT count(*) FROM '{out}/baltor/replicas.parquet' WHERE isnan(recovery_s)""").fetchone()[0]
assert nan == 0, nan
print("typed ok")
"#;

/// `WHERE "retry.breaker.enabled"` works: leaf columns keep their TOML type, are NULL
/// where a point does not set them, and `_used` says what it ran with (issue 45).
#[test]
fn duckdb_filters_on_a_typed_leaf_column() {
    run_and_check(&["baltor", "--replicas", "2", "--no-report"], TYPED_CHECK);
}

#[test]
fn duckdb_reads_a_gateway_act_by_case() {
    run_and_check(&["llm-breaker", "--replicas", "4"], GATEWAY_CHECK);
}

/// Runs `stampede run ARGS` into a scratch folder, then the Python `script` on it;
/// asserts both succeed and returns the script's output. `None`: skipped by
/// the machine has no Python with duckdb (said loudly; a failure in CI).
fn run_and_check(args: &[&str], script: &str) -> Option<String> {
    let python = match python_with_duckdb() {
        Ok(python) => python,
        Err(why) => {
            skip("duckdb interop", &why);
            return None;
        }
    };
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().to_str().unwrap();
    let run = stampede(&[&["run"][..], args, &["--quiet", "--out", out]].concat());
    assert!(run.status.success(), "{}", stderr(&run));
    let check = Command::new(&python).args(["-c", script, out]).output().unwrap_or_else(|e| {
        panic!("cannot start {python}: {e}; install Python with duckdb, pyarrow and pandas (see .ci/run)")
    });
    assert!(
        check.status.success(),
        "the DuckDB/pandas check failed (are duckdb, pyarrow and pandas installed? see .ci/run):\n{}\n{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    Some(String::from_utf8_lossy(&check.stdout).into_owned())
}

const ROW_GROUPS_CHECK: &str = r#"
import sys, duckdb
out = sys.argv[1]
con = duckdb.connect()
groups = con.execute(f"SELECT row_group_id, max(row_group_num_rows) FROM parquet_metadata('{out}/mmc/replicas.parquet') GROUP BY row_group_id ORDER BY row_group_id").fetchall()
assert len(groups) == 2, groups
assert groups[0][1] == 122880 and groups[1][1] == 150000 - 122880, groups
n = con.execute(f"SELECT count(*), count(DISTINCT replica) FROM '{out}/mmc/replicas.parquet'").fetchone()
assert n == (150000, 50000), n
print("row groups ok")
"#;

/// `replicas.parquet` is cut into row groups of 122,880 rows (DuckDB's own size), so
/// DuckDB reads a large table with several threads (issue 54).
#[test]
fn duckdb_sees_bounded_row_groups() {
    let args = ["mmc", "--replicas", "50000", "--set", "run.horizon_s=0.2", "--set", "run.warmup_s=0", "--no-report"];
    if let Some(stdout) = run_and_check(&args, ROW_GROUPS_CHECK) {
        assert!(stdout.contains("row groups ok"));
    }
}

const WRITE_ECOSYSTEM_PARQUET: &str = r#"
import sys, duckdb, pandas as pd
out = sys.argv[1]
lat = [0.001 * ((i * 37) % 997) + 0.0005 for i in range(3000)]
df = pd.DataFrame({"lat": lat, "route": ["/a" if i % 3 else "/b" for i in range(3000)]})
df["route"] = df["route"].astype("category")
for codec in ["snappy", "gzip", "brotli", "lz4", "zstd", None]:
    df.to_parquet(f"{out}/pandas-{codec}.parquet", compression=codec)
df.astype({"lat": "float32"}).to_parquet(f"{out}/pandas-float32.parquet")
pd.DataFrame({"lat": pd.array([int(x * 1e6) for x in lat], dtype="Int64")}).to_parquet(f"{out}/pandas-nullable-int.parquet")
con = duckdb.connect()
con.execute("CREATE TABLE t AS SELECT * FROM df")
for codec in ["snappy", "zstd", "gzip", "uncompressed"]:
    con.execute(f"COPY t TO '{out}/duckdb-{codec}.parquet' (FORMAT parquet, COMPRESSION {codec})")
print(sum(lat) / len(lat))
"#;

/// Parquet as pandas/pyarrow and DuckDB write it — every codec, a category column
/// (dictionary-encoded), float32 and nullable integers — is read by `stampede fit`
/// (issue 43, item 7: pandas' snappy default was refused as "Disabled feature").
#[test]
fn fit_reads_parquet_as_pandas_and_duckdb_write_it() {
    let python = match python_with_duckdb() {
        Ok(python) => python,
        Err(why) => return skip("parquet from pandas and duckdb", &why),
    };
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path();
    let written = Command::new(&python).args(["-c", WRITE_ECOSYSTEM_PARQUET, out.to_str().unwrap()]).output().unwrap();
    assert!(written.status.success(), "{}", String::from_utf8_lossy(&written.stderr));
    let mean: f64 = String::from_utf8_lossy(&written.stdout).trim().parse().unwrap();
    let mut files: Vec<_> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 12, "{files:?}");
    for file in files {
        let page = out.join("fit.html");
        let fit =
            stampede(&["fit", file.to_str().unwrap(), "--column", "lat", "--json", "--out", page.to_str().unwrap()]);
        assert!(fit.status.success(), "{}: {}", file.display(), stderr(&fit));
        let answer: serde_json::Value = serde_json::from_slice(&fit.stdout).unwrap();
        let scale = if file.to_string_lossy().contains("nullable-int") { 1e-6 } else { 1.0 };
        let got = answer["mean_s"].as_f64().unwrap() * scale;
        assert!((got / mean - 1.0).abs() < 1e-3, "{}: mean {got} vs {mean}", file.display());
        assert_eq!(answer["count"], 3000.0, "{}", file.display());
    }
}
