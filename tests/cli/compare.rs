//! `stampede compare`: runs of one scenario under different seeds are not called
//! different more often than the false-alarm rate says; a 3% slower service is found
//! at the built-in's own replica count; bad input exits 2.

use crate::common::{stampede, stderr, stdout};

/// Runs `mmc` into `out` with `args` (a short horizon unless `args` says otherwise).
fn run_mmc(out: &std::path::Path, args: &[&str]) {
    let mut all = vec!["run", "mmc", "--quiet", "--no-report", "--out", out.to_str().unwrap()];
    all.extend(args);
    let run = stampede(&all);
    assert!(run.status.success(), "{}", stderr(&run));
}

fn compare(a: &std::path::Path, b: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["compare", a.to_str().unwrap(), b.to_str().unwrap()];
    args.extend(extra);
    stampede(&args)
}

/// Twenty seed pairs of the same short mmc run (3 grid points × 8 metrics = 24 Holm-
/// corrected Welch tests each; `events` is listed, not tested): at α = 0.05 the chance that a pair shows any change is
/// at most 5%, so 20 pairs flag about 1; more than 4 (probability under 2% if the
/// rate holds) fails. The same seed twice is paired and identical: no change at all.
/// STAMPEDE_COMPARE_PAIRS raises the count (e.g. 200).
#[test]
fn seeds_alone_are_not_a_change_at_the_stated_false_alarm_rate() {
    let pairs: u64 = std::env::var("STAMPEDE_COMPARE_PAIRS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let scratch = tempfile::tempdir().unwrap();
    let short = ["--replicas", "12", "--set", "run.horizon_s=60", "--set", "run.warmup_s=5"];
    let (mut flagged, mut raw_tests, mut raw_below) = (0, 0, 0);
    for pair in 0..pairs {
        let (a, b) = (scratch.path().join(format!("a{pair}")), scratch.path().join(format!("b{pair}")));
        let (seed_a, seed_b) = ((2 * pair + 10).to_string(), (2 * pair + 11).to_string());
        run_mmc(&a, &[&short[..], &["--seed", &seed_a]].concat());
        run_mmc(&b, &[&short[..], &["--seed", &seed_b]].concat());
        let output = compare(&a.join("mmc"), &b.join("mmc"), &["--json"]);
        assert!(matches!(output.status.code(), Some(0 | 1)), "{}", stderr(&output));
        let answer: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
        assert_eq!(answer["paired"], false);
        assert_eq!(answer["tests"], 24, "3 points × 8 metrics (events is listed, not tested)");
        assert_eq!(answer["changed"], output.status.code() == Some(1));
        flagged += u64::from(output.status.code() == Some(1));
        for p in answer["rows"].as_array().unwrap().iter().filter_map(|r| r["p_mean"].as_f64()) {
            raw_tests += 1;
            raw_below += u64::from(p < 0.05);
        }
    }
    // Uncorrected, each test is a false alarm about 5% of the time (a little less here:
    // near-constant metrics such as rejected_ratio give p = 1); a p-value that were never
    // small, or always, would fail this.
    let raw = raw_below as f64 / raw_tests as f64;
    assert!((0.005..0.10).contains(&raw), "{raw_below} of {raw_tests} uncorrected p-values below 0.05");
    let limit = (pairs as f64 * 0.05 + 3.0 * (pairs as f64 * 0.05 * 0.95).sqrt()).ceil() as u64;
    assert!(flagged <= limit, "{flagged} of {pairs} seed pairs flagged (at most {limit} expected at α = 0.05)");
    let (a, b) = (scratch.path().join("a0/mmc"), scratch.path().join("a0-again"));
    run_mmc(&b, &[&short[..], &["--seed", "10"]].concat());
    let same = compare(&a, &b.join("mmc"), &[]);
    assert_eq!(same.status.code(), Some(0), "{}", stdout(&same));
    assert!(stdout(&same).contains("paired on replica index") && stdout(&same).contains("no significant change"));
}

/// A 3% slower service (rate 100 → 97 per s) at the built-in's own 100 replicas and
/// seed: paired on replica indices, the waiting time's change is found (exit 1), and
/// the page of differences is written; with a tolerance above the change, it is not a
/// change.
#[test]
fn a_three_percent_slower_service_is_found() {
    let scratch = tempfile::tempdir().unwrap();
    let (a, b) = (scratch.path().join("a"), scratch.path().join("b"));
    run_mmc(&a, &[]);
    run_mmc(&b, &["--set", "queue.service_rate_per_s=97.0"]);
    let page = scratch.path().join("compare.html");
    let output = compare(&a.join("mmc"), &b.join("mmc"), &["--html", page.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}{}", stdout(&output), stderr(&output));
    let text = stdout(&output);
    let changed = text.split("changed (").nth(1).expect("a list of changes");
    assert!(changed.contains("wait_mean_s") && changed.contains("utilization_ratio"), "{text}");
    assert!(text.contains("verdict: changed (exit 1)"));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("class=\"changed\"") && html.contains("wait_mean_s"));
    // The utilisation moves by 3% (1/0.97 − 1); a 10% tolerance leaves the waiting times,
    // which grow by 14–23% (Erlang C), and 10 000% leaves nothing.
    let loose = compare(&a.join("mmc"), &b.join("mmc"), &["--tolerance", "0.1", "--json"]);
    let answer: serde_json::Value = serde_json::from_str(&stdout(&loose)).unwrap();
    let changed = |answer: &serde_json::Value, metric: &str| {
        answer["rows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["metric"] == metric && r["significant"] == true && r["beyond_tolerance"] == true)
    };
    assert!(changed(&answer, "wait_mean_s") && !changed(&answer, "utilization_ratio"));
    let none = compare(&a.join("mmc"), &b.join("mmc"), &["--tolerance", "100"]);
    assert_eq!(none.status.code(), Some(0), "{}", stdout(&none));
    // In CI: a JUnit testcase per (point, metric) tested, named without figures, a
    // failure per change; an ::error line per change on GitHub Actions; `events`
    // (how much work the run did) listed but never tested.
    let junit = scratch.path().join("compare.xml");
    let ci = std::process::Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["compare", a.join("mmc").to_str().unwrap(), b.join("mmc").to_str().unwrap(), "--all"])
        .args(["--junit", junit.to_str().unwrap()])
        .env("GITHUB_ACTIONS", "true")
        .output()
        .unwrap();
    assert_eq!(ci.status.code(), Some(1));
    let text = stdout(&ci);
    let errors: Vec<&str> = text.lines().filter(|l| l.starts_with("::error title=stampede compare mmc: ")).collect();
    assert!(!errors.is_empty() && errors.iter().any(|l| l.contains("wait_mean_s changed::")), "{text}");
    assert!(text.lines().any(|l| l.contains(" events ") && l.contains("(measures the run: not tested)")), "{text}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("<testsuites name=\"stampede compare mmc\"") && xml.contains("<failure message=\"changed: "),
        "{xml}"
    );
    assert!(!xml.contains(" events\""), "events is not a test: {xml}");
    assert_eq!(xml.matches("<failure").count(), errors.len(), "one failure per change");
    let names: Vec<&str> = xml.split("name=\"").skip(2).map(|s| s.split('"').next().unwrap()).collect();
    assert!(names.iter().all(|n| !n.chars().any(|c| c == '→')), "names carry no figures: {names:?}");
}

/// Bad input exits 2 with the reason: a missing folder, two different scenarios, a
/// false-alarm rate outside (0, 1).
#[test]
fn compare_refuses_what_it_cannot_compare() {
    let scratch = tempfile::tempdir().unwrap();
    let (a, b) = (scratch.path().join("a"), scratch.path().join("b"));
    run_mmc(&a, &["--replicas", "3", "--set", "run.horizon_s=20", "--set", "run.warmup_s=2"]);
    let other = stampede(&["run", "mg1", "--replicas", "3", "--quiet", "--no-report", "--out", b.to_str().unwrap()]);
    assert!(other.status.success(), "{}", stderr(&other));
    let missing = compare(&a.join("mmc"), &scratch.path().join("nowhere"), &[]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("no such output folder"), "{}", stderr(&missing));
    let different = compare(&a.join("mmc"), &b.join("mg1"), &[]);
    assert_eq!(different.status.code(), Some(2));
    assert!(stderr(&different).contains("different scenarios"), "{}", stderr(&different));
    let alpha = compare(&a.join("mmc"), &a.join("mmc"), &["--alpha", "1.5"]);
    assert_eq!(alpha.status.code(), Some(2));
    assert!(stderr(&alpha).contains("--alpha 1.5"), "{}", stderr(&alpha));
}

/// A side with one replica a point can be tested for nothing: refused (exit 2), never
/// "no significant change … over 0 tests" with exit 0 (issue 43, item 9).
#[test]
fn a_side_too_small_to_test_is_refused_not_passed() {
    let scratch = tempfile::tempdir().unwrap();
    let (a, b) = (scratch.path().join("a"), scratch.path().join("b"));
    let short = ["--set", "run.horizon_s=30", "--set", "run.warmup_s=2"];
    run_mmc(&a, &[&short[..], &["--replicas", "1"]].concat());
    run_mmc(&b, &[&short[..], &["--replicas", "6", "--set", "queue.service_rate_per_s=120"]].concat());
    let output = compare(&a.join("mmc"), &b.join("mmc"), &[]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    let message = stderr(&output);
    assert!(message.contains("has 1 replica a grid point") && message.contains("nothing could be tested"), "{message}");
    assert!(stdout(&output).is_empty(), "no verdict printed: {}", stdout(&output));
}

/// compare says what differs between the two runs' scenarios above its table, and a
/// point without a label is `#0`, not `#0 #0` (issue 44, item 9).
#[test]
fn compare_says_what_differs_between_the_scenarios() {
    let scratch = tempfile::tempdir().unwrap();
    let (a, b) = (scratch.path().join("a"), scratch.path().join("b"));
    let one_point =
        ["--set", "run.horizon_s=30", "--set", "run.warmup_s=2", "--replicas", "6", "--grid", "queue.servers=[3]"];
    run_mmc(&a, &one_point);
    run_mmc(&b, &[&one_point[..], &["--set", "queue.service_rate_per_s=120"]].concat());
    let output = compare(&a.join("mmc"), &b.join("mmc"), &["--all"]);
    let text = stdout(&output);
    assert!(text.contains("the scenarios differ in: queue.service_rate_per_s 100.0 → 120"), "{text}");
    assert!(!text.contains("#0 #0"), "{text}");
    let output = compare(&a.join("mmc"), &a.join("mmc"), &["--json"]);
    let answer: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(answer["scenario_differences"], serde_json::json!([]));
}

/// The pooled latency quantiles come with their difference and its interval: a
/// slower service (M/M/2 at 80% load, service 5% slower) moves every point's p99 up
/// by an interval that excludes 0, and two seeds of one scenario give intervals that
/// cover 0 at each of the three points.
#[test]
fn compare_gives_the_pooled_p99s_difference_with_an_interval() {
    let scratch = tempfile::tempdir().unwrap();
    let short = ["--replicas", "20", "--set", "run.horizon_s=100", "--set", "run.warmup_s=10"];
    let (a, b, c) = (scratch.path().join("a"), scratch.path().join("b"), scratch.path().join("c"));
    run_mmc(&a, &[&short[..], &["--seed", "1"]].concat());
    run_mmc(&b, &[&short[..], &["--seed", "2"]].concat());
    run_mmc(&c, &[&short[..], &["--seed", "2", "--set", "queue.service_rate_per_s=95"]].concat());
    let differences = |other: &std::path::Path| -> Vec<(f64, f64, f64)> {
        let output = compare(&a.join("mmc"), &other.join("mmc"), &["--json"]);
        let answer: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
        answer["latencies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| {
                let p99 = &l["difference"][1];
                let number = |key: &str| p99[key].as_f64().unwrap_or_else(|| panic!("{key} in {l}"));
                let (a, b) = (l["a"][1].as_f64().unwrap(), l["b"][1].as_f64().unwrap());
                assert!((number("b_minus_a") - (b - a)).abs() < 1e-12, "{l}");
                (number("b_minus_a"), number("ci_lo"), number("ci_hi"))
            })
            .collect()
    };
    let same = differences(&b);
    assert_eq!(same.len(), 3);
    for (d, lo, hi) in &same {
        assert!(lo < d && d < hi && *lo <= 0.0 && 0.0 <= *hi, "seeds alone: {d} [{lo}, {hi}]");
    }
    for (d, lo, hi) in differences(&c) {
        assert!(lo > 0.0 && lo < d && d < hi, "5% slower service: {d} [{lo}, {hi}]");
    }
    let text = stdout(&compare(&a.join("mmc"), &c.join("mmc"), &[]));
    assert!(text.contains("the p99's B − A with its 95% interval") && text.contains("p99 +"), "{text}");
}
