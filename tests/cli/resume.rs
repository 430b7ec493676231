//! Resume after a kill: a run (and a shard) killed with SIGKILL at moments spread
//! over its life leaves no half-written output, and `--resume` finishes only the
//! missing work into output byte-identical to an uninterrupted run.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{parquet_tables as tables, stampede, stderr};

const ARGS: &[&str] = &["run", "baltor", "--replicas", "120", "--quiet", "--no-report", "--threads", "2"];

/// Starts the run into `out` with short checkpoint pieces, and kills it after `delay`.
fn killed_run(out: &Path, extra: &[&str], delay: Duration) -> bool {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(ARGS)
        .args(["--out", out.to_str().unwrap()])
        .args(extra)
        .env("STAMPEDE_CHECKPOINT_S", "0.05")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(delay);
    let finished = child.try_wait().unwrap().is_some();
    let _ = child.kill(); // SIGKILL
    child.wait().unwrap();
    !finished
}

#[test]
fn a_run_killed_at_any_moment_resumes_to_identical_output() {
    let dir = tempfile::tempdir().unwrap();
    let reference = dir.path().join("reference");
    let output = stampede(&[ARGS, &["--out", reference.to_str().unwrap()]].concat());
    assert!(output.status.success(), "{}", stderr(&output));
    let expected = tables(&reference.join("baltor"));
    // Moments spread over the run's life, from a fixed sequence (reproducible).
    let mut state = 0x5eed_u64;
    let mut killed = 0;
    for attempt in 0..5 {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let delay = Duration::from_millis(50 + (state >> 33) % 900);
        let out = dir.path().join(format!("attempt-{attempt}"));
        if killed_run(&out, &[], delay) {
            killed += 1;
            // Killed: no output folder, or a complete one — never a partial one.
            let folder = out.join("baltor");
            assert!(!folder.exists() || folder.join("manifest.json").exists(), "a half-written folder");
        }
        let output = stampede(&[ARGS, &["--out", out.to_str().unwrap(), "--resume"]].concat());
        assert!(output.status.success(), "{}", stderr(&output));
        assert!(tables(&out.join("baltor")) == expected, "attempt {attempt} (killed after {delay:?}): output differs");
        assert!(!out.join(".baltor.checkpoint").exists(), "the checkpoint is removed once the output is in place");
    }
    assert!(killed >= 3, "only {killed} of 5 runs were killed before finishing: lengthen the run");
}

#[test]
fn a_killed_shard_resumes_and_a_foreign_checkpoint_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("parts");
    let shard = ["--shard", "1/2"];
    killed_run(&out, &shard, Duration::from_millis(300));
    let resumed = stampede(&[ARGS, &["--out", out.to_str().unwrap(), "--resume"], &shard].concat());
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    // With shard 0 beside it, the resumed shard merges into exactly the single run.
    let output = stampede(&[ARGS, &["--out", out.to_str().unwrap(), "--shard", "0/2"]].concat());
    assert!(output.status.success(), "{}", stderr(&output));
    let merged = dir.path().join("merged");
    let output = stampede(&[
        "merge",
        out.join("baltor/shards").to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
        "--no-report",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let single = dir.path().join("single");
    let output = stampede(&[ARGS, &["--out", single.to_str().unwrap()]].concat());
    assert!(output.status.success());
    assert!(
        tables(&merged.join("baltor")) == tables(&single.join("baltor")),
        "a resumed shard merges into the single run"
    );

    // A checkpoint left by another run (another seed) is not resumed into this one.
    let other = dir.path().join("other");
    if killed_run(&other, &["--seed", "9"], Duration::from_millis(300)) && other.join(".baltor.checkpoint").exists() {
        let output = stampede(&[ARGS, &["--out", other.to_str().unwrap(), "--resume"]].concat());
        assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
        assert!(stderr(&output).contains("belongs to another run"), "{}", stderr(&output));
    }
}
