//! `stampede run --trace R`: trace.parquet is identical for any thread count, is
//! listed in the manifest, adds up to replica R's row of replicas.parquet, and bad
//! requests are refused before anything is written.

use std::path::Path;

use stampede_output::{ColumnValues, Table};

use crate::common::{stampede, stderr};

fn strings(table: &Table, name: &str) -> Vec<String> {
    table.strings(name).unwrap().to_vec()
}

fn u32s(table: &Table, name: &str) -> Vec<u32> {
    table.numbers(name).unwrap().into_iter().map(|x| x as u32).collect()
}

fn bools(table: &Table, name: &str) -> Vec<bool> {
    match table.column(name).unwrap() {
        ColumnValues::Bool(v) => v.iter().map(|b| b.expect("counted is never NULL")).collect(),
        other => panic!("{name}: {other:?}"),
    }
}

/// Replica `replica`'s value of `metric` at `point` in replicas.parquet.
fn replica_metric(dir: &Path, point: u32, replica: u32, metric: &str) -> f64 {
    let table = Table::read(&dir.join("replicas.parquet")).unwrap();
    let (points, replicas) = (u32s(&table, "grid_point"), u32s(&table, "replica"));
    let row = (0..points.len()).find(|&i| points[i] == point && replicas[i] == replica).expect("the replica's row");
    table.numbers(metric).unwrap()[row]
}

#[test]
fn a_trace_is_the_same_for_any_thread_count_and_adds_up_to_its_replica() {
    let root = std::env::temp_dir().join(format!("stampede-trace-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let mut bytes = Vec::new();
    for threads in ["1", "2"] {
        let out = root.join(threads);
        let args =
            ["run", "llm-retries", "--replicas", "3", "--trace", "1", "--threads", threads, "--no-report", "--quiet"];
        let output = stampede(&[&args[..], &["--out", out.to_str().unwrap()]].concat());
        assert!(output.status.success(), "{}", stderr(&output));
        let dir = out.join("llm-retries");
        let manifest = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
        assert!(manifest.contains("\"trace.parquet\""), "the manifest lists the trace");
        bytes.push(std::fs::read(dir.join("trace.parquet")).unwrap());
    }
    assert_eq!(bytes[0], bytes[1], "the trace does not depend on the thread count");
    let dir = root.join("1/llm-retries");
    let trace = Table::read(&dir.join("trace.parquet")).unwrap();
    let (points, replicas) = (u32s(&trace, "grid_point"), u32s(&trace, "replica"));
    let (kinds, classes, outcomes, counted) =
        (strings(&trace, "kind"), strings(&trace, "class"), strings(&trace, "outcome"), bools(&trace, "counted"));
    assert!(replicas.iter().all(|&r| r == 1));
    let count = |point: u32, kind: &str, class: &str, outcome: Option<&str>| {
        (0..kinds.len())
            .filter(|&i| points[i] == point && counted[i] && kinds[i] == kind && classes[i] == class)
            .filter(|&i| outcome.is_none_or(|o| outcomes[i] == o))
            .count() as f64
    };
    let mut failures_seen = 0.0;
    for point in 0..3 {
        for class in ["guard", "rewrite", "answer", "think", "title"] {
            let metric = |name: &str| replica_metric(&dir, point, 1, &format!("{class}_{name}"));
            assert_eq!(count(point, "call", class, None), metric("offered"), "{point} {class} offered");
            assert_eq!(count(point, "call", class, Some("served")), metric("served"), "{point} {class} served");
            assert_eq!(count(point, "attempt", class, None), metric("attempts"), "{point} {class} attempts");
            for reason in [
                "admission_shed",
                "queue_full",
                "codel_drop",
                "limiter",
                "timeout_connect",
                "timeout_first_token",
                "http_500",
                "http_529",
            ] {
                let failed = metric(&format!("failed_{reason}"));
                assert_eq!(count(point, "call", class, Some(reason)), failed, "{point} {class} {reason}");
                failures_seen += failed;
            }
        }
    }
    assert!(failures_seen > 0.0, "the brownout fails some calls");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn the_cluster_and_the_dependency_trace_their_requests() {
    let root = std::env::temp_dir().join(format!("stampede-trace-models-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for (scenario, served) in [("baltor", "successes"), ("dependency-slowdown", "served_high")] {
        let args = [
            "run",
            scenario,
            "--replicas",
            "2",
            "--trace",
            "0",
            "--no-report",
            "--quiet",
            "--out",
            root.to_str().unwrap(),
        ];
        let output = stampede(&args);
        assert!(output.status.success(), "{scenario}: {}", stderr(&output));
        let dir = root.join(scenario);
        let trace = Table::read(&dir.join("trace.parquet")).unwrap();
        let (points, kinds, outcomes, classes, counted) = (
            u32s(&trace, "grid_point"),
            strings(&trace, "kind"),
            strings(&trace, "outcome"),
            strings(&trace, "class"),
            bools(&trace, "counted"),
        );
        let class = if scenario == "baltor" { "request" } else { "high" };
        let calls = (0..kinds.len())
            .filter(|&i| {
                points[i] == 0 && counted[i] && kinds[i] == "call" && outcomes[i] == "served" && classes[i] == class
            })
            .count() as f64;
        assert_eq!(calls, replica_metric(&dir, 0, 0, served), "{scenario}");
        assert!(kinds.iter().any(|k| k == "incident") && kinds.iter().any(|k| k == "wait"), "{scenario}");
    }
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_bad_trace_request_is_refused_before_anything_is_written() {
    let root = std::env::temp_dir().join(format!("stampede-trace-bad-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let out = root.to_str().unwrap();
    for (args, says) in [
        (vec!["run", "llm-retries", "--replicas", "3", "--trace", "3"], "--trace 3: the run has replicas 0 to 2"),
        (vec!["run", "mmc", "--trace", "0"], "model mmc does not trace its requests"),
        (vec!["run", "llm-retries", "--trace", "0", "--shard", "0/2"], "--trace with --shard"),
        (vec!["verify", "llm-retries", "--trace", "0"], "--trace belongs to `stampede run`"),
    ] {
        let output = stampede(&[&args[..], &["--out", out, "--quiet"]].concat());
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(stderr(&output).contains(says), "{args:?}: {}", stderr(&output));
        assert!(!root.exists() || std::fs::read_dir(&root).unwrap().next().is_none(), "{args:?} wrote nothing");
    }
}

/// The graph's trace is a forest of request trees that adds up to its replica's row:
/// one root call per entry request, the hedges and attempts each edge counted.
#[test]
fn a_graph_trace_adds_up_to_its_replica_and_every_parent_is_in_it() {
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path();
    let args = ["run", "graph-hedging", "--replicas", "2", "--trace", "1", "--set", "run.horizon_s=4"];
    let run = stampede(&[&args[..], &["--out", out.to_str().unwrap(), "--quiet", "--no-report"]].concat());
    assert!(run.status.success(), "{}", stderr(&run));
    let dir = out.join("graph-hedging");
    let table = Table::read(&dir.join("trace.parquet")).unwrap();
    let (points, kinds, gates) = (u32s(&table, "grid_point"), strings(&table, "kind"), strings(&table, "gate"));
    let (spans, parents, counted) = (u32s(&table, "span_id"), u32s(&table, "parent_span_id"), bools(&table, "counted"));
    let classes = strings(&table, "class");
    for point in 0..3u32 {
        let rows: Vec<usize> = (0..points.len()).filter(|&i| points[i] == point).collect();
        let known: std::collections::HashSet<u32> = rows.iter().map(|&i| spans[i]).collect();
        assert_eq!(known.len(), rows.len(), "point {point}: span ids are unique");
        for &i in &rows {
            assert!(
                parents[i] == u32::MAX || known.contains(&parents[i]),
                "point {point}: row {i}'s parent is missing"
            );
        }
        let count = |f: &dyn Fn(usize) -> bool| rows.iter().filter(|&&i| counted[i] && f(i)).count() as f64;
        let roots = count(&|i| kinds[i] == "call" && parents[i] == u32::MAX);
        assert_eq!(roots, replica_metric(&dir, point, 1, "front.read.offered"), "point {point}");
        let hedges = count(&|i| kinds[i] == "attempt" && gates[i] == "hedge");
        assert_eq!(hedges, replica_metric(&dir, point, 1, "front->store.hedges"), "point {point}");
        let attempts = count(&|i| kinds[i] == "attempt" && classes[i] == "store.get");
        assert_eq!(attempts, replica_metric(&dir, point, 1, "front->store.attempts"), "point {point}");
        assert_eq!(hedges > 0.0, point > 0, "point {point}: hedges only where the case hedges");
    }
}
