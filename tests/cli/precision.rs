//! `--precision`, `plan --precision` and `merge --precision`: the replicas chosen in
//! stages give exactly a plain run's bytes, the manifest says what was asked and
//! reached, the pilot's plan is met by its merge, and bad input writes nothing.

use super::common::{files_below, parquet_tables, stampede, stderr, stdout};
use serde_json::Value;

fn manifest(dir: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap()
}

/// The replicas a run with `--precision` reports it stopped at.
fn replicas_of(dir: &std::path::Path) -> u64 {
    manifest(dir)["replicas"].as_u64().unwrap()
}

#[test]
fn verify_with_precision_chooses_the_replicas_and_equals_the_plain_run_of_that_size() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("staged");
    let output = stampede(&["verify", "baltor", "--precision", "5%", "--no-report", "--out", out.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let (said, progress) = (stdout(&output), stderr(&output));
    let folder = out.join("baltor");
    let replicas = replicas_of(&folder);
    // It says how many it needed and why: the metric that needed the most.
    assert!(
        said.contains(&format!(
            "precision 5% met with {replicas} replicas a point; the one that needed the most: recovery_s"
        )),
        "{said}"
    );
    assert!(progress.contains("precision 5%: 20 replicas a point: 1 metric(s) short"), "{progress}");
    let recorded = &manifest(&folder)["precision"];
    assert_eq!(recorded["met"], true);
    assert_eq!(recorded["asked"][0], "5%");
    let stages: Vec<u64> = recorded["stages"].as_array().unwrap().iter().map(|s| s.as_u64().unwrap()).collect();
    assert_eq!((stages[0], *stages.last().unwrap()), (20, replicas), "{stages:?}");
    assert!(stages.windows(2).all(|w| w[1] as f64 >= 1.1 * w[0] as f64 && w[1] <= 8 * w[0]), "{stages:?}");
    // The stages' scratch folder is gone: only the run's folder is left.
    assert!(files_below(&out).iter().all(|f| f.starts_with("baltor")), "{:?}", files_below(&out));
    for metric in recorded["metrics"].as_array().unwrap() {
        assert!(metric["reached"].as_f64().unwrap() <= 0.05, "{metric}");
    }
    // A share is held to REL of its range, a time to REL of its mean.
    let by_name =
        |name: &str| recorded["metrics"].as_array().unwrap().iter().find(|m| m["metric"] == name).unwrap().clone();
    assert_eq!(by_name("success_ratio")["relative_to"], "range");
    let recovery = by_name("recovery_s");
    assert_eq!(recovery["relative_to"], "mean");
    let (hw, mean) = (recovery["half_width"].as_f64().unwrap(), recovery["mean"].as_f64().unwrap());
    assert!((hw / mean - recovery["reached"].as_f64().unwrap()).abs() < 1e-12);
    // The binding metric was short one stage before: the search did not stop early.
    assert!(stages.len() >= 2);

    // Exactly the run of that size, on one thread as on two.
    let plain = dir.path().join("plain");
    let replicas_text = replicas.to_string();
    let output = stampede(&[
        "verify",
        "baltor",
        "--replicas",
        &replicas_text,
        "--no-report",
        "--quiet",
        "--threads",
        "1",
        "--out",
        plain.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(parquet_tables(&folder), parquet_tables(&plain.join("baltor")));
    let one_thread = dir.path().join("one");
    let output = stampede(&[
        "run",
        "baltor",
        "--precision",
        "5%",
        "--threads",
        "1",
        "--no-report",
        "--quiet",
        "--out",
        one_thread.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(replicas_of(&one_thread.join("baltor")), replicas);
}

#[test]
fn a_named_metric_and_a_cap_that_falls_short_are_said() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    // One metric named: only it is checked; the cap stops the search and says so.
    let output = stampede(&[
        "run",
        "mmc",
        "--precision",
        "wait_mean_s=0.5%",
        "--max-replicas",
        "40",
        "--no-report",
        "--out",
        out,
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let said = stdout(&output);
    assert!(
        said.contains("precision wait_mean_s=0.5% NOT met with 40 replicas a point: wait_mean_s fell short"),
        "{said}"
    );
    let recorded = &manifest(&dir.path().join("mmc"))["precision"];
    assert_eq!(recorded["met"], false);
    assert_eq!(recorded["metrics"].as_array().unwrap().len(), 1);
    assert_eq!(recorded["stages"], serde_json::json!([20, 40]));
    assert_eq!(replicas_of(&dir.path().join("mmc")), 40);
    // The report shows the sentence.
    let output = stampede(&["report", dir.path().join("mmc").to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let html = std::fs::read_to_string(dir.path().join("mmc/report.html")).unwrap();
    assert!(
        html.contains("<dt>precision</dt><dd>precision wait_mean_s=0.5% NOT met with 40 replicas"),
        "no precision fact"
    );
}

#[test]
fn a_plan_from_a_pilot_is_met_by_the_merge_of_its_shards() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sharded");
    let output =
        stampede(&["plan", "baltor", "--precision", "5%", "--shards", "2", "--json", "--out", root.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let plan: Value = serde_json::from_str(&stdout(&output)).unwrap();
    let replicas = plan["replicas"].as_u64().unwrap();
    // At least what the pilot's own spread says (the bound only adds).
    assert!(replicas > 20 && plan["capped_at_max_replicas"] == false, "{plan}");
    let run = plan["run"].as_str().unwrap();
    assert!(run.starts_with(&format!("stampede run baltor --replicas {replicas} --shard K/2 --out ")), "{run}");
    for shard in ["0/2", "1/2"] {
        let replicas = replicas.to_string();
        let output = stampede(&[
            "run",
            "baltor",
            "--replicas",
            &replicas,
            "--shard",
            shard,
            "--quiet",
            "--out",
            root.to_str().unwrap(),
        ]);
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let merged = dir.path().join("merged");
    let output = stampede(&[
        "merge",
        root.join("baltor/shards").to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
        "--precision",
        "5%",
        "--no-report",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains(&format!("precision 5% met with {replicas} replicas a point")),
        "{}",
        stdout(&output)
    );
    assert_eq!(manifest(&merged.join("baltor"))["precision"]["met"], true);
    // Asked more than the shards hold: it says so and still merges.
    let tighter = dir.path().join("tighter");
    let output = stampede(&[
        "merge",
        root.join("baltor/shards").to_str().unwrap(),
        "--out",
        tighter.to_str().unwrap(),
        "--precision",
        "1%",
        "--no-report",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("precision 1% NOT met"), "{}", stdout(&output));
}

#[test]
fn bad_precision_input_exits_2_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["run", "mmc", "--precision", "0"], "above 0 and below 1"),
        (&["run", "mmc", "--precision", "1"], "above 0 and below 1"),
        (&["run", "mmc", "--precision", "100%"], "above 0 and below 1"),
        (&["run", "mmc", "--precision", "-2%"], "above 0 and below 1"),
        (&["run", "mmc", "--precision", "tight"], "\"tight\" is not a number"),
        (&["run", "mmc", "--precision", "wait_s=1%"], "\"wait_s\" is not a metric of model mmc"),
        (&["verify", "mmc", "--precision", "=1%"], "no metric before '='"),
        (&["run", "mmc", "--precision", "1%", "--replicas", "5"], "--precision chooses the replicas"),
        (&["run", "mmc", "--precision", "1%", "--shard", "0/2"], "stampede plan SCENARIO --precision"),
        (&["run", "mmc", "--precision", "1%", "--max-replicas", "1"], "at least 2 replicas"),
        (&["verify", "mmc", "--precision", "1%", "--seeds", "3"], "--precision with --seeds"),
        (&["run", "mmc", "--max-replicas", "100"], "--precision"),
        (&["plan", "mmc", "--precision", "1%", "--pilot", "1"], "at least 2 replicas"),
        (&["plan", "mmc", "--precision", "1%", "--shards", "0"], "--shards 0"),
        (&["plan", "mmc", "--precision", "q=1%"], "\"q\" is not a metric of model mmc"),
    ];
    for (args, expected) in cases {
        let mut args = args.to_vec();
        args.extend(["--out", out]);
        let output = stampede(&args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stderr(&output));
        assert!(stderr(&output).contains(expected), "{args:?}: {}", stderr(&output));
        assert!(files_below(dir.path()).is_empty(), "{args:?} wrote {:?}", files_below(dir.path()));
    }
}

/// The book's M/M/1 at ρ = 0.9 started empty, written as a graph (the model with a
/// queue-depth series), with `warmup_s = "auto"`: `docs/src/examples/mm1-empty.toml`,
/// here at 20 replicas.
fn mm1() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/examples/mm1-empty.toml");
    std::fs::read_to_string(path).unwrap().replace("replicas = 50", "replicas = 20")
}

#[test]
fn an_automatic_warm_up_is_chosen_said_recorded_and_the_same_for_shards() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mm1.toml");
    std::fs::write(&file, mm1()).unwrap();
    let out = dir.path().join("out");
    let output = stampede(&["run", file.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let recorded = manifest(&out.join("mm1-empty"));
    let chosen = recorded["warmup"]["chosen_s"].as_f64().unwrap();
    assert!(chosen > 0.0 && chosen <= 2000.0, "{}", recorded["warmup"]);
    assert_eq!(recorded["warmup"]["method"], "MSER-5");
    assert_eq!(recorded["warmup"]["series"], "queue_depth");
    // The scenario recorded holds the warm-up in seconds: reproducible, mergeable.
    assert!(
        recorded["scenario_toml"].as_str().unwrap().contains(&format!("warmup_s = {chosen:?}")),
        "{}",
        recorded["scenario_toml"]
    );
    let sentence =
        format!("warm-up {chosen} s, chosen by MSER-5 on series queue_depth averaged over 30 pilot replicas");
    assert!(stdout(&output).contains(&sentence), "{}", stdout(&output));
    let html = std::fs::read_to_string(out.join("mm1-empty/report.html")).unwrap();
    assert!(html.contains(&format!("<dt>warm-up</dt><dd>{sentence}")), "no warm-up fact in the report");
    // The same as giving that warm-up in seconds; and each shard chooses the same.
    let plain = dir.path().join("plain");
    let seconds = chosen.to_string();
    let output = stampede(&[
        "run",
        file.to_str().unwrap(),
        "--warmup",
        &seconds,
        "--quiet",
        "--no-report",
        "--out",
        plain.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(parquet_tables(&out.join("mm1-empty")), parquet_tables(&plain.join("mm1-empty")));
    let sharded = dir.path().join("sharded");
    for shard in ["0/2", "1/2"] {
        let output =
            stampede(&["run", file.to_str().unwrap(), "--shard", shard, "--quiet", "--out", sharded.to_str().unwrap()]);
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let merged = dir.path().join("merged");
    let output = stampede(&[
        "merge",
        sharded.join("mm1-empty/shards").to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
        "--no-report",
        "--quiet",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(parquet_tables(&merged.join("mm1-empty")), parquet_tables(&plain.join("mm1-empty")));
    // Too short a run to settle: the limit, and a warning to run longer.
    let output = stampede(&[
        "run",
        file.to_str().unwrap(),
        "--set",
        "run.horizon_s=300",
        "--quiet",
        "--no-report",
        "--out",
        dir.path().join("short").to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let warned = stderr(&output);
    assert!(
        warned.contains("reached its limit, half the horizon (150 s)") && warned.contains("run longer"),
        "{warned}"
    );
}

#[test]
fn bad_warm_up_input_exits_2_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mm1.toml");
    std::fs::write(&file, mm1()).unwrap();
    let mm1 = file.to_str().unwrap();
    let out = dir.path().join("out");
    let cases: &[(&[&str], &str)] = &[
        (&["run", "mmc", "--warmup", "auto"], "model mmc keeps no time series"),
        (&["run", "mmc", "--warmup", "soon"], "--warmup \"soon\": a number of seconds or auto"),
        (&["run", "mmc", "--set", "run.warmup_s=\"soon\""], "\"soon\": a number of seconds or \"auto\""),
        (&["run", "mmc", "--set", "run.warmup_series=\"queue\""], "set warmup_s = \"auto\" too"),
        (
            &["run", mm1, "--set", "run.warmup_series=\"nope\""],
            "run.warmup_series = \"nope\": not a series of model graph",
        ),
        (&["run", mm1, "--grid", "run.warmup_s=10,20"], "chosen once for the whole grid"),
        (&["run", "mmc", "--grid", "run.warmup_s=[10.0, \"auto\"]"], "chosen once for the whole grid"),
        (
            &["optimize", mm1, "--minimize", "api.get.latency_p99_s"],
            "only `stampede run` and `stampede verify` choose a warm-up",
        ),
        (&["plan", mm1, "--precision", "5%"], "only `stampede run` and `stampede verify` choose a warm-up"),
    ];
    for (args, expected) in cases {
        let mut args = args.to_vec();
        args.extend(["--out", out.to_str().unwrap()]);
        let output = stampede(&args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stderr(&output));
        assert!(stderr(&output).contains(expected), "{args:?}: {}", stderr(&output));
        assert!(!out.exists(), "{args:?} wrote {:?}", files_below(&out));
    }
}

/// An M/M/2 at ρ = 0.5 over 20 s (2 s warm-up): short replicas, so a 5% precision
/// stops after about 56 replicas, where stopping on the same replicas that are
/// reported costs coverage most.
const SHORT_MM2: &str = r#"name = "mm2"
model = "mmc"
[run]
horizon_s = 20.0
warmup_s = 2.0
replicas = 10
seed = SEED
[queue]
arrival_rate_per_s = 100.0
service_rate_per_s = 100.0
servers = 2
"#;

/// `wait_mean_s` of [`SHORT_MM2`] at `seed`: (mean, ci_lo, ci_hi, replicas).
fn short_mm2_wait(dir: &std::path::Path, seed: u64, how: &[&str]) -> (f64, f64, f64, u64) {
    let file = dir.join("mm2.toml");
    std::fs::write(&file, SHORT_MM2.replace("SEED", &seed.to_string())).unwrap();
    let out = dir.join("out");
    let mut args = vec!["run", file.to_str().unwrap(), "--out", out.to_str().unwrap(), "--json", "--no-report"];
    args.extend_from_slice(&["--replica-rows", "none", "--force"]);
    args.extend_from_slice(how);
    let output = stampede(&args);
    assert!(output.status.success(), "seed {seed}: {}", stderr(&output));
    let summary: Value = serde_json::from_str(&stdout(&output)).unwrap();
    let wait = &summary["grid"][0]["metrics"]["wait_mean_s"];
    let number = |key: &str| wait[key].as_f64().unwrap();
    (number("mean"), number("ci_lo"), number("ci_hi"), wait["n"].as_u64().unwrap())
}

/// Issue 73, item 3: the interval a `--precision` run stops with is made from the
/// replicas that decided to stop, so it could claim more than it covers. Measured on
/// the simulation itself: the short M/M/2 at 5% over independent seeds, each run's
/// 95% interval against the model's own mean (a plain run of 50,000 replicas, ±0.1%;
/// within 1% of Erlang C's 1/300 s, the rest the short replicas' start). CI runs 200
/// seeds and asks at least 90% (a rule that covered 95% fails that once in 10⁴);
/// `STAMPEDE_COVERAGE_SEEDS=1000` runs the issue's test, [93%, 97%] (docs/src/precision.md
/// gives the measured shares).
#[test]
fn a_precise_runs_interval_keeps_its_coverage_over_independent_seeds() {
    let seeds: u64 = std::env::var("STAMPEDE_COVERAGE_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(200);
    let dir = tempfile::tempdir().unwrap();
    let (reference, lo, hi, _) = short_mm2_wait(dir.path(), 1_000_003, &["--replicas", "50000"]);
    assert!(hi - lo < 0.003 * reference, "the reference is precise: [{lo}, {hi}]");
    let erlang_c = 1.0 / 300.0; // C(2, 1) = 1/3, over cμ − λ = 100/s
    assert!((reference / erlang_c - 1.0).abs() < 0.01, "{reference} against Erlang C's {erlang_c}");
    let (mut covered, mut replicas) = (0u64, 0u64);
    for seed in 0..seeds {
        let (_, lo, hi, n) = short_mm2_wait(dir.path(), seed, &["--precision", "wait_mean_s=5%"]);
        assert!(hi - lo <= 2.0 * 0.05 * reference * 1.1, "seed {seed}: [{lo}, {hi}] is not about 5%");
        covered += u64::from(lo <= reference && reference <= hi);
        replicas += n;
    }
    let share = covered as f64 / seeds as f64;
    let average = replicas as f64 / seeds as f64;
    eprintln!(
        "reference {reference} [{lo}, {hi}]; covered {covered} of {seeds} ({share:.3}); {average:.1} replicas a run"
    );
    if seeds >= 1000 {
        // What the same seeds cover at a fixed count of about the same size: the share
        // a plain run has, which the sequential stop is compared with in the docs.
        let fixed = (average.round() as u64).to_string();
        let plain = (0..seeds)
            .filter(|&seed| {
                let (_, lo, hi, _) = short_mm2_wait(dir.path(), seed, &["--replicas", &fixed]);
                lo <= reference && reference <= hi
            })
            .count();
        eprintln!("at a fixed {fixed} replicas: covered {plain} of {seeds}");
    }
    let band = if seeds >= 1000 { 0.93..=0.97 } else { 0.90..=1.0 };
    assert!(band.contains(&share), "covered {covered} of {seeds}");
}
