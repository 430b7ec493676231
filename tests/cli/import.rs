//! `stampede import`: the round trip (a graph's simulated trace exported as OTLP and
//! imported gives back its services, edges, parallel groups, call probabilities, self
//! times, network and entry rate, and a run of the imported scenario answers as the
//! original does), each format's fixture, and bad input.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::common::{stampede, stderr, stdout};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/fixtures").join(name)
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stampede-import-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn table(path: &Path) -> toml::Table {
    std::fs::read_to_string(path).unwrap().parse().unwrap()
}

/// Each endpoint's steps, as (callee, probability, parallel group index) in order.
fn plans(scenario: &toml::Table) -> BTreeMap<String, Vec<(String, f64, usize)>> {
    let mut plans = BTreeMap::new();
    for (service, body) in scenario["services"].as_table().unwrap() {
        for (endpoint, body) in body["endpoints"].as_table().unwrap() {
            let mut calls = Vec::new();
            let steps = body.get("steps").and_then(|s| s.as_array()).cloned().unwrap_or_default();
            for (group, step) in steps.iter().enumerate() {
                let members = step.get("parallel").and_then(|p| p.as_array()).cloned().unwrap_or(vec![step.clone()]);
                for member in members {
                    let p = member.get("probability").and_then(|p| p.as_float()).unwrap_or(1.0);
                    calls.push((member["call"].as_str().unwrap().to_string(), p, group));
                }
            }
            plans.insert(format!("{service}.{endpoint}"), calls);
        }
    }
    plans
}

fn edges(scenario: &toml::Table) -> BTreeSet<String> {
    let mut edges = BTreeSet::new();
    for (service, body) in scenario["services"].as_table().unwrap() {
        for calls in plans(&toml::Table::from_iter([(
            "services".to_string(),
            toml::Value::Table(toml::Table::from_iter([(service.clone(), body.clone())])),
        )]))
        .values()
        {
            for (callee, ..) in calls {
                edges.insert(format!("{service}->{}", callee.split('.').next().unwrap()));
            }
        }
    }
    edges
}

/// The `q` quantile of a sample file written by import (one value a line, a header).
fn sample_quantile(path: &Path, q: f64) -> f64 {
    let mut values: Vec<f64> =
        std::fs::read_to_string(path).unwrap().lines().skip(1).map(|l| l.parse().unwrap()).collect();
    values.sort_by(f64::total_cmp);
    values[(q * (values.len() - 1) as f64).round() as usize]
}

/// The gamma(shape 2, scale θ) quantile, by bisection on its CDF 1 − e^(−x/θ)(1 + x/θ).
fn gamma2_quantile(theta: f64, q: f64) -> f64 {
    let (mut lo, mut hi) = (0.0, 100.0 * theta);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        let cdf = 1.0 - (-mid / theta).exp() * (1.0 + mid / theta);
        if cdf < q {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Entry `front.page`'s p50 and p99 means over the run's replicas.
fn entry_quantiles(scenario: &Path, out: &Path) -> (f64, f64) {
    let args = ["run", scenario.to_str().unwrap(), "--out", out.to_str().unwrap(), "--no-report", "--json"];
    let output = stampede(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    let metrics = &json["grid"][0]["metrics"];
    (metrics["front.page.p50_s"]["mean"].as_f64().unwrap(), metrics["front.page.p99_s"]["mean"].as_f64().unwrap())
}

#[test]
fn a_graphs_otlp_trace_imports_back_to_the_same_graph_and_runs_alike() {
    let dir = temp("roundtrip");
    let original_path = fixture("import-roundtrip.toml");
    let original = table(&original_path);
    // One replica traced, as OTLP.
    let out = dir.join("out");
    let args = [
        "run",
        original_path.to_str().unwrap(),
        "--trace",
        "0",
        "--trace-format",
        "otlp",
        "--replicas",
        "1",
        "--out",
        out.to_str().unwrap(),
        "--no-report",
        "--quiet",
    ];
    let output = stampede(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    let trace = out.join("roundtrip/trace.otlp.json");
    assert!(!out.join("roundtrip/trace.parquet").exists(), "--trace-format otlp writes only the OTLP file");
    let imported_path = dir.join("imported.toml");
    let output = stampede(&["import", trace.to_str().unwrap(), "--out", imported_path.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let summary = stdout(&output);
    assert!(summary.contains("5 services, 5 endpoints, 4 edges"), "{summary}");
    let imported = table(&imported_path);

    // The same services, edges and parallel groups; probabilities within ±0.02.
    let services = |t: &toml::Table| t["services"].as_table().unwrap().keys().cloned().collect::<BTreeSet<_>>();
    assert_eq!(services(&imported), services(&original));
    assert_eq!(edges(&imported), edges(&original));
    let (want, got) = (plans(&original), plans(&imported));
    assert_eq!(want.keys().collect::<Vec<_>>(), got.keys().collect::<Vec<_>>());
    for (endpoint, calls) in &want {
        let found = &got[endpoint];
        assert_eq!(calls.len(), found.len(), "{endpoint}: {found:?}");
        for ((callee, p, group), (callee2, p2, group2)) in calls.iter().zip(found) {
            assert_eq!((callee, group), (callee2, group2), "{endpoint}: {found:?}");
            assert!((p - p2).abs() <= 0.02, "{endpoint} -> {callee}: probability {p2}, written {p}");
        }
    }

    // Self times: medians and p90s within 5% of the original's distributions.
    let z90: f64 = 1.281_551_565_5;
    let expected: [(&str, f64, f64); 5] = [
        ("front.page", 0.004, 0.004 * (0.5 * z90).exp()),
        ("auth.check", 0.002 * 2f64.ln(), 0.002 * 10f64.ln()),
        ("catalog.list", gamma2_quantile(0.005, 0.5), gamma2_quantile(0.005, 0.9)),
        ("prices.get", 0.005 * 2f64.ln(), 0.005 * 10f64.ln()),
        ("db.query", 0.008, 0.008 * (0.3 * z90).exp()),
    ];
    for (endpoint, median, p90) in expected {
        let file = dir.join(format!("imported.data/{endpoint}.self_s.csv"));
        let (m, p) = (sample_quantile(&file, 0.5), sample_quantile(&file, 0.9));
        assert!((m / median - 1.0).abs() < 0.05, "{endpoint}: self-time median {m}, the distribution's {median}");
        assert!((p / p90 - 1.0).abs() < 0.05, "{endpoint}: self-time p90 {p}, the distribution's {p90}");
    }
    // The one network delay, one way.
    let network = sample_quantile(&dir.join("imported.data/front-catalog.network_s.csv"), 0.5);
    assert!((network / 0.0005 - 1.0).abs() < 0.05, "front->catalog network {network}");
    // The entry rate within 2%.
    let workload = &imported["workload"].as_array().unwrap()[0];
    assert_eq!(workload["entry"].as_str(), Some("front.page"));
    let rate = workload["rate_per_s"].as_float().unwrap();
    assert!((rate / 200.0 - 1.0).abs() < 0.02, "entry rate {rate}");

    // Run alike: the imported scenario with the original's workers, instances, run and
    // arrivals gives the entry's p50 and p99 within 5%.
    let mut patched = imported.clone();
    for (service, body) in patched["services"].as_table_mut().unwrap() {
        let source = original["services"][service.as_str()].as_table().unwrap();
        let body = body.as_table_mut().unwrap();
        body.insert("workers".into(), source["workers"].clone());
        body.insert("instances".into(), source.get("instances").cloned().unwrap_or(toml::Value::Integer(1)));
    }
    patched.insert("run".into(), original["run"].clone());
    let entry = patched["workload"].as_array_mut().unwrap()[0].as_table_mut().unwrap();
    entry.insert("arrivals".into(), toml::Value::String("even".into()));
    let patched_path = dir.join("patched.toml");
    std::fs::write(&patched_path, toml::to_string(&patched).unwrap()).unwrap();
    let (p50, p99) = entry_quantiles(&original_path, &dir.join("run-original"));
    let (p50_imported, p99_imported) = entry_quantiles(&patched_path, &dir.join("run-imported"));
    println!("entry p50 {p50:.5} s vs {p50_imported:.5} s; p99 {p99:.5} s vs {p99_imported:.5} s");
    assert!((p50_imported / p50 - 1.0).abs() < 0.05, "p50: original {p50}, imported {p50_imported}");
    assert!((p99_imported / p99 - 1.0).abs() < 0.05, "p99: original {p99}, imported {p99_imported}");
    let _ = std::fs::remove_dir_all(&dir);
}
