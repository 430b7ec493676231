//! The cluster model through the command line: `verify` and its exit codes,
//! `timeseries.parquet`, determinism across threads, and cluster-specific bad input.

use crate::common::{files_below, stampede, stderr, stdout};

#[test]
fn verify_passes_on_the_harness_and_exits_1_on_a_broken_promise() {
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("out");
    let out = out.to_str().unwrap();
    // Enough replicas for the claims over replicas (95% Wilson lower bounds) to be decidable.
    let pass = stampede(&["verify", "baltor", "--replicas", "300", "--quiet", "--out", out]);
    let text = stdout(&pass);
    assert_eq!(pass.status.code(), Some(0), "{text}{}", stderr(&pass));
    assert!(text.contains("8 passed, 0 failed"), "{text}");
    assert!(text.lines().filter(|l| l.starts_with("PASS")).count() == 8);

    // The same scenario with a promise it cannot keep: recovery within 1 ms.
    let shown = stdout(&stampede(&["show", "baltor"]));
    let broken = shown.replace("\nat_most = 1.5", "\nat_most = 0.001");
    let file = scratch.path().join("broken.toml");
    std::fs::write(&file, broken).unwrap();
    let fail = stampede(&["verify", file.to_str().unwrap(), "--replicas", "300", "--quiet", "--out", out]);
    let text = stdout(&fail);
    assert_eq!(fail.status.code(), Some(1), "{text}");
    assert!(text.contains("6 passed, 2 failed"), "{text}");
    // The verdict names the point by its policy and reads "expected …, got …".
    let fail = text.lines().find(|l| l.starts_with("FAIL")).unwrap_or_else(|| panic!("{text}"));
    assert!(fail.starts_with("FAIL  baltor #1 ("), "{fail}");
    assert!(fail.contains("recovery_s: expected ci_hi ≤ 0.001, got "), "{fail}");
}

#[test]
fn verify_without_assertions_is_bad_input() {
    let scratch = tempfile::tempdir().unwrap();
    let output = stampede(&["verify", "mmc", "--quiet", "--out", scratch.path().to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("declares no [[verify]] assertions"));
    assert!(files_below(scratch.path()).is_empty());
}

#[test]
fn cluster_output_is_identical_for_any_thread_count_and_has_a_time_series() {
    let scratch = tempfile::tempdir().unwrap();
    let run = |threads: &str| {
        let out = scratch.path().join(threads);
        let output = stampede(&[
            "run",
            "retry-storm",
            "--replicas",
            "30",
            "--set",
            "run.horizon_s=6",
            "--threads",
            threads,
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(output.status.success(), "{}", stderr(&output));
        out.join("retry-storm")
    };
    let one = run("1");
    let two = run("2");
    for file in ["summary.parquet", "replicas.parquet", "histograms.parquet", "timeseries.parquet", "hops.parquet"] {
        let a = std::fs::read(one.join(file)).unwrap();
        assert!(a == std::fs::read(two.join(file)).unwrap(), "{file} differs between 1 and 2 threads");
    }
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(one.join("manifest.json")).unwrap()).unwrap();
    assert!(manifest["files"].as_array().unwrap().iter().any(|f| f == "timeseries.parquet"));
    assert_eq!(manifest["series"][0], "queue_depth");
}

#[test]
fn cluster_bad_input_names_the_field() {
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().to_str().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (&["--set", "router.capacity_factor=0.5"], "router.capacity_factor = 0.5: must be at least 1"),
        (&["--set", "clients.timeout_s=0"], "clients.timeout_s = 0"),
        (&["--set", "retry.policy=sometimes"], "retry.policy"),
        (&["--set", "router.shards=0"], "router.shards = 0: must be at least 1"),
        (&["--set", "series.bucket_s=-1"], "series.bucket_s = -1"),
    ];
    for (args, expected) in cases {
        let mut full = vec!["run", "baltor", "--quiet", "--replicas", "2", "--out", out];
        full.extend_from_slice(args);
        let output = stampede(&full);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(stderr(&output).contains(expected), "{args:?}: {}", stderr(&output));
    }
    // A fault on a shard the cluster does not have.
    let shown = stdout(&stampede(&["show", "baltor"])).replace("shard = 0", "shard = 9");
    let file = scratch.path().join("bad.toml");
    std::fs::write(&file, shown).unwrap();
    let output = stampede(&["run", file.to_str().unwrap(), "--quiet", "--out", out]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("faults[1].shard = 9: must be below router.shards (4)"), "{}", stderr(&output));
    assert_eq!(files_below(scratch.path()), vec![std::path::PathBuf::from("bad.toml")]);
}

/// budget_ratio means the throttle's K under budget = "adaptive": the default 0.1 is
/// refused with a message that says so, and K = 2 is accepted.
#[test]
fn an_adaptive_budget_says_budget_ratio_is_its_k() {
    let output = stampede(&["show", "bounded-load", "--set", "retry.budget=adaptive"]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(message.contains("budget_ratio is the throttle's K"), "{message}");
    assert!(message.contains("the default 0.1 is the ratio budget's 10%, not a K"), "{message}");
    assert!(message.contains("hint: set retry.budget_ratio = 2"), "{message}");
    let fixed = stampede(&["show", "bounded-load", "--set", "retry.budget=adaptive", "--set", "retry.budget_ratio=2"]);
    assert!(fixed.status.success(), "{}", stderr(&fixed));
}
