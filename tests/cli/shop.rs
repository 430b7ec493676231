//! The shop of issue 44 (`fixtures/shop.toml`: edge → orders → inventory ∥
//! pricing-cache → pricing, then payments for 30%; a payments incident, two
//! overlapping inventory crashes; retries, a budget, a breaker) run as its user ran
//! it, with a trace: no overlapping fault undoes another, no span is an orphan, and
//! every failed request names its root cause — in the metrics and the trace alike.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use stampede_output::{ColumnValues, Table};

use crate::common::{stampede, stderr};

const SHOP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cli/fixtures/shop.toml");
const NONE: u32 = u32::MAX;

fn u32s(table: &Table, name: &str) -> Vec<u32> {
    table.numbers(name).unwrap().into_iter().map(|x| x as u32).collect()
}

fn run_shop(out: &Path) -> std::path::PathBuf {
    let args = ["run", SHOP, "--replicas", "2", "--trace", "0", "--quiet", "--out", out.to_str().unwrap()];
    let output = stampede(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    out.join("shop")
}

#[test]
fn the_shop_runs_without_overlap_orphan_or_lost_cause_defects() {
    let out = std::env::temp_dir().join(format!("stampede-shop-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let dir = run_shop(&out);
    let trace = Table::read(&dir.join("trace.parquet")).unwrap();
    let (points, spans, parents) =
        (u32s(&trace, "grid_point"), u32s(&trace, "span_id"), u32s(&trace, "parent_span_id"));
    let kinds = trace.strings("kind").unwrap();
    let (gates, causes, outcomes) =
        (trace.strings("gate").unwrap(), trace.strings("cause").unwrap(), trace.strings("outcome").unwrap());
    let starts = trace.numbers("start_s").unwrap();
    let counted = match trace.column("counted").unwrap() {
        ColumnValues::Bool(v) => v.iter().map(|b| b.expect("counted is never NULL")).collect::<Vec<bool>>(),
        other => panic!("counted: {other:?}"),
    };

    // No orphan: every parent is a span of its grid point's trace; roots are entry calls.
    let known: HashSet<(u32, u32)> = points.iter().zip(&spans).map(|(&p, &s)| (p, s)).collect();
    for i in 0..trace.rows() {
        if parents[i] == NONE {
            assert!(
                kinds[i] == "call" || kinds[i] == "state" || kinds[i] == "incident",
                "row {i}: a root {}",
                kinds[i]
            );
        } else {
            assert!(
                known.contains(&(points[i], parents[i])),
                "row {i} ({} {}) has no parent in the trace",
                kinds[i],
                outcomes[i]
            );
        }
    }

    // Overlapping crashes of inventory#0 (16–20 s and 18–22 s): down from 16 s to 22 s,
    // refusing in every second of it, and in none after.
    for point in 0..3 {
        let mut per_second = BTreeMap::<u32, u32>::new();
        for i in (0..trace.rows()).filter(|&i| points[i] == point && kinds[i] == "refusal" && gates[i] == "inventory") {
            *per_second.entry(starts[i] as u32).or_default() += 1;
        }
        let seconds: Vec<u32> = per_second.keys().copied().collect();
        assert_eq!(seconds, (16..22).collect::<Vec<_>>(), "point {point}: inventory refused in {per_second:?}");
    }

    // Root causes: replica 0's failed_by counts are its trace's causes, they add up to
    // its failures, and the breaker case names payments' breaker though the entry only
    // saw orders' errors.
    let replicas = Table::read(&dir.join("replicas.parquet")).unwrap();
    let (rows_point, rows_replica) = (u32s(&replicas, "grid_point"), u32s(&replicas, "replica"));
    let failed_by: Vec<String> =
        replicas.columns.iter().map(|(n, _)| n).filter(|n| n.starts_with("edge.api.failed_by.")).cloned().collect();
    assert_eq!(failed_by.len(), 6 * 4, "six services × four ways to fail: {failed_by:?}");
    for point in 0..3u32 {
        let row = (0..replicas.rows()).find(|&r| rows_point[r] == point && rows_replica[r] == 0).unwrap();
        let metric = |name: &str| replicas.numbers(name).unwrap()[row];
        let total: f64 = failed_by.iter().map(|m| metric(m)).sum();
        let failed: f64 = ["timeout", "refused", "error", "breaker_open"]
            .iter()
            .map(|f| metric(&format!("edge.api.failed_{f}")))
            .sum();
        assert_eq!(total, failed, "point {point}: the causes add up to the failures");
        for name in &failed_by {
            let cause = name.trim_start_matches("edge.api.failed_by.");
            let traced = (0..trace.rows())
                .filter(|&i| {
                    points[i] == point && counted[i] && parents[i] == NONE && kinds[i] == "call" && causes[i] == cause
                })
                .count() as f64;
            assert_eq!(traced, metric(name), "point {point}: {cause} in the trace and the metric");
        }
        assert!(metric("edge.api.failed_by.inventory.refused") > 0.0, "point {point}: the crash is inventory's");
        assert_eq!(metric("edge.api.failed_by.orders.error"), 0.0, "orders only passes failures up");
        if point == 2 {
            assert_eq!(metric("edge.api.failed_breaker_open"), 0.0, "the entry's own breaker never opened");
            assert!(metric("edge.api.failed_by.payments.breaker_open") > 100.0, "the breaker below is the cause");
        } else {
            assert!(metric("edge.api.failed_by.payments.error") > 100.0, "point {point}: payments' errors");
        }
    }
    // Per call site: checkout's payments call (30% of requests) has its own figures.
    for point in 0..3u32 {
        let row = (0..replicas.rows()).find(|&r| rows_point[r] == point && rows_replica[r] == 0).unwrap();
        let metric = |name: &str| replicas.numbers(name).unwrap()[row];
        let (orders, payments) =
            (metric("edge.api->orders.place.offered"), metric("orders.place->payments.charge.offered"));
        let share = payments / orders;
        assert!((0.27..0.33).contains(&share), "point {point}: payments called for {share} of orders");
        assert!(metric("orders.place->payments.charge.failed_ratio") > 0.05, "the incident shows on its call site");
        assert!(metric("orders.place->inventory.check.p99_s") > 0.0);
    }
    let report = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(report.contains("Where failures came from"), "the report says where failures came from");
    let _ = std::fs::remove_dir_all(&out);
}

/// `--case` keeps the named cases (run, verify, show); claims name cases by label and
/// follow them — a claim about a case left out is skipped, saying which; a verdict
/// line names the case first; unknown labels are refused listing the cases.
#[test]
fn cases_are_chosen_by_label_and_claims_follow_them() {
    let out = std::env::temp_dir().join(format!("stampede-shop-cases-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let out_arg = out.to_str().unwrap();
    let all = stampede(&["verify", SHOP, "--replicas", "3", "--no-report", "--quiet", "--out", out_arg]);
    assert!(all.status.success(), "{}", stderr(&all));
    let verdicts = crate::common::stdout(&all);
    assert!(verdicts.contains("PASS  shop #2 \"breaker\""), "{verdicts}");
    assert!(verdicts.contains("PASS  shop #1 \"budget\""), "{verdicts}");
    let one =
        stampede(&["verify", SHOP, "--case", "breaker", "--replicas", "3", "--no-report", "--quiet", "--out", out_arg]);
    assert!(one.status.success(), "{}", stderr(&one));
    let verdicts = crate::common::stdout(&one);
    assert!(verdicts.contains("PASS  shop #0 \"breaker\""), "the breaker's claim follows it to point 0: {verdicts}");
    assert!(
        verdicts.contains("SKIP  shop verify[1]: the point case = \"budget\" is not in this run's grid"),
        "{verdicts}"
    );
    let show = stampede(&["show", SHOP, "--case", "retries", "--case", "budget"]);
    let shown = crate::common::stdout(&show);
    assert!(
        shown.contains("label = \"retries\"")
            && shown.contains("label = \"budget\"")
            && !shown.contains("label = \"breaker\""),
        "{shown}"
    );
    let bad = stampede(&["run", SHOP, "--case", "circuit", "--out", out_arg]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("--case \"circuit\": no such case; the cases: \"retries\", \"budget\", \"breaker\""),
        "{}",
        stderr(&bad)
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// Names that do not fight SQL (issue 44, item 13): the case column is `case_label`, a
/// fault axis has readable columns per field (`faults.0.duration_s`), edge metrics are
/// `A->B.…` with no `edge.` prefix, and a claim naming the old spelling is told the new.
#[test]
fn summary_columns_need_no_quoting_beyond_the_dots() {
    let out = std::env::temp_dir().join(format!("stampede-shop-names-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let faults =
        "faults=[[{ target = \"payments\", kind = \"errors\", rate = 1.0, start_s = 6.0, duration_s = 4.0 }], \
                  [{ target = \"payments\", kind = \"errors\", rate = 1.0, start_s = 6.0, duration_s = 8.0 }]]";
    let args = ["run", SHOP, "--case", "breaker", "--grid", faults, "--replicas", "2", "--no-report", "--quiet"];
    let output = stampede(&[&args[..], &["--out", out.to_str().unwrap()]].concat());
    assert!(output.status.success(), "{}", stderr(&output));
    let summary = Table::read(&out.join("shop/summary.parquet")).unwrap();
    assert_eq!(summary.strings("case_label").unwrap(), ["breaker", "breaker"]);
    assert!(!summary.has("case"), "no column named by the SQL keyword");
    assert_eq!(summary.numbers("faults.0.duration_s").unwrap(), [4.0, 8.0]);
    assert_eq!(summary.strings("faults.0.target").unwrap(), ["payments", "payments"]);
    assert_eq!(summary.strings("faults.0.kind").unwrap(), ["errors", "errors"]);
    assert!(
        summary.has("orders->payments.breaker_refusals_mean")
            && !summary.columns.iter().any(|(n, _)| n.starts_with("edge.orders"))
    );
    // The old spelling in a claim: refused, naming the new one.
    let text = std::fs::read_to_string(SHOP).unwrap()
        + "\n[[verify]]\ncase = \"breaker\"\nmetric = \"edge.orders->payments.breaker_trips\"\nstatistic = \"mean\"\nat_least = 1.0\n";
    let old = out.join("old.toml");
    std::fs::write(&old, text).unwrap();
    let refused = stampede(&["verify", old.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("edge metrics are named without `edge.` now: \"orders->payments.breaker_trips\""),
        "{}",
        stderr(&refused)
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// `timeout_s = "p99"` on an edge (issue 44, item 5): runs with its ceiling, and its
/// mistakes are refused naming the field.
#[test]
fn an_edge_takes_a_timeout_from_the_callees_running_quantile() {
    let out = std::env::temp_dir().join(format!("stampede-shop-timeout-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let edge = "edges.orders->payments";
    let run = |sets: &[String]| {
        let mut args =
            vec!["run".to_string(), SHOP.into(), "--case".into(), "retries".into(), "--replicas".into(), "2".into()];
        args.extend(["--no-report", "--quiet", "--out", out.to_str().unwrap()].map(String::from));
        for set in sets {
            args.extend(["--set".to_string(), set.clone()]);
        }
        stampede(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let ok = run(&[format!("{edge}.timeout_s=\"p99\""), format!("{edge}.timeout_max_s=0.5")]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    let summary = Table::read(&out.join("shop/summary.parquet")).unwrap();
    assert!(summary.numbers("orders->payments.timeouts_mean").unwrap()[0] >= 0.0);
    for (sets, message) in [
        (vec![format!("{edge}.timeout_s=\"p99\"")], "timeout_s = \"p99\": give timeout_max_s too"),
        (
            vec![format!("{edge}.timeout_s=\"p100\""), format!("{edge}.timeout_max_s=1")],
            "a running quantile of the callee's latency such as \"p99\"",
        ),
        (vec![format!("{edge}.timeout_s=\"p95 * 0\""), format!("{edge}.timeout_max_s=1")], "timeout_s = \"p95 * 0\""),
        (vec![format!("{edge}.timeout_max_s=1")], "timeout_min_s and timeout_max_s bound an adaptive timeout"),
    ] {
        let refused = run(&sets);
        assert_eq!(refused.status.code(), Some(2), "{sets:?}");
        assert!(stderr(&refused).contains(message), "{sets:?}: {}", stderr(&refused));
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// Issue 71's question, "why", on the SRE's shop (`fixtures/shop-slowdown.toml`):
/// payments slowed 40× makes browse requests — which never call payments — fail at
/// edge, whose workers all wait on checkout, whose workers all wait on payments. The
/// summary says where (`failed_by.edge.refused`) and why (`caused_by.payments`, ≥ 90% of
/// the failures and of the slow answers), the trace's failed calls name payments in
/// `cause_service`, and the report's "What caused the failures" draws it.
#[test]
fn a_payments_slowdown_names_payments_as_the_cause_of_browse_failures() {
    const SLOWDOWN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cli/fixtures/shop-slowdown.toml");
    let out = tempfile::tempdir().unwrap();
    let args = ["run", SLOWDOWN, "--trace", "0", "--quiet", "--out", out.path().to_str().unwrap()];
    let output = stampede(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    let dir = out.path().join("shop-slowdown");
    let summary = Table::read(&dir.join("summary.parquet")).unwrap();
    let mean = |metric: &str| summary.numbers(&format!("{metric}_mean")).unwrap()[0];
    let failed = mean("edge.browse.offered") * mean("edge.browse.failed_ratio");
    assert!(failed > 500.0, "browse requests fail in the slowdown: {failed}");
    assert!(mean("edge.browse.failed_by.edge.refused") >= 0.9 * failed, "where: edge refused them");
    let caused = mean("edge.browse.caused_by.payments");
    assert!(caused >= 0.9 * failed, "why: payments caused {caused} of {failed}");
    assert_eq!(mean("edge.browse.caused_by.edge"), 0.0);
    let slow = mean("edge.browse.slow");
    assert!(slow > 100.0 && mean("edge.browse.slow_caused_by.payments") >= 0.9 * slow, "{slow} slow");

    let trace = Table::read(&dir.join("trace.parquet")).unwrap();
    let (kinds, classes) = (trace.strings("kind").unwrap(), trace.strings("class").unwrap());
    let (causes, culprits) = (trace.strings("cause").unwrap(), trace.strings("cause_service").unwrap());
    let failed_browse: Vec<usize> = (0..trace.rows())
        .filter(|&r| kinds[r] == "call" && classes[r] == "edge.browse" && causes[r] == "edge.refused")
        .collect();
    assert!(failed_browse.len() > 500, "{} failed browse calls in the trace", failed_browse.len());
    assert!(failed_browse.iter().all(|&r| culprits[r] == "payments"), "each names payments as its cause");

    let report = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(report.contains("What caused the failures"), "the report's section");
    assert!(report.contains("caused: payments"), "names payments");
}
