//! The output contract: determinism across thread counts, `show` round trips,
//! `--json`, `list`, the manifest, and agreement of the summary with Erlang C.

use std::path::Path;

use crate::common::{stampede, stderr, stdout};
use stampede_engine::measurement::theory::erlang_c;

const PARQUETS: [&str; 3] = ["summary.parquet", "replicas.parquet", "histograms.parquet"];

fn run_into(out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["run", "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let output = stampede(&args);
    assert!(output.status.success(), "stampede {args:?} failed: {}", stderr(&output));
    output
}

fn read(dir: &Path, scenario: &str, file: &str) -> Vec<u8> {
    std::fs::read(dir.join(scenario).join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

#[test]
fn thread_count_never_changes_a_byte() {
    let scratch = tempfile::tempdir().unwrap();
    let one = scratch.path().join("one");
    let two = scratch.path().join("two");
    // 3 grid points × 700 replicas spans two runner chunks, so chunk merging is covered.
    let common = ["mmc", "--replicas", "700", "--set", "run.horizon_s=20", "--set", "run.warmup_s=2", "--quiet"];
    run_into(&one, &[&common[..], &["--threads", "1"]].concat());
    run_into(&two, &[&common[..], &["--threads", "2"]].concat());
    for file in PARQUETS {
        assert!(read(&one, "mmc", file) == read(&two, "mmc", file), "{file} differs between 1 and 2 threads");
    }
    let manifest = |dir: &Path| {
        let mut value: serde_json::Value = serde_json::from_slice(&read(dir, "mmc", "manifest.json")).unwrap();
        let object = value.as_object_mut().unwrap();
        object.remove("wall_time_s").expect("wall time recorded");
        object.remove("host").expect("host recorded");
        object.remove("command_line").expect("command line recorded");
        value
    };
    assert_eq!(manifest(&one), manifest(&two), "only wall time, host and the command line may differ");
}

/// The same for the graph model, whose columns are named from the scenario: a grid of
/// cases with every time series, across 1 and 2 threads.
#[test]
fn thread_count_never_changes_a_byte_of_a_graph_run() {
    let scratch = tempfile::tempdir().unwrap();
    let (one, two) = (scratch.path().join("one"), scratch.path().join("two"));
    let common = ["graph-hedging", "--replicas", "9", "--set", "run.horizon_s=6", "--quiet", "--no-report"];
    run_into(&one, &[&common[..], &["--threads", "1"]].concat());
    run_into(&two, &[&common[..], &["--threads", "2"]].concat());
    for file in PARQUETS.iter().chain(&["timeseries.parquet"]) {
        assert!(read(&one, "graph-hedging", file) == read(&two, "graph-hedging", file), "{file} differs");
    }
}

#[test]
fn show_output_reproduces_the_run() {
    let scratch = tempfile::tempdir().unwrap();
    let overrides = ["--replicas", "5", "--seed", "77", "--set", "run.horizon_s=60.5", "--grid", "queue.servers=2,5"];
    let shown = stampede(&[&["show", "mmc"][..], &overrides].concat());
    assert!(shown.status.success(), "{}", stderr(&shown));
    let text = stdout(&shown);
    assert!(
        text.contains("seed = 77") && text.contains("horizon_s = 60.5") && text.contains("\"queue.servers\" = [2, 5]"),
        "{text}"
    );
    let file = scratch.path().join("resolved.toml");
    std::fs::write(&file, &text).unwrap();
    // Showing the shown file again is a fixed point.
    let again = stampede(&["show", file.to_str().unwrap()]);
    assert_eq!(stdout(&again), text);
    let direct = scratch.path().join("direct");
    let via_file = scratch.path().join("via-file");
    run_into(&direct, &[&["mmc", "--quiet"][..], &overrides].concat());
    run_into(&via_file, &[file.to_str().unwrap(), "--quiet"]);
    for parquet in PARQUETS {
        assert!(read(&direct, "mmc", parquet) == read(&via_file, "mmc", parquet), "{parquet} differs");
    }
}

#[test]
fn huge_seeds_survive_the_toml_round_trip() {
    let shown = stampede(&["show", "mmc", "--seed", "18446744073709551615"]);
    let text = stdout(&shown);
    assert!(text.contains("seed = \"18446744073709551615\""), "{text}");
}

#[test]
fn json_summary_follows_the_contract_and_matches_erlang_c() {
    let scratch = tempfile::tempdir().unwrap();
    let output = run_into(scratch.path(), &["mmc", "--replicas", "30", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("stdout is one JSON document");
    assert_eq!(json["scenario"], "mmc");
    assert_eq!(json["seed"], 1);
    assert_eq!(json["replicas"], 30);
    let grid = json["grid"].as_array().unwrap();
    assert_eq!(grid.len(), 3);
    for (index, point) in grid.iter().enumerate() {
        assert_eq!(point["grid_point"], index);
        let servers = point["params"]["queue.servers"].as_u64().unwrap() as u32;
        assert_eq!(servers, [2, 3, 4][index]);
        let theory = erlang_c(160.0, 100.0, servers).unwrap();
        let wait = &point["metrics"]["wait_mean_s"];
        let (mean, lo, hi) =
            (wait["mean"].as_f64().unwrap(), wait["ci_lo"].as_f64().unwrap(), wait["ci_hi"].as_f64().unwrap());
        assert!(lo < mean && mean < hi);
        // 30 replicas of 150,000 customers: within 3% of Erlang C.
        assert!(
            (mean - theory.wait_mean_s).abs() < 0.03 * theory.wait_mean_s,
            "c={servers}: {mean} vs {}",
            theory.wait_mean_s
        );
        let p_wait = point["metrics"]["wait_probability_ratio"]["mean"].as_f64().unwrap();
        assert!(
            (p_wait - theory.wait_probability).abs() < 0.01,
            "c={servers}: {p_wait} vs {}",
            theory.wait_probability
        );
        let response = &point["latency"]["response_s"];
        assert!(response["count"].as_u64().unwrap() > 4_000_000);
        let p50 = response["p50_s"].as_f64().unwrap();
        let p99 = response["p99_s"].as_f64().unwrap();
        assert!(0.0 < p50 && p50 < p99 && p99 <= response["max_s"].as_f64().unwrap());
    }
    let written: Vec<_> = crate::common::files_below(&scratch.path().join("mmc"));
    let names: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
    assert_eq!(names, ["histograms.parquet", "manifest.json", "replicas.parquet", "report.html", "summary.parquet"]);
}

#[test]
fn quiet_prints_nothing_and_the_table_names_every_metric() {
    let scratch = tempfile::tempdir().unwrap();
    let quiet = run_into(scratch.path(), &["mmck", "--replicas", "3", "--quiet"]);
    assert!(quiet.stdout.is_empty() && quiet.stderr.is_empty());
    let table = stdout(&run_into(scratch.path(), &["mmck", "--replicas", "3", "--all-metrics"]));
    for name in ["wait_mean_s", "in_system_mean", "rejected_ratio", "throughput_rps", "response p99_s", "capacity=32"] {
        assert!(table.contains(name), "{name} missing from\n{table}");
    }
    // By default, the headline metrics only, fitted to the terminal, and no colour off one.
    let compact = stdout(&run_into(scratch.path(), &["mmck", "--replicas", "3"]));
    assert!(compact.contains("wait_mean_s") && !compact.contains("in_system_mean"), "{compact}");
    assert!(compact.contains("more metrics with --all-metrics") && !compact.contains('\x1b'), "{compact}");
}

#[test]
fn list_names_every_builtin_with_a_description() {
    let output = stampede(&["list"]);
    assert!(output.status.success());
    let text = stdout(&output);
    let names: Vec<&str> = text.lines().map(|line| line.split_whitespace().next().unwrap()).collect();
    let builtins: Vec<&str> = stampede_scenario::scenario::builtin::BUILTINS.iter().map(|(name, _)| *name).collect();
    assert_eq!(names, builtins);
    assert!(names.contains(&"baltor") && names.contains(&"mmc"));
    assert!(text.lines().all(|line| line.split_whitespace().count() > 3));
    for name in names {
        let shown = stampede(&["show", name]);
        assert!(shown.status.success(), "{name}: {}", stderr(&shown));
    }
}

#[test]
fn manifest_records_the_resolved_scenario() {
    let scratch = tempfile::tempdir().unwrap();
    run_into(scratch.path(), &["mmc", "--replicas", "2", "--seed", "9", "--quiet"]);
    let manifest: serde_json::Value = serde_json::from_slice(&read(scratch.path(), "mmc", "manifest.json")).unwrap();
    assert_eq!(manifest["tool"], "stampede");
    assert_eq!(manifest["seed"], 9);
    assert_eq!(manifest["replicas"], 2);
    assert_eq!(manifest["grid"][0]["path"], "queue.servers");
    assert!(manifest["scenario_toml"].as_str().unwrap().contains("seed = 9"));
    assert!(manifest["wall_time_s"].as_f64().unwrap() > 0.0);
}

#[test]
fn capacity_prints_the_arithmetic_and_reads_a_user_fixture() {
    let output = stampede(&["capacity"]);
    let text = stdout(&output);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(text.contains("sustainable: 6.61 turns/s, limited by tier opus (server slots, shared)"), "{text}");
    assert!(text.contains("1000 turns/s is 151.39x"), "{text}");
    let json: serde_json::Value =
        serde_json::from_slice(&stampede(&["capacity", "--json", "--target-turns-rps", "100"]).stdout).unwrap();
    assert_eq!(json["target_turns_rps"], 100.0);
    assert_eq!(json["levers"][1]["lever"], "max_tokens sized to the p97 of observed output");
    // A user's fixture: opus with twice the server slots (provisioned throughput) is
    // bound by think's ITPM next, 0.98 calls/s ÷ 0.08 a turn.
    let scratch = tempfile::tempdir().unwrap();
    let file = scratch.path().join("mine.toml");
    let mine =
        stampede_scenario::models::gateway::fixture::DEFAULT_FIXTURE.replace("server_slots = 80", "server_slots = 160");
    std::fs::write(&file, mine).unwrap();
    let text = stdout(&stampede(&["capacity", "--fixture", file.to_str().unwrap()]));
    assert!(text.contains("sustainable: 12.25 turns/s"), "{text}");
    let bad = stampede(&["capacity", "--target-turns-rps", "0"]);
    assert_eq!(bad.status.code(), Some(2));
    let missing = stampede(&["capacity", "--fixture", "/nonexistent.toml"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("cannot read fixture file /nonexistent.toml"));
}

/// Memory is (nearly) flat in the number of grid points: what stays per point is a
/// few numbers per metric for the report and the grid's own values — under 4 KB a
/// point, where it used to be about 340 KB (2 GB for these 6,000 points).
#[test]
fn peak_memory_does_not_grow_with_the_grid() {
    let scratch = tempfile::tempdir().unwrap();
    let peak = |points: usize| {
        let values: Vec<String> = (0..points).map(|i| format!("{:.4}", 0.5 + i as f64 * 1e-4)).collect();
        let grid = format!("run.horizon_s={}", values.join(","));
        let out = scratch.path().join(points.to_string());
        let args = [
            "mmc",
            "--replicas",
            "1",
            "--set",
            "run.warmup_s=0",
            "--grid",
            "queue.servers=2",
            "--grid",
            &grid,
            "--quiet",
        ];
        run_into(&out, &args);
        let manifest: serde_json::Value = serde_json::from_slice(&read(&out, "mmc", "manifest.json")).unwrap();
        assert_eq!(manifest["grid_points"].as_u64(), Some(points as u64));
        // What each point cost, from the model's events and the replicas' compute time.
        let cost = &manifest["host"]["throughput"][0];
        assert!(cost["ns_per_event"].as_f64().unwrap() > 0.0 && cost["events_per_s"].as_f64().unwrap() > 0.0);
        manifest["host"]["peak_rss_bytes"].as_f64().expect("Linux reports the peak resident memory")
    };
    let (small, large) = (peak(300), peak(6_000));
    let per_point = (large - small) / 5_700.0;
    assert!(
        per_point < 4096.0,
        "peak RSS {:.0} MB at 300 points, {:.0} MB at 6,000: {per_point:.0} B/point",
        small / 1e6,
        large / 1e6
    );
}

/// policy-grid's columns used to read `capacity_factor=inf…`, several alike: now every
/// column is `#N` with its values in the legend, and no heading is cut.
#[test]
fn a_wide_grid_names_its_columns_so_they_can_be_told_apart() {
    let out = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["run", "policy-grid", "--replicas", "2", "--no-report", "--out", out.path().to_str().unwrap()])
        .env("COLUMNS", "200")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let header = text.lines().find(|l| l.starts_with("mean ± 95% half-width")).unwrap();
    let titles: Vec<&str> = header.split_whitespace().skip(4).collect();
    assert_eq!(titles.len(), 8, "{text}");
    let distinct: std::collections::BTreeSet<&&str> = titles.iter().collect();
    assert_eq!(distinct.len(), titles.len(), "columns alike: {header}");
    assert!(!header.contains('…'), "{header}");
    for title in titles {
        let line = text.lines().find(|l| l.starts_with(&format!("{title}: "))).unwrap_or_else(|| panic!("{text}"));
        assert!(line.contains("router.capacity_factor = ") && line.contains("retry.budget_ratio = "), "{line}");
    }
}

/// Issue 71, item 4: `timeseries.parquet` carries each point's case and axis columns,
/// as the summary does, so a series is filtered by case or fault without a join; and
/// the only names the two tables share are those grid columns (the windows'
/// `K.window_p99_s_ci_lo` was `K.p99_s_ci_lo`, the summary's interval of another
/// figure, so a join paired different numbers under one name).
#[test]
fn the_time_series_carries_the_grid_columns_and_shares_no_other_name_with_the_summary() {
    const ROBUST: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cli/fixtures/robust-faults.toml");
    let scratch = tempfile::tempdir().unwrap();
    run_into(scratch.path(), &[ROBUST, "--replicas", "2", "--set", "run.horizon_s=8", "--quiet", "--no-report"]);
    let dir = scratch.path().join("robust-faults");
    let summary = stampede_output::Table::read(&dir.join("summary.parquet")).unwrap();
    let series = stampede_output::Table::read(&dir.join("timeseries.parquet")).unwrap();
    let grid_columns =
        ["grid_point", "faults", "case_label", "faults.0.kind", "faults.0.added_s", "faults.0.added_s_used"];
    // A series named as a metric (`api.get.goodput_rps`) is that figure per bucket,
    // the mean over replicas with its t interval in both: the same name on purpose.
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let series_names: Vec<&str> = manifest["series"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    let a_series = |name: &str| {
        ["_mean", "_ci_lo", "_ci_hi"]
            .iter()
            .any(|suffix| name.strip_suffix(suffix).is_some_and(|s| series_names.contains(&s)))
    };
    let shared: Vec<&str> = series.names().filter(|name| summary.has(name) && !a_series(name)).collect();
    let mut expected: Vec<&str> =
        summary.names().take_while(|name| *name != "replicas").filter(|name| series.has(name)).collect();
    expected.sort_unstable();
    let mut sorted = shared.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, expected, "the tables share their grid columns and series, nothing else");
    assert!(summary.has("api.get.goodput_rps_mean") && series.has("api.get.goodput_rps_mean"));
    for column in ["grid_point", "faults", "case_label", "faults.0.kind"] {
        assert!(shared.contains(&column), "{column} in both: {shared:?} (grid columns: {grid_columns:?})");
    }
    assert!(series.has("api.get.window_p99_all_s_ci_lo") && !series.has("api.get.p99_all_s_ci_lo"));
    // Each row's case and fault are its grid point's, as the summary says.
    let (points, labels, kinds) = (
        summary.numbers("grid_point").unwrap(),
        summary.strings("case_label").unwrap(),
        summary.strings("faults.0.kind").unwrap(),
    );
    let (row_points, row_labels, row_kinds) = (
        series.numbers("grid_point").unwrap(),
        series.strings("case_label").unwrap(),
        series.strings("faults.0.kind").unwrap(),
    );
    assert_eq!(points.len(), 4, "two cases × two faults");
    for row in 0..series.rows() {
        let point = points.iter().position(|p| *p == row_points[row]).unwrap();
        assert_eq!((&row_labels[row], &row_kinds[row]), (&labels[point], &kinds[point]), "row {row}");
    }
    let kinds_seen: std::collections::BTreeSet<&String> = row_kinds.iter().collect();
    assert_eq!(kinds_seen.len(), 2, "both faults have rows: {kinds_seen:?}");
}
