//! `stampede optimize`: the built-ins' answers against their full grids, Erlang C's
//! staffing found on the mmc model (over a grid and over a range), determinism across
//! thread counts, `--show-toml` reproduced by `run`, resume after a kill, bad input.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common::{files_below, parquet_tables as tables, stampede, stderr, stdout};

fn optimize(out: &Path, args: &[&str]) -> std::process::Output {
    let mut all = vec!["optimize", "--out", out.to_str().unwrap()];
    all.extend(args);
    stampede(&all)
}

fn json(output: &std::process::Output) -> Value {
    assert!(output.status.success(), "{}\n{}", stderr(output), stdout(output));
    serde_json::from_str(&stdout(output)).unwrap_or_else(|e| panic!("{e}: {}", stdout(output)))
}

/// Erlang C's mean wait in queue for an M/M/c queue.
fn erlang_c_wait(servers: u32, lambda: f64, mu: f64) -> f64 {
    let a = lambda / mu;
    if a >= servers as f64 {
        return f64::INFINITY;
    }
    let (mut term, mut sum) = (1.0, 0.0);
    for k in 0..servers {
        sum += term;
        term *= a / (k + 1) as f64;
    }
    let tail = term / (1.0 - a / servers as f64);
    tail / (sum + tail) / (servers as f64 * mu - lambda)
}

/// On three built-in grids the chosen point is the best feasible point of the full
/// grid (by its means), or within δ of it, and the search spends at most a fifth of
/// what the full grid at 1,000 replicas per point costs. The full grid here runs at
/// STAMPEDE_OPTIMIZE_GRID_REPLICAS per point (50 by default; 1000 for the issue's
/// check, a few minutes in release).
#[test]
fn the_chosen_point_is_the_full_grids_best_feasible_one_for_a_fraction_of_its_replicas() {
    let grid_replicas: u32 =
        std::env::var("STAMPEDE_OPTIMIZE_GRID_REPLICAS").ok().and_then(|v| v.parse().ok()).unwrap_or(50);
    let scratch = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &str, &str, f64, &str); 3] = [
        ("policy-grid", "--minimize", "wasted_work_ratio", "recovery_s", 1.5, "0.002"),
        ("bounded-load", "--minimize", "hops_mean", "peak_shard_load_ratio", 1.3, "0.005"),
        ("dependency-slowdown", "--maximize", "goodput_high_rps", "pool_saturation_ratio", 0.35, "0.5"),
    ];
    for (scenario, sense, objective, constrained, bound, delta) in cases {
        let require = format!("{constrained} <= {bound}");
        let answer = json(&optimize(
            &scratch.path().join("optimize"),
            &[scenario, sense, objective, "--require", &require, "--indifference", delta, "--json", "--no-report"],
        ));
        assert_eq!(answer["ending"], "certain", "{scenario}: {}", answer["why"]);
        let chosen = &answer["chosen"];
        let out = scratch.path().join("grid");
        let grid_run = stampede(&[
            "run",
            scenario,
            "--replicas",
            &grid_replicas.to_string(),
            "--json",
            "--quiet",
            "--no-report",
            "--out",
            out.to_str().unwrap(),
        ]);
        let grid: Value = serde_json::from_str(&stdout(&grid_run)).unwrap_or_else(|_| panic!("{}", stderr(&grid_run)));
        let points = grid["grid"].as_array().unwrap();
        let mean = |p: &Value, metric: &str| p["metrics"][metric]["mean"].as_f64().unwrap();
        let better = |a: f64, b: f64| if sense == "--minimize" { a < b } else { a > b };
        let best = points
            .iter()
            .filter(|p| mean(p, constrained) <= bound)
            .reduce(|a, b| if better(mean(b, objective), mean(a, objective)) { b } else { a })
            .unwrap_or_else(|| panic!("{scenario}: the full grid has a feasible point"));
        let same_params = |p: &Value| p["params"] == chosen["params"];
        let picked = points.iter().find(|p| same_params(p)).expect("the chosen point is a grid point");
        let gap = (mean(picked, objective) - mean(best, objective)).abs();
        let delta: f64 = delta.parse().unwrap();
        assert!(
            same_params(best) || gap <= delta,
            "{scenario}: chose {} ({objective} {}), the full grid's best feasible is {} ({}), δ = {delta}",
            chosen["params"],
            mean(picked, objective),
            best["params"],
            mean(best, objective)
        );
        assert!(mean(picked, constrained) <= bound * 1.02, "{scenario}: the chosen point is feasible on the full grid");
        let spent = answer["replicas_spent"].as_u64().unwrap();
        let thousand = points.len() as u64 * 1000;
        assert!(spent * 5 <= thousand, "{scenario}: spent {spent}, more than a fifth of {thousand}");
        eprintln!(
            "{scenario}: chose {} = the full grid's best: {}; spent {spent} replicas = {:.1}% of the 1,000-replica \
             grid ({thousand}), {:.0}% of this {grid_replicas}-replica grid",
            chosen["params"],
            same_params(best),
            100.0 * spent as f64 / thousand as f64,
            100.0 * spent as f64 / (points.len() as u64 * grid_replicas as u64) as f64
        );
    }
}

const SHORT_MMC: &[&str] = &["--set", "run.horizon_s=100", "--set", "run.warmup_s=10"];

/// λ = 160/s, μ = 100/s: Erlang C gives Wq = 17.8 ms on 2 servers, 1.96 ms on 3,
/// 0.3 ms on 4. Maximising utilisation (fewest servers) with Wq ≤ 5 ms must pick 3,
/// on the mmc model itself, for every seed tried.
#[test]
fn the_erlang_c_staffing_is_found_on_the_mmc_model() {
    let truth = (2..=6).find(|&c| erlang_c_wait(c, 160.0, 100.0) <= 0.005).unwrap();
    assert_eq!(truth, 3);
    let scratch = tempfile::tempdir().unwrap();
    for seed in 1..=5 {
        let mut args = vec![
            "mmc",
            "--grid",
            "queue.servers=2,3,4,5",
            "--maximize",
            "utilization_ratio",
            "--require",
            "wait_mean_s <= 0.005",
            "--json",
            "--quiet",
            "--no-report",
            "--seed",
        ];
        let seed = seed.to_string();
        args.push(&seed);
        args.extend(SHORT_MMC);
        let answer = json(&optimize(scratch.path(), &args));
        assert_eq!(answer["chosen"]["params"]["queue.servers"], truth, "seed {seed}: {answer}");
        assert_eq!(answer["ending"], "certain");
        let verdict = &answer["chosen"]["constraints"][0];
        assert_eq!(verdict["verdict"], "holds");
        let measured = verdict["estimate"].as_f64().unwrap();
        let theory = erlang_c_wait(3, 160.0, 100.0);
        assert!((measured - theory).abs() / theory < 0.15, "seed {seed}: Wq {measured} vs Erlang C {theory}");
    }
}

/// The same staffing over an integer range, and the slowest service rate that keeps
/// Wq ≤ 5 ms on 2 servers over a continuous log range: Erlang C puts it at μ* ≈ 128.0/s.
/// The built-in mmc without its servers axis, as `queue.toml` in `dir`: a scenario
/// whose only choices are the --range ones.
fn mmc_without_its_grid(dir: &Path) -> std::path::PathBuf {
    let file = dir.join("queue.toml");
    let text = stampede(&["show", "mmc"]);
    std::fs::write(&file, stdout(&text).split("[grid]").next().unwrap()).unwrap();
    file
}

/// The search samples, halves and refines; it must land at or just above μ*.
#[test]
fn ranges_find_the_erlang_c_answer_integer_and_continuous() {
    let scratch = tempfile::tempdir().unwrap();
    let file = mmc_without_its_grid(scratch.path());
    let file = file.to_str().unwrap();
    let mut args = vec![
        file,
        "--range",
        "queue.servers=2..9:int",
        "--maximize",
        "utilization_ratio",
        "--require",
        "wait_mean_s <= 0.005",
        "--json",
        "--quiet",
        "--no-report",
    ];
    args.extend(SHORT_MMC);
    let answer = json(&optimize(scratch.path(), &args));
    assert_eq!(answer["chosen"]["params"]["queue.servers"], 3, "{answer}");
    // Continuous: the cheapest service rate μ (minimised) meeting the SLO on 2 servers.
    let mu_star = {
        let (mut lo, mut hi) = (81.0, 1000.0);
        for _ in 0..60 {
            let mid = 0.5 * (lo + hi);
            if erlang_c_wait(2, 160.0, mid) > 0.005 {
                lo = mid
            } else {
                hi = mid
            }
        }
        hi
    };
    assert!((mu_star - 128.0).abs() < 0.5, "{mu_star}");
    let mut args = vec![
        file,
        "--set",
        "queue.servers=2",
        "--range",
        "queue.service_rate_per_s=90..400:log",
        "--minimize",
        "service_rate_per_s",
        "--json",
        "--quiet",
        "--no-report",
    ];
    args.extend(SHORT_MMC);
    let error = optimize(scratch.path(), &args);
    assert_eq!(error.status.code(), Some(2), "the objective must be a metric: {}", stderr(&error));
    assert!(stderr(&error).contains("not a metric"));
    // Minimising utilisation on fixed load is maximising μ; maximising it is the
    // slowest μ, which the SLO bounds from below.
    let position = args.iter().position(|a| *a == "--minimize").unwrap();
    args[position] = "--maximize";
    args[position + 1] = "utilization_ratio";
    args.extend(["--require", "wait_mean_s <= 0.005", "--indifference", "0.004", "--budget-replicas", "4000"]);
    let answer = json(&optimize(scratch.path(), &args));
    let mu = answer["chosen"]["params"]["queue.service_rate_per_s"].as_f64().unwrap();
    assert!(mu >= mu_star * 0.97 && mu <= mu_star * 1.25, "chose μ = {mu}, Erlang C's μ* = {mu_star:.1}: {answer}");
    eprintln!("continuous: chose μ = {mu:.1} against μ* = {mu_star:.1}; spent {}", answer["replicas_spent"]);
}

/// One and two worker threads give byte-identical tables and the same answer.
#[test]
fn the_search_is_identical_for_any_thread_count() {
    let scratch = tempfile::tempdir().unwrap();
    let mut answers = Vec::new();
    let mut outputs = Vec::new();
    for threads in ["1", "2"] {
        let out = scratch.path().join(threads);
        let answer = json(&optimize(
            &out,
            &[
                "dependency-slowdown",
                "--maximize",
                "goodput_high_rps",
                "--require",
                "pool_saturation_ratio <= 0.35",
                "--indifference",
                "0.2",
                "--threads",
                threads,
                "--json",
                "--no-report",
            ],
        ));
        answers.push(answer);
        outputs.push(tables(&out.join("dependency-slowdown")));
    }
    assert_eq!(answers[0], answers[1]);
    assert!(outputs[0] == outputs[1], "the tables differ between 1 and 2 threads");
    assert!(outputs[0].iter().any(|(name, _)| name == "optimize.parquet"));
}

/// `--show-toml` prints a scenario whose run reproduces the chosen candidate: the same
/// replicas, so the same means to the last bit.
#[test]
fn show_toml_is_a_scenario_that_reproduces_the_chosen_point() {
    let scratch = tempfile::tempdir().unwrap();
    let output = optimize(
        scratch.path(),
        &[
            "policy-grid",
            "--minimize",
            "wasted_work_ratio",
            "--require",
            "recovery_s <= 1.5",
            "--show-toml",
            "--no-report",
        ],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).contains("chosen: "), "the answer goes to stderr: {}", stderr(&output));
    let toml_text = stdout(&output);
    let file = scratch.path().join("chosen.toml");
    std::fs::write(&file, &toml_text).unwrap();
    let folder = scratch.path().join("policy-grid");
    let answer: Value = serde_json::from_str(&std::fs::read_to_string(folder.join("optimize.json")).unwrap()).unwrap();
    let run = stampede(&[
        "run",
        file.to_str().unwrap(),
        "--json",
        "--quiet",
        "--no-report",
        "--out",
        scratch.path().join("again").to_str().unwrap(),
    ]);
    let reproduced: Value = serde_json::from_str(&stdout(&run)).unwrap_or_else(|_| panic!("{}", stderr(&run)));
    let point = &reproduced["grid"][0];
    assert_eq!(reproduced["grid"].as_array().unwrap().len(), 1);
    assert_eq!(point["params"], answer["chosen"]["params"]);
    assert_eq!(reproduced["replicas"], answer["chosen"]["replicas"]);
    assert_eq!(point["metrics"]["wasted_work_ratio"]["mean"], answer["chosen"]["objective"]["mean"]);
}

const RESUMED: &[&str] = &[
    "optimize",
    "policy-grid",
    "--minimize",
    "wasted_work_ratio",
    "--require",
    "recovery_s <= 1.5",
    "--indifference",
    "0.001",
    "--quiet",
    "--no-report",
    "--threads",
    "2",
];

/// A search killed at moments spread over its life resumes from its last finished
/// round into tables byte-identical to an uninterrupted search's.
#[test]
fn a_killed_search_resumes_to_identical_output() {
    let dir = tempfile::tempdir().unwrap();
    let reference = dir.path().join("reference");
    let output = stampede(&[RESUMED, &["--out", reference.to_str().unwrap()]].concat());
    assert!(output.status.success(), "{}", stderr(&output));
    let expected = tables(&reference.join("policy-grid"));
    let mut killed = 0;
    for (attempt, delay) in [900u64, 2500].into_iter().enumerate() {
        let out = dir.path().join(format!("attempt-{attempt}"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_stampede"))
            .args(RESUMED)
            .args(["--out", out.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay));
        if child.try_wait().unwrap().is_none() {
            killed += 1;
        }
        let _ = child.kill();
        child.wait().unwrap();
        let folder = out.join("policy-grid");
        assert!(!folder.exists() || folder.join("manifest.json").exists(), "a half-written folder");
        let output = stampede(&[RESUMED, &["--out", out.to_str().unwrap(), "--resume"]].concat());
        assert!(output.status.success(), "{}", stderr(&output));
        assert!(tables(&folder) == expected, "attempt {attempt} (killed after {delay} ms): output differs");
        assert!(!out.join(".policy-grid.optimize").exists(), "the rounds are removed once the output is in place");
    }
    assert!(killed >= 1, "none of the searches was killed before finishing: lengthen the search");
}

/// Bad input exits 2 and writes nothing; a constraint nothing meets exits 1 naming
/// the closest candidate.
#[test]
fn bad_input_exits_2_and_an_impossible_constraint_exits_1() {
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("out");
    let base = ["mmc", "--maximize", "utilization_ratio"];
    for (extra, says) in [
        (&["--require", "latency <= 1"][..], "not a metric"),
        (&["--range", "queue.arrival_rate_per_s=200..100"][..], "the range is empty"),
        (&["--range", "queue.servers=2..8:int"][..], "also a grid axis"),
        (&["--budget-replicas", "10"][..], "too small to start"),
        (&["--minimize", "wait_mean_s"][..], "give one objective"),
        (&["--confidence", "1.5"][..], "--confidence"),
        (&["--indifference", "-1"][..], "--indifference"),
        (&["--budget-replicas", "1000000000000000"][..], "bound a long search with --max-time"),
        (&["--max-time", "0"][..], "--max-time"),
    ] {
        let output = optimize(&out, &[&base[..], extra, SHORT_MMC].concat());
        assert_eq!(output.status.code(), Some(2), "{extra:?}: {}", stderr(&output));
        assert!(stderr(&output).contains(says), "{extra:?}: {}", stderr(&output));
        assert!(!out.exists() || files_below(&out).is_empty(), "{extra:?} wrote {:?}", files_below(&out));
    }
    let output = optimize(&out, &[&base[..], &["--require", "wait_mean_s <= 0.000001", "--quiet"], SHORT_MMC].concat());
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let answer: Value = serde_json::from_str(&std::fs::read_to_string(out.join("mmc/optimize.json")).unwrap()).unwrap();
    assert_eq!(answer["ending"], "infeasible");
    assert_eq!(answer["chosen"], Value::Null);
    assert_eq!(answer["closest"]["params"]["queue.servers"], 4, "the most servers wait least: {answer}");
    let text = optimize(&out, &[&base[..], &["--require", "wait_mean_s <= 0.000001"], SHORT_MMC].concat());
    assert!(stdout(&text).contains("closest to feasible: queue.servers = 4"), "{}", stdout(&text));
    assert!(stdout(&text).contains("no candidate meets the constraints"));
    // Nothing chosen: no "full grid at the chosen one's 0 replicas … (NaN% of it)" (issue 44, item 12).
    assert!(!stdout(&text).contains("NaN") && !stdout(&text).contains("0 replicas each"), "{}", stdout(&text));
    // A budget that pays for the first stage alone is said to, before the search.
    let text = optimize(&out, &[&base[..], &["--budget-replicas", "70"], SHORT_MMC].concat());
    assert!(stderr(&text).contains("pays for the first stage (60"), "{}", stderr(&text));
}

/// Every model can be optimised: a built-in of each, shortened, gives an answer whose
/// folder the report reads (the gateway's fixture and the graph's topology survive
/// the candidates' scenario).
#[test]
fn every_model_can_be_optimised() {
    let scratch = tempfile::tempdir().unwrap();
    for (scenario, objective, extra) in [
        ("mmck", "rejected_ratio", &["--set", "run.horizon_s=50"][..]),
        ("mg1", "wait_mean_s", &["--set", "run.horizon_s=200", "--set", "run.warmup_s=10"][..]),
        ("bounded-load", "hops_mean", &["--set", "run.horizon_s=3"][..]),
        ("dependency-slowdown", "shed", &["--set", "run.horizon_s=8"][..]),
        ("llm-stack", "wasted_ratio", &["--set", "run.horizon_s=20"][..]),
        ("graph-dependency", "dependency.wasted_work_ratio", &["--set", "run.horizon_s=8"][..]),
    ] {
        let mut args = vec![scenario, "--minimize", objective, "--first-stage", "4", "--indifference", "1", "--json"];
        args.extend(extra);
        let answer = json(&optimize(scratch.path(), &args));
        assert!(answer["chosen"].is_object(), "{scenario}: {answer}");
        let page = std::fs::read_to_string(scratch.path().join(scenario).join("report.html")).unwrap();
        assert!(page.contains("Optimization race"), "{scenario}: the report draws the race");
    }
}

/// A search asked for a difference far below its noise (δ = 1e-9 s between two
/// nearly equal service rates) is bounded: δ is raised to what the budget can
/// resolve, and said so; --max-time stops a search on time and says so; the cost is
/// estimated before the first round; a user's folder at --out is refused before the
/// search, and nothing is left behind (issue 43, items 10–11).
#[test]
fn a_search_is_bounded_and_refuses_early() {
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("out");
    let close = [
        "mmc",
        "--grid",
        "queue.service_rate_per_s=[100.0, 100.5]",
        "--set",
        "queue.servers=3",
        "--minimize",
        "wait_mean_s",
    ];
    let output =
        optimize(&out, &[&close[..], &["--indifference", "1e-9", "--budget-replicas", "4000"], SHORT_MMC].concat());
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("was raised from 1e-9") || text.contains("was raised from 1.000e-9"), "{text}");
    let estimate = stderr(&output);
    assert!(
        estimate.contains("at most 4000 replicas") && estimate.contains("one replica of the base took"),
        "{estimate}"
    );
    let answer: Value = serde_json::from_str(&std::fs::read_to_string(out.join("mmc/optimize.json")).unwrap()).unwrap();
    assert!(answer["indifference"].as_f64().unwrap() > 1e-7, "{answer}");
    assert_eq!(answer["indifference_raised_from"].as_f64(), Some(1e-9));
    // --max-time: no round starts after it; the answer says it stopped on time.
    let output =
        optimize(&out, &[&close[..], &["--indifference", "1e-9", "--max-time", "0.001", "--json"], SHORT_MMC].concat());
    let answer = json(&output);
    assert!(["time_spent", "certain"].contains(&answer["ending"].as_str().unwrap()), "{answer}");
    assert_eq!(answer["max_time_s"].as_f64(), Some(0.001));
    // A user's folder at --out/NAME: refused before any round, nothing left behind.
    let user = scratch.path().join("user");
    std::fs::create_dir_all(user.join("mmc")).unwrap();
    std::fs::write(user.join("mmc/thesis.tex"), "mine").unwrap();
    let started = std::time::Instant::now();
    let output = optimize(&user, &[&close[..], SHORT_MMC].concat());
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("thesis.tex"), "{}", stderr(&output));
    assert!(!user.join(".mmc.optimize").exists(), "no rounds left behind");
    assert_eq!(std::fs::read_dir(&user).unwrap().count(), 1, "nothing else written");
    assert!(started.elapsed() < Duration::from_secs(20));
}

/// Metric expressions in --minimize and --require, over a grid of three points and
/// over a --range: the candidates carry the expressions' columns like the base (the
/// search read them by the base's column index and panicked: "the len is 285 but the
/// index is 285"), and the chosen one meets its requirement.
#[test]
fn expressions_in_minimize_and_require_search_like_metrics() {
    let dir = tempfile::tempdir().unwrap();
    for extra in [&[][..], &["--range", "queue.service_rate_per_s=100..300"][..]] {
        let mut args = vec![
            "mmc",
            "--minimize",
            "wait_mean_s + response_mean_s",
            "--require",
            "utilization_ratio / 2 <= 0.4",
            "--budget-replicas",
            "1000",
            "--first-stage",
            "5",
            "--json",
            "--quiet",
            "--no-report",
            "--force",
            "--set",
            "run.horizon_s=100",
        ];
        args.extend_from_slice(extra);
        let document = json(&optimize(dir.path(), &args));
        let chosen = &document["chosen"];
        assert!(!chosen.is_null(), "{document}");
        let text = document.to_string();
        assert!(text.contains("wait_mean_s + response_mean_s"), "{text}");
    }
}

/// A search that ends after its first round says "1 round", not "1 rounds" (issue 71's
/// list of defects).
#[test]
fn a_one_round_search_says_round() {
    let scratch = tempfile::tempdir().unwrap();
    let output = optimize(scratch.path(), &["mmc", "--minimize", "wait_mean_s"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains(" in 1 round (budget"), "{text}");
}

/// `--across faults` (issue 71, item 3): a faults axis is a scenario to survive, not a
/// choice. "eager" (50 ms timeout, 3 attempts) is best under db errors (1.6% failed vs
/// 16.6%) and worst under a db slowdown (55% vs 0%); against the worst case "patient"
/// wins, and the answer names no fault. Every candidate ran at each fault on the same
/// replicas (its K = 2 rows in summary.parquet, consecutive), optimize.parquet points at
/// its first, and --show-toml keeps the faults axis whole. Without --across, a warning
/// says the faults axis is being chosen like a policy.
#[test]
fn across_faults_picks_the_policy_best_in_its_worst_fault() {
    const ROBUST: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cli/fixtures/robust-faults.toml");
    let dir = tempfile::tempdir().unwrap();
    let common = ["--minimize", "api.get.failed_ratio", "--first-stage", "5", "--budget-replicas", "100", "--force"];
    let mut args = vec![ROBUST, "--across", "faults", "--json", "--no-report"];
    args.extend(common);
    let document = json(&optimize(dir.path(), &args));
    let params = &document["chosen"]["params"];
    assert_eq!(params["case"], "patient", "{document}");
    assert!(params.get("faults").is_none(), "the answer names no fault: {document}");
    let worst = document["chosen"]["objective"]["mean"].as_f64().unwrap();
    let folder = dir.path().join("robust-faults");
    let summary = stampede_output::Table::read(&folder.join("summary.parquet")).unwrap();
    let cases = summary.strings("case_label").unwrap();
    assert_eq!(cases, ["eager", "eager", "patient", "patient"], "each candidate at every fault");
    assert_eq!(summary.strings("faults.0.kind").unwrap(), ["errors", "latency", "errors", "latency"]);
    let failed = summary.numbers("api.get.failed_ratio_mean").unwrap();
    assert!(failed[0] < failed[2] && failed[1] > failed[3], "each policy wins one fault: {failed:?}");
    assert!((worst - failed[2].max(failed[3])).abs() < 1e-9, "judged by its worst fault: {worst} vs {failed:?}");
    let table = stampede_output::Table::read(&folder.join("optimize.parquet")).unwrap();
    assert_eq!(table.numbers("grid_point").unwrap(), [0.0, 2.0], "a candidate's first point");
    // The manifest's scenario names the points as the summary does (its [[grid.case]]
    // came back after the faults axis: the report said #1 was patient · db errors).
    let report = stampede(&["report", folder.to_str().unwrap()]);
    assert!(report.status.success(), "{}", stderr(&report));
    let page = std::fs::read_to_string(folder.join("report.html")).unwrap();
    for label in ["#0 eager · db errors", "#1 eager · db latency", "#2 patient · db errors"] {
        assert!(page.contains(label), "{label} in the report");
    }

    let mut show = vec![ROBUST, "--across", "faults", "--show-toml", "--quiet"];
    show.extend(common);
    let text = stdout(&optimize(dir.path(), &show));
    let shown: toml::Table = toml::from_str(&text).unwrap();
    assert_eq!(shown["grid"]["faults"].as_array().unwrap().len(), 2, "{text}");

    let mut plain = vec![ROBUST, "--json", "--no-report"];
    plain.extend(common);
    let output = optimize(dir.path(), &plain);
    assert!(stderr(&output).contains("--across faults"), "{}", stderr(&output));
    let bad = optimize(dir.path(), &[ROBUST, "--across", "retries", "--minimize", "api.get.failed_ratio"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("--across retries: not a grid axis") && stderr(&bad).contains("faults"));
}

/// A scenario with nothing to choose from is refused before anything is timed or
/// warned about (issue 71: it timed a replica and warned about its budget first); so
/// is an --across axis that leaves one candidate.
#[test]
fn nothing_to_choose_from_is_refused_first() {
    const SHOP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cli/fixtures/shop-slowdown.toml");
    const ROBUST: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cli/fixtures/robust-faults.toml");
    let dir = tempfile::tempdir().unwrap();
    let output = optimize(dir.path(), &[SHOP, "--minimize", "edge.browse.failed_ratio"]);
    assert_eq!(output.status.code(), Some(2));
    let text = stderr(&output);
    assert!(text.contains("nothing to choose from"), "{text}");
    assert!(!text.contains("warning") && !text.contains("one replica of the base took"), "{text}");
    let output =
        optimize(dir.path(), &[ROBUST, "--minimize", "api.get.failed_ratio", "--across", "faults", "--case", "eager"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("every grid point differs only in --across faults"), "{}", stderr(&output));
}

/// `[optimize] across = "faults"` in the scenario file (issue 71, item 3) is
/// `--across faults` by default: the same answer, no warning about a faults axis
/// being chosen; `show` keeps the section, `run` ignores it, the command line wins,
/// and a wrong value names the field.
#[test]
fn the_scenario_files_optimize_section_is_the_default_across() {
    const ROBUST: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cli/fixtures/robust-faults.toml");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("robust-faults.toml");
    let text = std::fs::read_to_string(ROBUST).unwrap();
    std::fs::write(&file, format!("{text}\n[optimize]\nacross = [\"faults\"]\nrobust = \"worst\"\n")).unwrap();
    let file = file.to_str().unwrap();
    let common = ["--minimize", "api.get.failed_ratio", "--first-stage", "5", "--budget-replicas", "100", "--force"];
    let mut args = vec![file, "--json", "--no-report"];
    args.extend(common);
    let output = optimize(dir.path(), &args);
    assert!(!stderr(&output).contains("--across faults"), "no warning: {}", stderr(&output));
    let document = json(&output);
    assert_eq!(document["chosen"]["params"]["case"], "patient", "{document}");
    assert!(document["chosen"]["params"].get("faults").is_none(), "{document}");

    let shown = stampede(&["show", file]);
    assert!(shown.status.success(), "{}", stderr(&shown));
    let resolved: toml::Table = toml::from_str(&stdout(&shown)).unwrap();
    assert_eq!(resolved["optimize"]["across"].as_str(), Some("faults"), "{}", stdout(&shown));
    let out = dir.path().join("run");
    let run = stampede(&["run", file, "--replicas", "1", "--quiet", "--no-report", "--out", out.to_str().unwrap()]);
    assert!(run.status.success(), "run ignores [optimize]: {}", stderr(&run));

    // The command line wins: --robust mean over the file's worst.
    let mut mean = vec![file, "--json", "--no-report", "--robust", "mean"];
    mean.extend(common);
    let document = json(&optimize(dir.path(), &mean));
    assert!(document["chosen"]["params"].get("faults").is_none(), "{document}");

    std::fs::write(dir.path().join("bad.toml"), format!("{text}\n[optimize]\nacross = \"fault\"\n")).unwrap();
    let bad =
        optimize(dir.path(), &[dir.path().join("bad.toml").to_str().unwrap(), "--minimize", "api.get.failed_ratio"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("optimize.across = \"fault\": not a grid axis; the grid's axes: case, faults"),
        "{}",
        stderr(&bad)
    );
    let lone = optimize(dir.path(), &[ROBUST, "--minimize", "api.get.failed_ratio", "--robust", "mean"]);
    assert_eq!(lone.status.code(), Some(2));
    assert!(stderr(&lone).contains("--robust: needs an axis to be robust against"), "{}", stderr(&lone));
}

/// Issue 71: the answer counted the candidates made ("20 candidates") where 16 ran: a
/// refinement round's newcomers were made, then the budget could not pay for them. At
/// a budget of 90 the 16 Halton samples take 80 replicas and the four newcomers
/// (20 more) never run: the answer says 16, optimize.parquet lists 16, and the full
/// grid it compares against is those 16 at the chosen one's replicas.
#[test]
fn the_answer_counts_the_candidates_that_ran_not_those_made() {
    let scratch = tempfile::tempdir().unwrap();
    let file = mmc_without_its_grid(scratch.path());
    let file = file.to_str().unwrap();
    let mut args = vec![
        file,
        "--range",
        "queue.service_rate_per_s=90..400:log",
        "--maximize",
        "utilization_ratio",
        "--require",
        "wait_mean_s <= 0.005",
        "--budget-replicas",
        "90",
        "--first-stage",
        "5",
        "--json",
        "--no-report",
        "--set",
        "run.horizon_s=20",
        "--set",
        "run.warmup_s=2",
    ];
    let answer = json(&optimize(scratch.path(), &args));
    assert_eq!(answer["candidates"], 16, "{answer}");
    assert_eq!(answer["replicas_spent"], 80, "{answer}");
    assert_eq!(answer["full_grid_replicas"], 80, "16 candidates × 5 replicas: {answer}");
    let table = stampede_output::Table::read(&scratch.path().join("mmc/optimize.parquet")).unwrap();
    let candidates: std::collections::BTreeSet<String> = table.strings("candidate").unwrap().iter().cloned().collect();
    assert_eq!(candidates.len(), 16, "{candidates:?}");
    args.retain(|a| *a != "--json");
    let output = optimize(scratch.path(), &[&args[..], &["--force"]].concat());
    assert!(stdout(&output).contains("spent: 80 replicas over 16 candidates"), "{}", stdout(&output));
}
