//! `stampede calibrate` (issue 50): hidden values recovered from noisy "production"
//! (one run of the true system, its series averaged per interval, 2% measurement
//! noise), a misspecified model flagged by name, a Prometheus answer read to the same
//! result as its CSV, the same answer on any thread count, and bad input refused.
//!
//! Production is made through `stampede run` and its `timeseries.parquet` — not through
//! calibrate's own reading of replicas — so the two paths check each other.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use stampede_engine::{RngStream, StreamPurpose};

use crate::common::{stampede, stderr, stdout};

/// The system: clients → api (workers, work, a chance of a db call) → db. `{…}` holes:
/// the api's workers, its work scale line, the call probability, the load.
const SYSTEM: &str = r#"
name = "NAME"
description = "an api with a slow database behind it"
model = "graph"

[run]
horizon_s = 200.0
warmup_s = 0.0
replicas = 20
seed = SEED

[services.api]
workers = WORKERS
queue = { capacity = 4000 }

[services.api.endpoints.read]
work = { dist = "exponential", mean_s = 0.0133 SCALE }
STEPS

[services.db]
workers = 8
queue = { capacity = 4000 }

[services.db.endpoints.query]
work = { dist = "exponential", mean_s = 0.05 }

[edges."client->api"]
timeout_s = 60.0

DB_EDGE

[[workload]]
entry = "api.read"
LOAD

[series]
bucket_s = 0.05
latency_window_s = 20.0
"#;

/// Offered load, arrivals per second from each time: two bursts past the api's
/// capacity (about 484/s for the true system), so its busy workers show their number.
const BURSTS: &[(f64, f64)] =
    &[(0.0, 250.0), (40.0, 380.0), (80.0, 600.0), (100.0, 200.0), (140.0, 330.0), (160.0, 570.0), (180.0, 250.0)];

/// A load that stays below capacity (latency is then steady enough to compare).
const CALM: &[(f64, f64)] = &[(0.0, 250.0), (60.0, 380.0), (120.0, 330.0), (160.0, 250.0)];

const INTERVAL_S: f64 = 20.0;

struct System<'a> {
    name: &'a str,
    seed: u64,
    workers: u32,
    scale: Option<f64>,
    /// The db call's probability; `None`: the api calls no db (the misspecified model).
    probability: Option<f64>,
    /// `None`: a constant 250/s, to be replaced by the observed load.
    load: Option<&'a [(f64, f64)]>,
}

/// A workload's load: a step schedule of `(time, rate)`, or a constant 250/s (`None`,
/// to be replaced by the observed load).
fn load_line(load: Option<&[(f64, f64)]>) -> String {
    match load {
        Some(steps) => {
            let points: Vec<String> = steps.iter().map(|(t, r)| format!("[{t}, {r}]")).collect();
            format!("load = {{ rate = [{}], interpolate = \"step\" }}", points.join(", "))
        }
        None => "rate_per_s = 250.0".into(),
    }
}

impl System<'_> {
    fn toml(&self) -> String {
        let load = load_line(self.load);
        SYSTEM
            .replace("NAME", self.name)
            .replace("SEED", &self.seed.to_string())
            .replace("WORKERS", &self.workers.to_string())
            .replace(" SCALE", &self.scale.map_or(String::new(), |s| format!(", scale = {s}")))
            .replace(
                "STEPS",
                &self
                    .probability
                    .map_or(String::new(), |p| format!("steps = [{{ call = \"db.query\", probability = {p} }}]")),
            )
            .replace("DB_EDGE", if self.probability.is_some() { "[edges.\"api->db\"]\ntimeout_s = 60.0" } else { "" })
            .replace("LOAD", &load)
    }

    fn write(&self, dir: &Path) -> PathBuf {
        let path = dir.join(format!("{}.toml", self.name));
        std::fs::write(&path, self.toml()).unwrap();
        path
    }
}

/// The mean of a `timeseries.parquet` column over the buckets starting in `[start, end)`.
fn interval_mean(times: &[f64], values: &[f64], start: f64, end: f64) -> f64 {
    let inside: Vec<f64> =
        (0..times.len()).filter(|&b| times[b] >= start - 1e-9 && times[b] < end - 1e-9).map(|b| values[b]).collect();
    inside.iter().sum::<f64>() / inside.len() as f64
}

/// The rate of `steps` at `t`.
fn rate_at(steps: &[(f64, f64)], t: f64) -> f64 {
    steps.iter().rev().find(|(start, _)| *start <= t).expect("from 0").1
}

/// The `timeseries.parquet` column of calibrate's metric `m`: a latency quantile
/// `K.p99_s` is the windows' `K.window_p99_s`; anything else keeps its name.
fn window_column(m: &str) -> String {
    match m.rsplit_once('.') {
        Some((kind, quantile)) if quantile.starts_with('p') && quantile.ends_with("_s") => {
            format!("{kind}.window_{quantile}")
        }
        _ => m.to_string(),
    }
}

/// Production: one replica of `truth` (seed 99), each metric averaged over 20 s
/// intervals (a window's p99 read as it is), times 1 + 2% normal noise; written as
/// the CSV calibrate reads. Returns the CSV's path and its rows (for the Prometheus twin).
fn production(dir: &Path, truth: &System, metrics: &[&str]) -> (PathBuf, Vec<(f64, Vec<f64>)>) {
    let scenario = truth.write(dir);
    measured(dir, &scenario, truth.name, truth.load.unwrap(), metrics, INTERVAL_S, 200.0, 5)
}

/// One replica of the scenario file `scenario` (named `name`, driven by `load`), each
/// metric averaged over intervals of `interval_s` up to `horizon_s`, times 1 + 2% normal
/// noise from `noise_seed`; written as the CSV calibrate reads.
#[allow(clippy::too_many_arguments)]
fn measured(
    dir: &Path,
    scenario: &Path,
    name: &str,
    load: &[(f64, f64)],
    metrics: &[&str],
    interval_s: f64,
    horizon_s: f64,
    noise_seed: u64,
) -> (PathBuf, Vec<(f64, Vec<f64>)>) {
    let out = dir.join("production");
    let output = stampede(&[
        "run",
        scenario.to_str().unwrap(),
        "--replicas",
        "1",
        "--quiet",
        "--force",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let table = stampede_output::read::Table::read(&out.join(name).join("timeseries.parquet")).unwrap();
    let times = table.numbers("t_s").unwrap();
    let mut rng = RngStream::derive(noise_seed, 0, StreamPurpose::named("calibrate.test.noise"));
    let mut noise = || {
        let (u, v) = (rng.uniform_open01(), rng.uniform01());
        1.0 + 0.02 * (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    };
    let intervals = (horizon_s / interval_s) as usize;
    let columns: Vec<Vec<f64>> = metrics
        .iter()
        .map(|m| {
            let column = if m.ends_with("_s") { window_column(m) } else { format!("{m}_mean") };
            table.numbers(&column).unwrap_or_else(|e| panic!("{column}: {e}"))
        })
        .collect();
    let mut rows = Vec::new();
    for i in 0..intervals {
        let (start, end) = (i as f64 * interval_s, (i + 1) as f64 * interval_s);
        let mut values = vec![rate_at(load, start)];
        for column in &columns {
            values.push(interval_mean(&times, column, start, end) * noise());
        }
        rows.push((start, values));
    }
    let mut csv = format!("time_s,api.read.offered_rps,{}\n", metrics.join(","));
    for (t, values) in &rows {
        let cells: Vec<String> = values.iter().map(|v| format!("{v:.6}")).collect();
        csv.push_str(&format!("{t},{}\n", cells.join(",")));
    }
    let path = dir.join("observed.csv");
    std::fs::write(&path, csv).unwrap();
    (path, rows)
}

fn calibrate(args: &[&str]) -> std::process::Output {
    let mut all = vec!["calibrate"];
    all.extend(args);
    stampede(&all)
}

fn json(output: &std::process::Output) -> Value {
    serde_json::from_str(&stdout(output)).unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(output), stderr(output)))
}

/// The docs' worked example: the files `docs/src/calibrate.md` walks through.
const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/src/examples");
const CHAPTER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/src/calibrate.md");

/// The maps the chapter gives, from its recording rules' series to stampede's names.
const DOCS_MAPS: [&str; 4] = [
    "api.read.offered_rps=api:http_requests:rate20s{handler=\"/read\"}",
    "api.read.goodput_rps=api:http_responses_ok:rate20s{handler=\"/read\"}",
    "api.busy=job:busy_workers:avg20s{job=\"api\"}",
    "db.busy=job:busy_workers:avg20s{job=\"db\"}",
];

/// Production's rows (offered, then `api.busy`, `db.busy`, `api.read.goodput_rps`) as a
/// Prometheus range-query answer of the chapter's recording rules: Unix seconds, a
/// sample at T for the 20 s ending at T, values as strings.
fn docs_answer(rows: &[(f64, Vec<f64>)]) -> Value {
    let series = |labels: Value, column: usize| {
        let values: Vec<Value> = rows
            .iter()
            .map(|(t, v)| serde_json::json!([1_764_720_000.0 + t + INTERVAL_S, format!("{:.4}", v[column])]))
            .collect();
        serde_json::json!({"metric": labels, "values": values})
    };
    let json = |text: &str| -> Value { serde_json::from_str(text).unwrap() };
    serde_json::json!({"status": "success", "data": {"resultType": "matrix", "result": [
        series(json(r#"{"__name__": "api:http_requests:rate20s", "job": "api", "handler": "/read"}"#), 0),
        series(json(r#"{"__name__": "job:busy_workers:avg20s", "job": "api"}"#), 1),
        series(json(r#"{"__name__": "job:busy_workers:avg20s", "job": "db"}"#), 2),
        series(json(r#"{"__name__": "api:http_responses_ok:rate20s", "job": "api", "handler": "/read"}"#), 3),
    ]}})
}

/// A shell line's words: spaces split, single quotes group (all the chapter uses).
fn shell_words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quoted, mut any) = (Vec::new(), String::new(), false, false);
    for c in line.chars() {
        match c {
            '\'' => (quoted, any) = (!quoted, true),
            c if c.is_whitespace() && !quoted => {
                if any {
                    words.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            c => {
                assert!(
                    quoted || !matches!(c, '"' | '\\' | '$' | '`'),
                    "a shell feature the test does not read: {line}"
                );
                word.push(c);
                any = true;
            }
        }
    }
    assert!(!quoted, "an unclosed quote: {line}");
    if any {
        words.push(word);
    }
    words
}

/// Whether to rewrite the docs' example files and output instead of checking them.
fn updating() -> bool {
    std::env::var_os("STAMPEDE_UPDATE_FIGURES").is_some()
}

/// The issue's recovery test, as the docs walk it: a work scale of 1.3, 12 workers
/// and a 0.15 call probability, hidden in production (the chapter's Prometheus
/// answer, regenerated here from one run of the true system and checked against the
/// committed file), fitted from a model that guesses 1, 20 and 0.3: each recovered
/// within 5% and inside its interval, every metric's MAPE ≤ 5%, and the chapter
/// quotes exactly what the command prints.
#[test]
fn recovers_hidden_values_from_noisy_production() {
    let dir = tempfile::tempdir().unwrap();
    let truth =
        System { name: "truth", seed: 99, workers: 12, scale: Some(1.3), probability: Some(0.15), load: Some(BURSTS) };
    let (_, rows) = production(dir.path(), &truth, &["api.busy", "db.busy", "api.read.goodput_rps"]);
    let answer = docs_answer(&rows);
    let model = System { name: "checkout", seed: 1, workers: 20, scale: None, probability: Some(0.3), load: None };
    let (answer_file, model_file) =
        (format!("{EXAMPLES}/calibrate-production.json"), format!("{EXAMPLES}/calibrate-model.toml"));
    if updating() {
        std::fs::write(&answer_file, serde_json::to_string_pretty(&answer).unwrap() + "\n").unwrap();
        std::fs::write(&model_file, model.toml().trim_start()).unwrap();
    }
    let committed: Value = serde_json::from_str(&std::fs::read_to_string(&answer_file).unwrap()).unwrap();
    assert_eq!(
        committed, answer,
        "the docs' production file is one run of the true system (STAMPEDE_UPDATE_FIGURES=1 rewrites it)"
    );
    assert_eq!(std::fs::read_to_string(&model_file).unwrap(), model.toml().trim_start());
    let page = dir.path().join("page.html");
    let written = dir.path().join("calibrated.toml");
    // The chapter's command, as written (its `sh,calibrate` block), run from the
    // repository's root, the page and scenario kept out of it.
    let chapter = std::fs::read_to_string(CHAPTER).unwrap();
    let command = chapter.split("```sh,calibrate\n").nth(1).and_then(|rest| rest.split("```").next()).unwrap();
    let words = shell_words(&command.replace("\\\n", " "));
    assert_eq!(words[..2], ["stampede", "calibrate"], "{command}");
    assert!(
        words.contains(&"--max-error".to_string()) && words.iter().filter(|w| *w == "--map").count() == DOCS_MAPS.len()
    );
    for map in DOCS_MAPS {
        assert!(words.iter().any(|w| w == map), "the chapter maps {map}");
    }
    let mut args: Vec<String> = words[2..].to_vec();
    args.extend(["--page".into(), page.display().to_string(), "--write".into(), written.display().to_string()]);
    let output = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .arg("calibrate")
        .args(&args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}\n{}", stdout(&output), stderr(&output));
    let account: String = stdout(&output)
        .lines()
        .filter(|l| !l.starts_with("page:") && !l.starts_with("calibrated scenario:"))
        .map(|l| format!("{l}\n"))
        .collect();
    // The fitted values, read off the account: `  PATH  VALUE   95% [LO, HI]`.
    for (path, truth) in [
        ("services.api.endpoints.read.work.scale", 1.3),
        ("services.api.workers", 12.0),
        ("services.api.endpoints.read.steps.0.probability", 0.15),
    ] {
        let line = account
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{path} ")))
            .unwrap_or_else(|| panic!("{path}: {account}"));
        let words: Vec<&str> = line.split_whitespace().collect();
        let number = |w: &str| w.trim_matches(|c| c == '[' || c == ']' || c == ',').parse::<f64>().unwrap();
        let (value, lo, hi) = (number(words[1]), number(words[3]), number(words[4]));
        assert!((value / truth - 1.0).abs() <= 0.05, "{path}: {value} against {truth}");
        assert!(lo <= truth && truth <= hi, "{path}: {truth} outside [{lo}, {hi}]");
    }
    for metric in ["api.busy", "db.busy", "api.read.goodput_rps"] {
        let line = account.lines().find(|l| l.trim_start().starts_with(&format!("{metric} "))).unwrap();
        let mape: f64 = line.split_whitespace().nth(1).unwrap().trim_end_matches('%').parse().unwrap();
        assert!(mape <= 5.0, "{metric}: MAPE {mape}%");
    }
    assert!(account.contains("load: api.read.offered_rps drives the run"), "{account}");
    // The cost said before the first replica is what the search is expected to run
    // ("about", not a bound: it once said "at most" and ran two thirds more), and the
    // search lands near it: ran = candidates × replicas each + the report's replicas.
    let said = stderr(&output);
    let count = |text: &str, after: &str| -> f64 {
        let rest = text.split(after).nth(1).unwrap_or_else(|| panic!("{after:?} in {text}"));
        rest.split([' ', ';']).next().unwrap().parse().unwrap_or_else(|_| panic!("{after:?} in {text}"))
    };
    let planned = count(&said, "stampede calibrate: about ");
    let ran = count(&account, "fitted (") * count(&account, " candidates × ") + count(&account, "fidelity (");
    assert!((0.5..=1.5).contains(&(ran / planned)), "planned {planned} replicas, ran {ran}");
    // The chapter quotes the account between its markers.
    let (begin, end) = ("<!-- calibrate output: begin -->\n```text\n", "```\n<!-- calibrate output: end -->");
    let (head, rest) = chapter.split_once(begin).expect("the chapter marks the output");
    let (quoted, tail) = rest.split_once(end).expect("the chapter marks the output's end");
    if updating() {
        std::fs::write(CHAPTER, format!("{head}{begin}{account}{end}{tail}")).unwrap();
    } else {
        assert_eq!(quoted, account, "docs/src/calibrate.md quotes another run (STAMPEDE_UPDATE_FIGURES=1 rewrites it)");
    }
    // The calibrated scenario runs as it is, carrying the fitted values and the load.
    let text = std::fs::read_to_string(&written).unwrap();
    assert!(text.starts_with("# Calibrated by `stampede calibrate`"), "{text}");
    let resolved: toml::Table = toml::from_str(&text).unwrap();
    assert_eq!(resolved["services"]["api"]["workers"].as_integer(), Some(12));
    let rate = resolved["workload"][0]["load"]["rate"].as_array().unwrap();
    assert_eq!(rate.len(), BURSTS.len(), "one step per change of the observed load: {rate:?}");
    let show = stampede(&["show", written.to_str().unwrap()]);
    assert!(show.status.success(), "{}", stderr(&show));
    // The page: production and simulation side by side, one plot per metric.
    let html = std::fs::read_to_string(&page).unwrap();
    for metric in ["api.busy", "db.busy", "api.read.goodput_rps"] {
        assert!(html.contains(&format!("data-metric=\"{metric}\"")), "{metric} missing from the page");
    }
    assert_eq!(html.matches("<svg").count(), 3);
    assert!(html.contains("production") && html.contains("simulated mean"));
}

/// Production has a database behind the api; the model has none. Work scale and
/// workers could absorb the mean, not the shape: the best compromise still misses the
/// latency tail (and pays for it elsewhere), and calibrate names the metrics that
/// disagree, worst first, and exits 1. The right model passes the same bound on the
/// same data.
#[test]
fn a_missing_dependency_is_flagged_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let truth =
        System { name: "truth", seed: 99, workers: 12, scale: Some(1.3), probability: Some(0.15), load: Some(CALM) };
    let (observed, _) = production(dir.path(), &truth, &["api.busy", "api.read.goodput_rps", "api.read.p99_s"]);
    let right = System { name: "right", seed: 1, workers: 12, scale: Some(1.3), probability: Some(0.15), load: None };
    let output = calibrate(&[
        right.write(dir.path()).to_str().unwrap(),
        "--observed",
        observed.to_str().unwrap(),
        "--check",
        "--max-error",
        "10%",
        "--page",
        dir.path().join("right.html").to_str().unwrap(),
    ]);
    assert!(output.status.success(), "the right model passes: {}\n{}", stdout(&output), stderr(&output));
    let lacking = System { name: "lacking", seed: 1, workers: 20, scale: None, probability: None, load: None };
    let output = calibrate(&[
        lacking.write(dir.path()).to_str().unwrap(),
        "--observed",
        observed.to_str().unwrap(),
        "--fit",
        "services.api.endpoints.read.work.scale=0.5..4",
        "--fit",
        "services.api.workers=4..32:int",
        // A small search: no compromise of scale and workers reaches the tail, so
        // where it stops does not matter (86 s with the default 16 points × 8
        // replicas, in a debug build).
        "--samples",
        "8",
        "--fit-replicas",
        "4",
        "--steps",
        "2",
        "--max-error",
        "10%",
        "--json",
        "--page",
        dir.path().join("lacking.html").to_str().unwrap(),
        "--write",
        dir.path().join("calibrated-lacking.toml").to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1), "{}\n{}", stdout(&output), stderr(&output));
    let document = json(&output);
    assert_eq!(document["passed"], false);
    let disagreeing: Vec<&str> =
        document["disagreeing"].as_array().unwrap().iter().map(|d| d["metric"].as_str().unwrap()).collect();
    assert!(disagreeing.contains(&"api.read.p99_s"), "{document:#}");
    assert_eq!(document["worst"]["metric"], "api.read.p99_s");
    assert!(!disagreeing.contains(&"api.read.goodput_rps"), "throughput follows the load either way: {document:#}");
    assert!(stderr(&output).is_empty() || !stderr(&output).contains("error"), "{}", stderr(&output));
}

/// A Prometheus range-query answer with a map reads to the same fidelity report as its
/// CSV; the report is the same on one thread and on two; a fit is the same on one
/// thread and on two.
#[test]
fn prometheus_equals_csv_and_threads_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let truth =
        System { name: "truth", seed: 99, workers: 12, scale: Some(1.3), probability: Some(0.15), load: Some(CALM) };
    let metrics = ["api.busy", "api.read.goodput_rps"];
    let (csv, rows) = production(dir.path(), &truth, &metrics);
    // The same numbers as Prometheus answers them: Unix seconds, values as strings,
    // each metric a series of its own (plus one the map does not pick).
    let series = |name: &str, job: &str, column: usize| {
        let values: Vec<Value> =
            rows.iter().map(|(t, v)| serde_json::json!([1_700_000_000.0 + t, format!("{:.6}", v[column])])).collect();
        serde_json::json!({"metric": {"__name__": name, "job": job}, "values": values})
    };
    let answer = serde_json::json!({"status": "success", "data": {"resultType": "matrix", "result": [
        series("http_requests_rate", "api", 0),
        series("busy_workers", "api", 1),
        series("http_ok_rate", "api", 2),
        series("busy_workers", "db", 1),
    ]}});
    let prometheus = dir.path().join("observed.json");
    std::fs::write(&prometheus, answer.to_string()).unwrap();
    let model = System { name: "model", seed: 1, workers: 12, scale: Some(1.3), probability: Some(0.15), load: None };
    let scenario = model.write(dir.path());
    let check = |observed: &Path, threads: &str, maps: &[&str]| {
        let mut args = vec![
            scenario.to_str().unwrap(),
            "--observed",
            observed.to_str().unwrap(),
            "--check",
            "--json",
            "--replicas",
            "8",
            "--threads",
            threads,
            "--page",
        ];
        let page = dir.path().join(format!("check-{threads}.html"));
        let page = page.to_str().unwrap().to_string();
        args.push(&page);
        for map in maps {
            args.extend(["--map", map]);
        }
        let output = calibrate(&args);
        assert!(output.status.success(), "{}", stderr(&output));
        let mut document = json(&output);
        document["observed"] = Value::Null;
        document["page"] = Value::Null;
        document
    };
    let from_csv = check(&csv, "2", &[]);
    let maps = [
        "api.read.offered_rps=http_requests_rate{job=\"api\"}",
        "api.busy=busy_workers{job=\"api\"}",
        "api.read.goodput_rps=http_ok_rate",
    ];
    let from_prometheus = check(&prometheus, "2", &maps);
    assert_eq!(from_csv, from_prometheus);
    assert_eq!(check(&csv, "1", &[]), from_csv, "one thread or two: the same report");
    let fit = |threads: &str| {
        let output = calibrate(&[
            scenario.to_str().unwrap(),
            "--observed",
            csv.to_str().unwrap(),
            "--fit",
            "services.api.endpoints.read.work.scale=0.5..2",
            "--steps",
            "2",
            "--fit-replicas",
            "4",
            "--replicas",
            "4",
            "--threads",
            threads,
            "--json",
            "--page",
            dir.path().join("fit.html").to_str().unwrap(),
            "--write",
            dir.path().join("fit.toml").to_str().unwrap(),
            "--force",
        ]);
        assert!(output.status.success(), "{}", stderr(&output));
        json(&output)
    };
    assert_eq!(fit("1"), fit("2"), "a fit is the same on any thread count");
}

/// Bad input: exit 2, a message naming the problem, nothing written.
#[test]
fn bad_input_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let model = System { name: "model", seed: 1, workers: 12, scale: None, probability: Some(0.15), load: None };
    let scenario = model.write(dir.path());
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let good = write("good.csv", "time_s,api.busy\n0,5\n20,6\n40,7\n");
    let unknown = write("unknown.csv", "time_s,api.busy,api.cpu_seconds\n0,5,1\n20,6,1\n");
    let late = write("late.csv", "time_s,api.busy\n0,5\n150,6\n300,7\n");
    let one_row = write("one.csv", "time_s,api.busy\n0,5\n");
    let missing = dir.path().join("missing.csv");
    let page = dir.path().join("page.html");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--observed", unknown.to_str().unwrap(), "--check"], "column \"api.cpu_seconds\" is not a metric"),
        (vec!["--observed", late.to_str().unwrap(), "--check"], "ends after run.horizon_s"),
        (vec!["--observed", one_row.to_str().unwrap(), "--check"], "at least two intervals"),
        (vec!["--observed", good.to_str().unwrap(), "--fit", "services.api.nonsense=1..2"], "services.api.nonsense"),
        (
            vec!["--observed", good.to_str().unwrap(), "--fit", "services.api.endpoints.read.work.dist=1..2"],
            "is not a number",
        ),
        (vec!["--observed", good.to_str().unwrap(), "--fit", "services.api.workers=8..4:int"], "empty"),
        (vec!["--observed", good.to_str().unwrap(), "--fit", "services.api.workers=4..8", "--check"], "without --fit"),
        (vec!["--observed", good.to_str().unwrap()], "nothing to do"),
        (vec!["--observed", good.to_str().unwrap(), "--check", "--metric", "db.cpu"], "--metric db.cpu"),
        (vec!["--observed", good.to_str().unwrap(), "--check", "--max-error", "-3%"], "--max-error"),
        (vec!["--observed", missing.to_str().unwrap(), "--check"], "missing.csv"),
    ];
    for (args, says) in cases {
        let mut all = vec![scenario.to_str().unwrap(), "--page", page.to_str().unwrap()];
        all.extend(&args);
        let output = calibrate(&all);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stderr(&output));
        assert!(stderr(&output).contains(says), "{args:?}: expected {says:?} in {}", stderr(&output));
        assert!(!page.exists(), "{args:?} wrote the page");
    }
    // A grid: one configuration at a time.
    let output =
        calibrate(&["retry-storm", "--observed", good.to_str().unwrap(), "--check", "--page", page.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("grid points; calibrate fits one configuration"), "{}", stderr(&output));
}

/// Production from one run (seed 77) of built-in `name` with `sets`: each metric per
/// `step` seconds (series averaged over the interval's buckets; latency-window figures
/// read as they are, the windows one step wide). Returns the CSV's path.
fn production_of(dir: &Path, name: &str, sets: &[&str], step: f64, metrics: &[&str]) -> PathBuf {
    let out = dir.join(format!("production-{name}"));
    let mut args = vec!["run", name, "--replicas", "1", "--seed", "77", "--quiet", "--out", out.to_str().unwrap()];
    for set in sets {
        args.extend(["--set", set]);
    }
    let output = stampede(&args);
    assert!(output.status.success(), "{name}: {}", stderr(&output));
    let table = stampede_output::read::Table::read(&out.join(name).join("timeseries.parquet")).unwrap();
    let times = table.numbers("t_s").unwrap();
    let horizon = times.last().unwrap() + times[1] - times[0];
    let mut csv = format!("time_s,{}\n", metrics.join(","));
    let intervals = (horizon / step).round() as usize;
    for i in 0..intervals {
        let (start, end) = (i as f64 * step, (i + 1) as f64 * step);
        let cells: Vec<String> = metrics
            .iter()
            .map(|m| {
                let series = format!("{m}_mean");
                let column = if table.has(&series) { series } else { window_column(m) };
                let values = table.numbers(&column).unwrap_or_else(|e| panic!("{name} {column}: {e}"));
                let mean = interval_mean(&times, &values, start, end);
                if mean.is_finite() {
                    format!("{mean:.6}")
                } else {
                    String::new()
                }
            })
            .collect();
        csv.push_str(&format!("{start},{}\n", cells.join(",")));
    }
    let path = dir.join(format!("observed-{name}.csv"));
    std::fs::write(&path, csv).unwrap();
    path
}

/// Every model with metrics over time: the cluster (series and its responses'
/// windows), the dependency, and the gateway per tier and per class. Production from
/// one run of the built-in: the scenario as it is passes a loose bound; the same with
/// a wrong capacity fails it, naming a metric.
#[test]
fn cluster_dependency_and_gateway_are_checked_per_metric() {
    let dir = tempfile::tempdir().unwrap();
    // (built-in, its --set, the observed step, the metrics compared, a wrong --set)
    type Case<'a> = (&'a str, &'a [&'a str], f64, &'a [&'a str], &'a str);
    let cases: &[Case] = &[
        (
            "baltor",
            &["retry={policy=\"backoff\", budget=\"ratio\"}"],
            1.0,
            &["goodput_rps", "attempt_rps", "in_flight", "response.p50_all_s"],
            "shards.servers=2",
        ),
        (
            "dependency-slowdown",
            &["protection.policy=\"breaker\""],
            1.0,
            &["goodput_rps", "pool_busy", "response.p50_s", "response.ok_share"],
            "service.workers=20",
        ),
        (
            "llm-naive",
            &[],
            10.0,
            // Its latency windows are fixed by the horizon (2 s here), so production's
            // 10 s figures are rates and a class's share, which average over windows
            // (its turns, held up to the naive 60 s timeout, end too unevenly to compare
            // one production against the mean).
            &["goodput_tps", "attempt_rps", "haiku.attempt_rps", "sonnet.attempt_rps", "answer_call.ok_share"],
            "workload.turns_per_s=10",
        ),
    ];
    for &(name, sets, step, metrics, wrong) in cases {
        let production_sets: Vec<String> = sets
            .iter()
            .map(|s| s.to_string())
            .chain((name != "llm-naive").then(|| format!("series.latency_window_s={step}")))
            .collect();
        let production_sets: Vec<&str> = production_sets.iter().map(String::as_str).collect();
        let observed = production_of(dir.path(), name, &production_sets, step, metrics);
        let check = |extra: Option<&str>| {
            let page = dir.path().join(format!("{name}.html"));
            let mut args = vec![name, "--observed", observed.to_str().unwrap(), "--check", "--json", "--replicas", "8"];
            args.extend(["--max-error", "25%", "--page", page.to_str().unwrap(), "--force"]);
            for set in sets.iter().copied().chain(extra) {
                args.extend(["--set", set]);
            }
            let output = calibrate(&args);
            (output.status.code(), json(&output))
        };
        let (code, right) = check(None);
        assert_eq!(code, Some(0), "{name} as it is: {right:#}");
        let compared: Vec<&str> =
            right["fidelity"]["metrics"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap()).collect();
        assert_eq!(compared.len(), metrics.len(), "{name}");
        for metric in right["fidelity"]["metrics"].as_array().unwrap() {
            assert!(metric["points"].as_u64().unwrap() >= 5, "{name}: {metric:#}");
        }
        let (code, wrong_report) = check(Some(wrong));
        assert_eq!(code, Some(1), "{name} with {wrong}: {wrong_report:#}");
        assert!(wrong_report["worst"]["metric"].is_string(), "{name}");
    }
}

/// The issue's chain (issue 73): an api whose work scale is unknown, calling a db
/// whose worker count (an integer, 2..16) and call probability are unknown, seen over
/// twelve 10 s intervals of a load that brings the db to its capacity.
const CHAIN: &str = r#"
name = "chain"
model = "graph"

[run]
horizon_s = 120.0
warmup_s = 0.0
replicas = 20
seed = SEED

[services.api]
workers = 16
queue = { capacity = 4000 }

[services.api.endpoints.read]
work = { dist = "exponential", mean_s = 0.0133, scale = SCALE }
steps = [{ call = "db.query", probability = PROBABILITY }]

[services.db]
workers = DB_WORKERS
queue = { capacity = 4000 }

[services.db.endpoints.query]
work = { dist = "exponential", mean_s = 0.05 }

[edges."client->api"]
timeout_s = 60.0

[edges."api->db"]
timeout_s = 60.0

[[workload]]
entry = "api.read"
LOAD

[series]
bucket_s = 0.05
latency_window_s = 10.0
"#;

/// The chain's load: the db (0.4 × 50 ms a request) offered 4 to 6.6 workers' work.
const CHAIN_LOAD: &[(f64, f64)] =
    &[(0.0, 200.0), (20.0, 300.0), (40.0, 330.0), (60.0, 250.0), (80.0, 320.0), (100.0, 220.0)];

/// The chain's truth: api scale 0.7, 6 db workers, probability 0.4.
const CHAIN_TRUTH: [(&str, f64); 3] = [
    ("services.api.endpoints.read.work.scale", 0.7),
    ("services.db.workers", 6.0),
    ("services.api.endpoints.read.steps.0.probability", 0.4),
];

fn chain(seed: u64, scale: f64, db_workers: u32, probability: f64, load: Option<&[(f64, f64)]>) -> String {
    let load = load_line(load);
    CHAIN
        .replace("SEED", &seed.to_string())
        .replace("SCALE", &scale.to_string())
        .replace("DB_WORKERS", &db_workers.to_string())
        .replace("PROBABILITY", &probability.to_string())
        .replace("LOAD", &load)
}

/// A fitted unknown as the JSON gives it: value, interval, method.
type Fitted = (f64, Option<(f64, f64)>, String);

/// One production of the chain (its run's seed and noise from `seed`) calibrated from a
/// guess (scale 1, 10 workers, 0.3): each unknown's (value, interval, method).
fn calibrate_chain(seed: u64) -> Vec<Fitted> {
    let dir = tempfile::tempdir().unwrap();
    let truth = dir.path().join("truth.toml");
    std::fs::write(&truth, chain(1000 + seed, 0.7, 6, 0.4, Some(CHAIN_LOAD))).unwrap();
    // Goodput is left out: production's noisy goodput can exceed the exact offered
    // schedule, which calibrate rightly refuses.
    let metrics = ["api.busy", "db.busy"];
    let (observed, _) = measured(dir.path(), &truth, "chain", CHAIN_LOAD, &metrics, 10.0, 120.0, seed);
    let model = dir.path().join("model.toml");
    std::fs::write(&model, chain(1, 1.0, 10, 0.3, None)).unwrap();
    let output = calibrate(&[
        model.to_str().unwrap(),
        "--observed",
        observed.to_str().unwrap(),
        "--fit",
        "services.api.endpoints.read.work.scale=0.3..2",
        "--fit",
        "services.db.workers=2..16:int",
        "--fit",
        "services.api.endpoints.read.steps.0.probability=0.05..0.9",
        "--fit-replicas",
        "6",
        "--replicas",
        "10",
        "--json",
    ]);
    assert!(output.status.success(), "seed {seed}: {}", stderr(&output));
    let answer = json(&output);
    answer["fit"]["dimensions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let interval = d["ci_lo"].as_f64().zip(d["ci_hi"].as_f64());
            (d["value"].as_f64().unwrap(), interval, d["method"].as_str().unwrap_or("none").to_string())
        })
        .collect()
}

/// The issue's defect: with the db's worker count among the unknowns, calibrate found
/// all three values and then printed "not identified" for every one. Now each has an
/// interval — the workers' by their profile — and each covers the truth. A coverage
/// measurement, in the long tier (`--ignored`): one production takes 100-150 s of a
/// debug build, the CLI suite's longest test, so CI checks an integer unknown's profile
/// interval through the chapter's worked example (`recovers_hidden_values…`: 12 workers,
/// [12, 12]) and the rule itself in `optimize`'s unit tests (a synthetic chain's 1,000
/// seeds). `cargo test --test cli an_integer_unknown -- --ignored` runs one production;
/// with `STAMPEDE_COVERAGE_SEEDS=30` the issue's thirty, asking each unknown's interval to
/// cover the truth in at least 85% of them (measured: 30, 30 and 28 of 30;
/// docs/src/calibrate.md says more).
#[test]
#[ignore = "a coverage measurement (100-150 s a production): cargo test --test cli an_integer_unknown -- --ignored"]
fn an_integer_unknown_keeps_every_interval_and_each_covers_the_truth() {
    let seeds: u64 = std::env::var("STAMPEDE_COVERAGE_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    // `STAMPEDE_COVERAGE_FROM=K` starts at production K (to split the thirty over machines).
    let from: u64 = std::env::var("STAMPEDE_COVERAGE_FROM").ok().and_then(|s| s.parse().ok()).unwrap_or(0);
    let mut covered = [0u64; 3];
    for seed in from..from + seeds {
        let fitted = calibrate_chain(seed);
        for (j, ((value, interval, method), (path, truth))) in fitted.iter().zip(CHAIN_TRUTH).enumerate() {
            let (lo, hi) = interval.unwrap_or_else(|| panic!("seed {seed}: {path} = {value} has no interval"));
            // An integer's interval is always its profile; a continuous unknown's is
            // the curvature where a quadratic describes the discrepancy, else its profile.
            assert!(if j == 1 { method == "profile" } else { method != "none" }, "seed {seed}: {path} {method}");
            eprintln!("seed {seed}: {path} = {value} [{lo}, {hi}] {method}");
            if lo <= truth && truth <= hi {
                covered[j] += 1;
            }
        }
    }
    eprintln!("covered {covered:?} of {seeds}");
    for (j, (path, _)) in CHAIN_TRUTH.iter().enumerate() {
        let need = if seeds >= 30 { (seeds * 85).div_ceil(100) } else { seeds };
        assert!(covered[j] >= need, "{path}: covered in {} of {seeds} productions", covered[j]);
    }
}
