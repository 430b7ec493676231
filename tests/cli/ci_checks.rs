//! What CI pipelines read: `verify`'s verdicts as JUnit XML, `verify.json` and GitHub
//! annotations; the commit in the manifest; `ci/nightly`, which checks every scenario
//! and fails at the end; and `.ci/instruction-gate`'s toolchain record, stale-baseline
//! report and JSON (fed a saved gungraun report, so no Valgrind is needed).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::{stampede, stderr, stdout};

/// Two grid points and three claims: one holds, one cannot (its note holds the
/// characters XML escapes), one names a grid point the run does not have.
const CLAIMS: &str = r#"name = "ci-claims"
model = "mmc"

[run]
horizon_s = 20.0
warmup_s = 2.0
replicas = 20
seed = 7

[queue]
arrival_rate_per_s = 160.0
service_rate_per_s = 100.0
servers = 2

[grid]
"queue.servers" = [2, 3, 4]

[[verify]]
grid_point = 0
metric = "wait_mean_s"
statistic = "mean"
at_least = 0.001
note = "two servers at 80% load queue"

[[verify]]
grid_point = 1
metric = "wait_mean_s"
statistic = "ci_hi"
at_most = 0.0000001
note = "a promise <nobody> & \"no\" server keeps"

[[verify]]
grid_point = 2
metric = "wait_mean_s"
statistic = "mean"
at_most = 1.0
"#;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// HEAD of the checkout the binary was built from, when git and a checkout exist.
fn head_commit() -> Option<String> {
    let output = Command::new("git").args(["rev-parse", "HEAD"]).current_dir(root()).output().ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}

fn python(script: &str, args: &[&str]) -> Output {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    Command::new(python).arg("-c").arg(script).args(args).output().expect("python3 runs (a fresh machine has it)")
}

#[test]
fn verify_writes_junit_json_and_annotations_with_the_verdicts() {
    let scratch = tempfile::tempdir().unwrap();
    let scenario = scratch.path().join("claims.toml");
    std::fs::write(&scenario, CLAIMS).unwrap();
    let out = scratch.path().join("out");
    let junit = scratch.path().join("reports/claims.xml");
    let output = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["verify", scenario.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()])
        // Narrowed: the claim about four servers is skipped (it follows its point).
        .args(["--junit", junit.to_str().unwrap(), "--grid", "queue.servers=2,3"])
        .env("GITHUB_ACTIONS", "true")
        .output()
        .unwrap();
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}{}", stderr(&output));

    // The FAIL line is a verdict that names the point's policy.
    // (The figures are the run's; the test pins the verdict's form.)
    let fail = text.lines().find(|l| l.starts_with("FAIL  ")).unwrap_or_default();
    assert!(
        fail.starts_with("FAIL  ci-claims #1 (queue.servers = 3) wait_mean_s: expected ci_hi ≤ 0.0000001, got 0.00")
            && fail.contains(" (mean 0.00")
            && fail.contains(", 95% [0.00"),
        "{text}"
    );
    assert!(text.contains("1 passed, 1 failed, 1 skipped"), "{text}");
    // One annotation, for the one failed claim.
    let annotations: Vec<&str> = text.lines().filter(|l| l.starts_with("::")).collect();
    assert_eq!(annotations.len(), 1, "{text}");
    assert!(annotations[0]
        .starts_with("::error title=stampede verify ci-claims%3A verify[1] failed::#1 (queue.servers = 3)"));

    // JUnit XML as a JUnit reader sees it: one case per claim, the failure on the right one.
    let reader = r#"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suite = root.find("testsuite")
print(suite.get("tests"), suite.get("failures"), suite.get("skipped"))
for case in suite.findall("testcase"):
    kind = "failure" if case.find("failure") is not None else "skipped" if case.find("skipped") is not None else "pass"
    detail = case.find("failure")
    print(kind, "|", case.get("name"), "|", detail.get("message") if detail is not None else "", "|", detail.text if detail is not None else "")
props = {p.get("name"): p.get("value") for p in suite.find("properties")}
print("props", props["scenario"], props["seed"], props["replicas"], props["commit"] or "-")
"#;
    let parsed = python(reader, &[junit.to_str().unwrap()]);
    assert!(parsed.status.success(), "{}", stderr(&parsed));
    let parsed = stdout(&parsed);
    let lines: Vec<&str> = parsed.lines().collect();
    assert_eq!(lines[0], "3 1 1", "{parsed}");
    // A testcase's name is the claim's identity (the point as the file names it, the
    // metric, statistic and bound), never a measured value: the same every night.
    assert!(lines[1].starts_with("pass | verify[0] grid point 0 wait_mean_s mean ≥ 0.001 |"), "{parsed}");
    assert!(lines[2].starts_with("failure | verify[1] grid point 1 wait_mean_s ci_hi ≤ 0.0000001 |"), "{parsed}");
    assert!(lines[2].contains("| expected ci_hi ≤ 0.0000001, got 0.0021 |"), "{parsed}");
    assert!(lines[2].ends_with("a promise <nobody> & \"no\" server keeps"), "escaped and read back: {parsed}");
    assert!(lines[3].starts_with("skipped | verify[2] grid point 2 wait_mean_s mean ≤ 1 |"), "{parsed}");
    let commit = head_commit();
    assert_eq!(lines[4], format!("props ci-claims 7 20 {}", commit.as_deref().unwrap_or("-")), "{parsed}");

    // verify.json: the run's identity, and each claim's verdict, bound and measurement.
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("ci-claims/verify.json")).unwrap()).unwrap();
    assert_eq!(json["scenario"], "ci-claims");
    assert_eq!((json["seed"].as_u64(), json["replicas"].as_u64()), (Some(7), Some(20)));
    assert_eq!(json["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(json["commit"].as_str(), commit.as_deref(), "the commit the binary was built from");
    assert_eq!(json["verdict"], "fail");
    assert_eq!(json["counts"], serde_json::json!({"passed": 1, "failed": 1, "skipped": 1}));
    let failed = &json["checks"][1];
    assert_eq!((failed["claim"].as_u64(), failed["verdict"].as_str()), (Some(1), Some("fail")));
    assert_eq!(failed["expected"], "ci_hi ≤ 0.0000001");
    assert_eq!(failed["point"], "#1 (queue.servers = 3)");
    assert_eq!(failed["params"]["queue.servers"], 3);
    let (value, lo, hi) = (
        failed["value"].as_f64().unwrap(),
        failed["interval_lo"].as_f64().unwrap(),
        failed["interval_hi"].as_f64().unwrap(),
    );
    assert!(lo < hi && value == hi, "ci_hi is the interval's upper end: {lo} {value} {hi}");
    assert_eq!(json["skipped"][0]["claim"], 2);
    // `verify --json` prints the same document (the --help text says so).
    let help = stdout(&stampede(&["verify", "--help"]));
    assert!(help.contains("Print the claims with their verdicts as one JSON document"), "{help}");

    // The manifest carries the same commit.
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("ci-claims/manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["commit"].as_str(), commit.as_deref());
}

/// A scenario that cannot run still leaves a JUnit file (one errored testcase) and an
/// `::error` line; a JUnit file written into the output folder does not block the
/// next run of it.
#[test]
fn a_scenario_that_cannot_run_leaves_an_errored_junit_and_junit_in_the_folder_is_stampedes() {
    let scratch = tempfile::tempdir().unwrap();
    let bad = scratch.path().join("bad.toml");
    std::fs::write(&bad, CLAIMS.replace("arrival_rate_per_s = 160.0", "arrival_rate_per_s = -5.0")).unwrap();
    let junit = scratch.path().join("bad.xml");
    let output = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["verify", bad.to_str().unwrap(), "--quiet", "--out", scratch.path().join("out").to_str().unwrap()])
        .args(["--junit", junit.to_str().unwrap()])
        .env("GITHUB_ACTIONS", "true")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let xml = std::fs::read_to_string(&junit).expect("a JUnit file for the run that could not run");
    assert!(
        xml.contains("errors=\"1\"") && xml.contains("<error message=\"") && xml.contains("arrival_rate_per_s"),
        "{xml}"
    );
    assert!(stdout(&output).contains("::error title=stampede verify"), "{}", stdout(&output));
    // --junit into the output folder: the next run replaces the folder as its own.
    let out = scratch.path().join("runs");
    std::fs::create_dir_all(&out).unwrap();
    let inside = out.join("ci-claims/junit.xml");
    for _ in 0..2 {
        let good = scratch.path().join("good.toml");
        std::fs::write(&good, CLAIMS).unwrap();
        let run = stampede(&[
            "verify",
            good.to_str().unwrap(),
            "--replicas",
            "3",
            "--quiet",
            "--no-report",
            "--out",
            out.to_str().unwrap(),
            "--junit",
            inside.to_str().unwrap(),
        ]);
        assert_eq!(run.status.code(), Some(1), "{}", stderr(&run));
    }
}

#[test]
fn junit_to_a_folder_is_refused_before_the_run() {
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("out");
    let output = stampede(&[
        "verify",
        "mg1",
        "--replicas",
        "5",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
        "--junit",
        scratch.path().to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("is a folder; give a file name"), "{}", stderr(&output));
    assert!(!out.exists(), "nothing ran, nothing was written");
}

#[test]
fn nightly_checks_every_scenario_and_fails_at_the_end() {
    let scratch = tempfile::tempdir().unwrap();
    let failing = scratch.path().join("claims.toml");
    std::fs::write(&failing, CLAIMS).unwrap();
    let out = scratch.path().join("out");
    let output = Command::new(root().join("ci/nightly"))
        .args(["--out", out.to_str().unwrap(), "--stampede", env!("CARGO_BIN_EXE_stampede")])
        .args([failing.to_str().unwrap(), "no-such-scenario", "mg1", "--", "--replicas", "20"])
        .output()
        .unwrap();
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}{}", stderr(&output));
    // The failing scenario did not stop the rest: mg1 ran after it and passed.
    let summary = std::fs::read_to_string(out.join("nightly.txt")).unwrap();
    let lines: Vec<&str> = summary.lines().collect();
    assert_eq!(lines.len(), 3, "{summary}");
    assert!(lines[0].starts_with("FAIL   ci-claims: 2 passed, 1 failed (seed 7)"), "{summary}");
    assert!(lines[1].starts_with("ERROR  no-such-scenario: exit 2"), "{summary}");
    assert!(lines[2].starts_with("PASS   mg1: 5 passed, 0 failed"), "{summary}");
    // Everything is left for upload: both folders, both JUnit files, every log.
    for file in [
        "ci-claims/verify.json",
        "mg1/verify.json",
        "junit/ci-claims.xml",
        "junit/mg1.xml",
        "logs/no-such-scenario.txt",
    ] {
        assert!(out.join(file).is_file(), "{file} missing");
    }
    // The forwarded options are in each header.
    assert!(text.contains("== stampede verify mg1 --replicas 20"), "{text}");
    // No scenario at all is a usage error.
    let none = Command::new(root().join("ci/nightly")).output().unwrap();
    assert_eq!(none.status.code(), Some(2));
    // Two scenarios of one name would overwrite each other: refused before anything runs.
    let twin = scratch.path().join("mg1-tight.toml");
    std::fs::write(&twin, CLAIMS.replace("name = \"ci-claims\"", "name = \"mg1\"")).unwrap();
    let out = scratch.path().join("twins");
    let twins = Command::new(root().join("ci/nightly"))
        .args(["--out", out.to_str().unwrap(), "--stampede", env!("CARGO_BIN_EXE_stampede")])
        .args(["mg1", twin.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(twins.status.code(), Some(2), "{}", stdout(&twins));
    assert!(stderr(&twins).contains("are both named \"mg1\""), "{}", stderr(&twins));
    assert!(!out.join("mg1").exists(), "nothing ran");
}

/// A gungraun report of two benchmarks, as `cargo bench --bench instructions` prints it.
const GUNGRAUN_REPORT: &str = include_str!("fixtures/gungraun-report.txt");

/// Runs `.ci/instruction-gate` on the saved report against `baseline`.
fn gate(baseline: &Path, args: &[&str], github: bool) -> Output {
    let report = baseline.with_file_name("report.txt");
    std::fs::write(&report, GUNGRAUN_REPORT).unwrap();
    let mut command = Command::new(root().join(".ci/instruction-gate"));
    command.args(["--report", report.to_str().unwrap(), "--baseline", baseline.to_str().unwrap()]).args(args);
    if github {
        command.env("GITHUB_ACTIONS", "true");
    } else {
        command.env_remove("GITHUB_ACTIONS");
    }
    command.output().unwrap()
}

/// The saved baseline with every instruction count scaled by `factor` (and, if given,
/// another toolchain).
fn rewrite_baseline(path: &Path, factor: f64, rustc: Option<&str>) {
    let mut baseline: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    for counts in baseline["benchmarks"].as_object_mut().unwrap().values_mut() {
        let scaled = (counts["instructions"].as_f64().unwrap() * factor).round() as u64;
        counts["instructions"] = scaled.into();
    }
    if let Some(rustc) = rustc {
        baseline["toolchain"]["rustc"] = rustc.into();
    }
    std::fs::write(path, serde_json::to_string_pretty(&baseline).unwrap()).unwrap();
}

#[test]
fn the_gate_records_its_toolchain_reports_stale_baselines_and_writes_json() {
    let scratch = tempfile::tempdir().unwrap();
    let baseline = scratch.path().join("baseline.json");
    let saved = gate(&baseline, &["--save"], false);
    assert!(saved.status.success(), "{}{}", stdout(&saved), stderr(&saved));
    let document: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&baseline).unwrap()).unwrap();
    let rustc = stdout(&Command::new("rustc").arg("-vV").output().unwrap());
    assert!(rustc.starts_with(&format!("rustc {}", document["toolchain"]["rustc"].as_str().unwrap())), "{document}");
    assert!(rustc.contains(&format!("host: {}", document["toolchain"]["host"].as_str().unwrap())));
    assert_eq!(document["benchmarks"].as_object().unwrap().len(), 2);

    // Unchanged: passes, and the table shows instructions and estimated cycles.
    let same = gate(&baseline, &[], false);
    let text = stdout(&same);
    assert_eq!(same.status.code(), Some(0), "{text}");
    assert!(text.contains("est. cycles") && text.contains("every benchmark within ±3% of its baseline"), "{text}");

    // Improved by 10%: passes, but says the baseline is stale and how to re-save it.
    rewrite_baseline(&baseline, 1.1, None);
    let improved = gate(&baseline, &[], true);
    let text = stdout(&improved);
    assert_eq!(improved.status.code(), Some(0), "{text}");
    assert!(text.contains("IMPROVED") && text.contains("the baseline is stale"), "{text}");
    assert!(text.contains(".ci/instruction-gate --save && git commit"), "{text}");
    assert!(text.contains("::warning title=instruction gate%3A stale baseline::"), "{text}");
    assert_eq!(gate(&baseline, &["--fail-on-improvement"], false).status.code(), Some(1));

    // A regression (the baseline 10% lower than now): exit 1, JSON and an annotation.
    rewrite_baseline(&baseline, 1.0 / 1.1 / 1.1, None);
    let json_file = scratch.path().join("gate.json");
    let regressed = gate(&baseline, &["--json", json_file.to_str().unwrap()], true);
    let text = stdout(&regressed);
    assert_eq!(regressed.status.code(), Some(1), "{text}");
    assert!(text.contains("REGRESSION") && text.contains("::error title=instruction gate%3A regression::"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json_file).unwrap()).unwrap();
    assert_eq!(json["verdict"], "regression");
    let rows = json["benchmarks"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for row in rows {
        assert_eq!(row["status"], "regression");
        let ratio = row["ratio"].as_f64().unwrap();
        assert!((ratio - 1.1).abs() < 1e-3, "{row}");
        assert!(row["cycles"].as_u64().is_some() && row["baseline_instructions"].as_u64().is_some(), "{row}");
    }
    // --json alone: the document on stdout, nothing else there.
    let to_stdout = gate(&baseline, &["--json"], false);
    let json: serde_json::Value = serde_json::from_str(&stdout(&to_stdout)).expect("stdout is one JSON document");
    assert_eq!(json["toolchain"]["host"], document["toolchain"]["host"]);

    // Another compiler's baseline is refused, with the command that re-saves it.
    rewrite_baseline(&baseline, 1.0, Some("0.0.1 (0000000 1970-01-01)"));
    let other = gate(&baseline, &[], false);
    let text = stdout(&other);
    assert_eq!(other.status.code(), Some(1), "{text}");
    assert!(text.contains("the baseline was saved with 0.0.1 (0000000 1970-01-01)"), "{text}");
    assert!(text.contains("not comparable") && text.contains(".ci/instruction-gate --save"), "{text}");
}

/// `verify --seeds N` measures each claim's pass rate over N seeds (writing nothing)
/// and exits 1 when one holds on fewer than 99%; `near`/`within` claims judge the mean's
/// interval against a band.
#[test]
fn seeds_measure_each_claims_pass_rate() {
    let scratch = tempfile::tempdir().unwrap();
    let scenario = scratch.path().join("claims.toml");
    let text = CLAIMS.to_string()
        + "\n[[verify]]\ngrid_point = 0\nmetric = \"wait_mean_s\"\nstatistic = \"mean\"\nnear = 0.0178\nwithin = 0.5\n";
    std::fs::write(&scenario, text).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["verify", scenario.to_str().unwrap(), "--seeds", "3", "--replicas", "4", "--quiet"])
        .current_dir(scratch.path())
        .output()
        .unwrap();
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}{}", stderr(&output));
    assert!(text.contains("ci-claims: each claim's pass rate over 3 seed(s) 7..9, 4 replicas a point"), "{text}");
    assert!(text.contains("ok     100.0%  3/3  verify[0] grid point 0 wait_mean_s mean ≥ 0.001"), "{text}");
    assert!(
        text.contains(
            "SHORT    0.0%  0/3  verify[1] grid point 1 wait_mean_s ci_hi ≤ 0.0000001  (fails on seed 7, 8, 9)"
        ),
        "{text}"
    );
    // M/M/2 at ρ = 0.8 waits 0.0178 s (Erlang C): the band holds it on every seed.
    assert!(text.contains("ok     100.0%  3/3  verify[3] grid point 0 wait_mean_s mean ≈ 0.0178 ± 50%"), "{text}");
    assert!(text.contains("1 claim(s) hold on fewer than 99% of seeds"), "{text}");
    assert!(std::fs::read_dir(scratch.path()).unwrap().count() == 1, "nothing written beside the scenario");
}

/// CI's small, fixed measurement of the built-ins' claims across seeds: every claim of
/// these built-ins holds on seeds 1–3 at their own size (deterministic: the same seeds
/// every time). The full 200 seeds: `stampede verify NAME --seeds 200` (README).
#[test]
fn the_cheap_builtins_claims_hold_on_the_first_seeds() {
    let scratch = tempfile::tempdir().unwrap();
    for name in ["mg1", "llm-naive", "llm-retries", "llm-stack"] {
        let output = Command::new(env!("CARGO_BIN_EXE_stampede"))
            .args(["verify", name, "--seeds", "3", "--quiet"])
            .current_dir(scratch.path())
            .output()
            .unwrap();
        let text = stdout(&output);
        assert_eq!(output.status.code(), Some(0), "{name}: {text}{}", stderr(&output));
        assert!(text.contains("every claim holds on at least 99% of seeds"), "{name}: {text}");
    }
}

/// The nightly workflow runs as written: its shell steps, run the way GitHub runs them
/// (`bash -e -o pipefail`), on a first night (no baseline: compare says FIRST and
/// passes) and a second (compared with the first: the same seed, no change); the README
/// shows the file verbatim (issue 45, item 5).
#[test]
fn the_nightly_workflows_shell_steps_run_under_bash_e() {
    let workflow = std::fs::read_to_string(root().join(".github/workflows/nightly.yml")).unwrap();
    let readme = crate::common::book();
    assert!(readme.contains(&format!("```yaml\n{workflow}```")), "the book shows nightly.yml verbatim");
    let steps: Vec<String> = workflow
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- run: ").or_else(|| l.trim().strip_prefix("run: ")))
        .filter(|command| command.starts_with("ci/"))
        .map(|command| {
            // This test's binary and one cheap scenario in place of the nightly's list.
            command
                .replace("target/release/stampede", env!("CARGO_BIN_EXE_stampede"))
                .replace("baltor retry-storm bounded-load mg1", "mg1")
        })
        .collect();
    assert_eq!(steps.len(), 2, "ci/nightly and ci/compare-nightly: {steps:?}");
    let scratch = tempfile::tempdir().unwrap();
    let run = |command: &str| {
        Command::new("bash")
            .args(["-e", "-o", "pipefail", "-c", &format!("{}/{command}", root().display())])
            .current_dir(scratch.path())
            .output()
            .unwrap()
    };
    for night in ["first", "second"] {
        for step in &steps {
            let output = run(step);
            assert_eq!(output.status.code(), Some(0), "{night} night, {step}:\n{}{}", stdout(&output), stderr(&output));
        }
        let verdicts = std::fs::read_to_string(scratch.path().join("out/compare.txt")).unwrap();
        match night {
            "first" => assert!(verdicts.starts_with("FIRST  mg1: no baseline"), "{verdicts}"),
            _ => assert!(verdicts.starts_with("SAME   mg1"), "{verdicts}"),
        }
        // Tonight's output becomes tomorrow's baseline (the artifact download).
        let _ = std::fs::remove_dir_all(scratch.path().join("last"));
        std::fs::rename(scratch.path().join("out"), scratch.path().join("last")).unwrap();
    }
}

/// `--save --filter X` re-saves what it measured and keeps the other benchmarks'
/// counts (it wrote a baseline of only the filtered ones), printing each re-saved
/// benchmark's change; under another toolchain it refuses.
#[test]
fn a_filtered_save_keeps_the_other_benchmarks() {
    let scratch = tempfile::tempdir().unwrap();
    let baseline = scratch.path().join("baseline.json");
    assert!(gate(&baseline, &["--save"], false).status.success());
    rewrite_baseline(&baseline, 1.1, None);
    let mut document: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&baseline).unwrap()).unwrap();
    document["benchmarks"]["other::bench"] = serde_json::json!({"instructions": 1234, "cycles": 2000});
    std::fs::write(&baseline, serde_json::to_string_pretty(&document).unwrap()).unwrap();
    let saved = gate(&baseline, &["--save", "--filter", "replica"], false);
    let text = stdout(&saved);
    assert!(saved.status.success(), "{text}{}", stderr(&saved));
    assert!(text.contains("kept the other 1 as saved") && text.contains("(-9.1%)"), "{text}");
    let after: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&baseline).unwrap()).unwrap();
    assert_eq!(after["benchmarks"].as_object().unwrap().len(), 3, "{after}");
    assert_eq!(after["benchmarks"]["other::bench"]["instructions"], 1234);
    // Another toolchain's counts are not mixed with this one's.
    rewrite_baseline(&baseline, 1.0, Some("0.0.0-other"));
    let refused = gate(&baseline, &["--save", "--filter", "replica"], false);
    assert_ne!(refused.status.code(), Some(0));
    assert!(stderr(&refused).contains("re-save every benchmark"), "{}", stderr(&refused));
}
