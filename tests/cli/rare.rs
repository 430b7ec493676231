//! `stampede rare`: the gambler's ruin of an M/M/1 busy period found within its
//! interval from the command line, the same bytes on any thread count, a graph grid
//! estimated point by point, and bad input refused (exit 2) with nothing written.

use std::path::Path;

use super::common::{files_below, stampede, stderr, stdout};
use serde_json::Value;

const MM1: &str = r#"name = "mm1"
model = "mmc"
[run]
horizon_s = 100000.0
replicas = 1
seed = 5
[queue]
arrival_rate_per_s = 1.0
service_rate_per_s = 2.0
servers = 1
"#;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let file = dir.join(name);
    std::fs::write(&file, text).unwrap();
    file.to_str().unwrap().to_string()
}

fn rare_json(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("rare.json")).unwrap()).unwrap()
}

#[test]
fn a_busy_period_reaching_twelve_is_found_within_its_interval_on_any_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "mm1.toml", MM1);
    let exact = 1.0 / (2f64.powi(12) - 1.0);
    let mut tables = Vec::new();
    for threads in ["1", "2"] {
        let out = dir.path().join(format!("out{threads}"));
        let args =
            ["rare", &file, "--event", "in_system >= 12", "--until", "in_system == 0", "--relative-error", "15%"];
        let output = stampede(&[&args[..], &["--threads", threads, "--out", out.to_str().unwrap()]].concat());
        assert!(output.status.success(), "{}", stderr(&output));
        let text = stdout(&output);
        assert!(text.contains("P(in_system >= 12 within 100000 s, before in_system == 0)"), "{text}");
        assert!(text.contains("plain replicas would need"), "{text}");
        let folder = out.join("mm1-rare");
        let point = &rare_json(&folder)["points"][0];
        let (p, lo, hi) = (
            point["probability"].as_f64().unwrap(),
            point["ci_lo"].as_f64().unwrap(),
            point["ci_hi"].as_f64().unwrap(),
        );
        assert!(lo <= exact && exact <= hi, "{exact} outside [{lo}, {hi}] (estimate {p})");
        assert!(point["relative_error"].as_f64().unwrap() <= 0.15);
        let files: Vec<String> = files_below(&folder).iter().map(|f| f.display().to_string()).collect();
        assert_eq!(files, ["estimates.parquet", "manifest.json", "rare.json", "stages.parquet"]);
        tables.push((
            std::fs::read(folder.join("estimates.parquet")).unwrap(),
            std::fs::read(folder.join("stages.parquet")).unwrap(),
        ));
    }
    assert!(tables[0] == tables[1], "one thread and two wrote different tables");
}

#[test]
fn a_graph_grid_gets_an_estimate_per_point_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "api.toml",
        r#"name = "api"
model = "graph"
[run]
horizon_s = 2.0
replicas = 1
[services.api]
workers = 2
queue = { capacity = 100 }
[services.api.endpoints.get]
work = { dist = "exponential", mean_s = 0.01 }
[[workload]]
entry = "api.get"
rate_per_s = 100.0
[grid]
"services.api.workers" = [2, 3]
"#,
    );
    let out = dir.path().join("out");
    let output = stampede(&[
        "rare",
        &file,
        "--event",
        "api.queue_depth >= 12",
        "--trajectories",
        "30",
        "--max-runs",
        "40",
        "--relative-error",
        "30%",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let document: Value = serde_json::from_str(&stdout(&output)).unwrap();
    let points = document["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    let p: Vec<f64> = points.iter().map(|p| p["probability"].as_f64().unwrap()).collect();
    // Three workers at 100/s (33% busy) reach a queue of 12 far less often than two (50%).
    assert!(p[0] > 0.0 && p[1] < p[0], "{p:?}");
    assert_eq!(document, rare_json(&out.join("api-rare")));
}

#[test]
fn bad_input_is_refused_by_name_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "mm1.toml", MM1);
    let out = dir.path().join("out");
    let cases: [(&[&str], &str); 6] = [
        (
            &["--event", "depth >= 3"],
            "'depth' is not a state quantity of this model; it has in_system, queue_depth, busy",
        ),
        (&["--event", "in_system >= many"], "'many' is not a number"),
        (&["--event", "in_system == 3"], "--score"),
        (&["--event", "in_system >= 3", "--within", "soon"], "--within \"soon\": a positive duration"),
        (&["--event", "in_system >= 3", "--levels", "5,2"], "the levels must increase"),
        (&["--event", "in_system >= 3", "--replicas", "9"], "bound them with --max-runs"),
    ];
    for (args, expected) in cases {
        let output = stampede(&[&["rare", file.as_str(), "--out", out.to_str().unwrap()], args].concat());
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stderr(&output));
        assert!(stderr(&output).contains(expected), "{args:?}: {}", stderr(&output));
    }
    let output = stampede(&["rare", "llm-naive", "--event", "x >= 1", "--out", out.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("has no state quantities `rare` can observe yet"), "{}", stderr(&output));
    assert!(!out.exists(), "nothing is written for bad input");
}
