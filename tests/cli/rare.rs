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

/// A graph of one api (2 workers, 10 ms of work) over `horizon_s` at `rate_per_s`,
/// with `more` TOML after it.
fn api_graph(horizon_s: f64, rate_per_s: f64, more: &str) -> String {
    format!(
        "name = \"api\"\nmodel = \"graph\"\n[run]\nhorizon_s = {horizon_s:?}\nreplicas = 1\n\
         [services.api]\nworkers = 2\n[services.api.endpoints.get]\n\
         work = {{ dist = \"exponential\", mean_s = 0.01 }}\n\
         [[workload]]\nentry = \"api.get\"\nrate_per_s = {rate_per_s:?}\n{more}"
    )
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
        assert_eq!(files, ["estimates.parquet", "manifest.json", "rare.json", "report.html", "stages.parquet"]);
        let page = std::fs::read_to_string(folder.join("report.html")).unwrap();
        assert!(page.contains("P(in_system &gt;= 12 within 100000 s") && page.contains("The ladder"), "{page}");
        // `stampede report` draws the same page again from rare.json.
        std::fs::remove_file(folder.join("report.html")).unwrap();
        let again = stampede(&["report", folder.to_str().unwrap()]);
        assert!(again.status.success(), "{}", stderr(&again));
        assert_eq!(std::fs::read_to_string(folder.join("report.html")).unwrap(), page);
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
    let grid = "[services.api.queue]\ncapacity = 100\n[grid]\n\"services.api.workers\" = [2, 3]\n";
    let file = write(dir.path(), "api.toml", &api_graph(2.0, 100.0, grid));
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

/// Events judged at the end of a run: a window statistic every span meets is
/// certain (1, exactly, with no interval), and a graph's p99 over a window gets an
/// estimate between 0 and 1 with the levels its end score (attempts in flight) found.
#[test]
fn a_window_of_latencies_and_a_metric_are_judged_at_the_end_of_each_trajectory() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "api.toml", &api_graph(4.0, 120.0, ""));
    let out = dir.path().join("out");
    let estimate = |event: &str| {
        let effort = ["--trajectories", "30", "--min-runs", "4", "--max-runs", "4", "--json"];
        let output =
            stampede(&[&["rare", &file, "--event", event, "--out", out.to_str().unwrap()], &effort[..]].concat());
        assert!(output.status.success(), "{event}: {}", stderr(&output));
        let document: Value = serde_json::from_str(&stdout(&output)).unwrap();
        let point = &document["points"][0];
        (point["probability"].as_f64().unwrap(), point["ci_lo"].as_f64().unwrap(), point["ci_hi"].as_f64().unwrap())
    };
    assert_eq!(estimate("window(2, ended_rps) >= 0"), (1.0, 1.0, 1.0));
    assert_eq!(estimate("api.get.offered >= 1"), (1.0, 1.0, 1.0));
    let (p, lo, hi) = estimate("window(1, api.get.p99_all_s) > 0.08");
    assert!(0.0 < lo && lo <= p && p <= hi && hi < 1.0, "{p} [{lo}, {hi}]");
}

#[test]
fn bad_input_is_refused_by_name_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "mm1.toml", MM1);
    let out = dir.path().join("out");
    let cases: [(&[&str], &str); 13] = [
        (
            &["--event", "depth >= 3"],
            "'depth' is not a state quantity of this model (in_system, queue_depth, busy, rejected), nor a metric of \
             the run (",
        ),
        (&["--event", "in_system >= many"], "'many' is not a number"),
        (&["--event", "in_system == 3"], "--score"),
        (&["--event", "in_system >= 3", "--within", "soon"], "--within \"soon\": a positive duration"),
        (&["--event", "in_system >= 3", "--levels", "5,2"], "the levels must increase"),
        (&["--event", "in_system >= 3", "--replicas", "9"], "bound them with --max-runs"),
        (&[], "--event: required, QUANTITY OP NUMBER"),
        (&["--event", "in_system >= 3", "--max-events", "lots"], "--max-events \"lots\": a positive count"),
        (&["--event", "in_system >= 3", "--max-events", "0"], "--max-events \"0\": a positive count"),
        (
            &["--event", "in_system >= 3", "--relative-error", "150%"],
            "--relative-error \"150%\": a share between 0 and 1",
        ),
        (&["--event", "in_system >= 3", "--per", "1x"], "--per \"1x\": a positive duration"),
        (&["--event", "rejected_ratio > 0", "--until", "in_system == 0"], "--until: an event judged at the end"),
        (&["--event", "window(60, p99_all_s) > 2"], "this model keeps no latencies over time"),
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

/// The arguments' forms: a share as a percentage, levels with spaces, a count with a
/// unit (`250k`), as the run reads them back in its JSON.
#[test]
fn shares_levels_and_counts_parse_in_every_documented_form() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "mm1.toml", MM1);
    let out = dir.path().join("out");
    let output = stampede(&[
        "rare",
        file.as_str(),
        "--event",
        "in_system >= 3",
        "--until",
        "in_system == 0",
        "--relative-error",
        "50%",
        "--levels",
        "1, 2,3",
        "--max-events",
        "250k",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let document = rare_json(&out.join("mm1-rare"));
    assert_eq!(document["target_relative_error"], 0.5, "{document}");
    assert_eq!(document["points"][0]["levels"], serde_json::json!([1.0, 2.0, 3.0]), "{document}");
}

/// The built-in retry-storm question runs from its `[rare]` section alone and gives
/// each policy a probability per minute and per day; the naive client's is far above
/// the budgeted one's (1.7e-4 against 4.3e-8 a minute at full effort, docs/src/rare.md).
/// Here at a sliver of the effort: the shape, not the figures.
#[test]
fn the_builtin_storm_question_runs_from_its_section_with_a_figure_per_day() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let args = ["rare", "graph-storm-odds", "--trajectories", "20", "--min-runs", "2", "--max-runs", "2", "--out", out];
    let output = stampede(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("P(api.queue_depth >= 150 within 60 s)"), "{text}");
    assert_eq!(text.matches("    per 1d: ").count(), 2, "{text}");
    let document = rare_json(&dir.path().join("graph-storm-odds-rare"));
    assert_eq!(document["per"], "1d");
    let points = document["points"].as_array().unwrap();
    let figure = |point: usize, key: &str| points[point]["per_period"][key].as_f64().unwrap();
    assert_eq!(points[0]["per_period"]["windows"].as_f64(), Some(1440.0));
    let minute = points[0]["probability"].as_f64().unwrap();
    assert!(
        (figure(0, "probability") - (1.0 - (1.0 - minute).powf(1440.0))).abs() < 1e-9,
        "per day is 1 − (1 − p)^1440: {}",
        figure(0, "probability")
    );
    assert!(figure(0, "ci_lo") <= figure(0, "probability") && figure(0, "probability") <= figure(0, "ci_hi"));
    assert!(minute > 10.0 * points[1]["probability"].as_f64().unwrap(), "naive above budgeted: {points:?}");
    // The command line's flags win over the section: a period shorter than the window
    // is refused, naming the flag.
    let short = stampede(&["rare", "graph-storm-odds", "--per", "30s", "--out", out]);
    assert_eq!(short.status.code(), Some(2));
    assert!(stderr(&short).contains("--per \"30s\": shorter than the window (60 s)"), "{}", stderr(&short));
}

/// Shards of a fixed number of runs merge into the folder one process writes, byte
/// for byte; a missing shard is named; a shard needs --runs.
#[test]
fn shards_merge_into_the_single_process_folder_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "mm1.toml", MM1);
    let (whole, parts, merged) = (dir.path().join("whole"), dir.path().join("parts"), dir.path().join("merged"));
    let question = ["rare", &file, "--event", "in_system >= 10", "--until", "in_system == 0", "--runs", "7", "--quiet"];
    let output = stampede(&[&question[..], &["--out", whole.to_str().unwrap()]].concat());
    assert!(output.status.success(), "{}", stderr(&output));
    let shards = parts.join("mm1-rare").join("shards");
    for k in ["0/3", "2/3"] {
        let output = stampede(&[&question[..], &["--shard", k, "--out", parts.to_str().unwrap()]].concat());
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let incomplete = stampede(&["merge", shards.to_str().unwrap(), "--out", merged.to_str().unwrap()]);
    assert_eq!(incomplete.status.code(), Some(2));
    assert!(stderr(&incomplete).contains("shards 1 of 3 are missing"), "{}", stderr(&incomplete));
    assert!(!merged.exists());
    let output = stampede(&[&question[..], &["--shard", "1/3", "--out", parts.to_str().unwrap()]].concat());
    assert!(output.status.success(), "{}", stderr(&output));
    let output = stampede(&["merge", shards.to_str().unwrap(), "--out", merged.to_str().unwrap(), "--quiet"]);
    assert!(output.status.success(), "{}", stderr(&output));
    for name in ["estimates.parquet", "stages.parquet", "rare.json"] {
        let (a, b) = (whole.join("mm1-rare").join(name), merged.join("mm1-rare").join(name));
        assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap(), "{name} differs");
    }
    let unbounded = stampede(&["rare", &file, "--event", "in_system >= 10", "--shard", "0/2", "--out", "x"]);
    assert_eq!(unbounded.status.code(), Some(2));
    assert!(stderr(&unbounded).contains("--shard needs --runs N"), "{}", stderr(&unbounded));
}
