//! The output folder is one unit: concurrent runs into one folder, a commit that
//! cannot happen, and runs killed at random moments (SIGINT, SIGTERM, SIGKILL) —
//! the folder always holds exactly one complete run or the previous one, never a
//! mix, and nothing else is left in the output root.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{stampede, stderr};

/// The run in `root/mmc` is complete and consistent: the manifest lists exactly the
/// files present, and every table agrees with the manifest's seed.
fn assert_one_complete_run(root: &Path) -> Option<u64> {
    let dir = root.join("mmc");
    if !dir.exists() {
        return None;
    }
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).expect("a folder always has its manifest"))
            .unwrap();
    let mut listed: Vec<String> =
        manifest["files"].as_array().unwrap().iter().map(|f| f.as_str().unwrap().to_string()).collect();
    listed.sort();
    let mut present: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    present.sort();
    assert_eq!(listed, present, "the folder holds exactly the files its manifest lists");
    Some(manifest["seed"].as_u64().unwrap())
}

/// Everything in the output root besides the run folders and their lock files.
fn litter(root: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root) else { return Vec::new() };
    entries
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != "mmc" && name != ".mmc.lock")
        .collect()
}

fn run_args(root: &Path, seed: &str) -> Vec<String> {
    ["run", "mmc", "--quiet", "--replicas", "400", "--seed", seed, "--out", root.to_str().unwrap()]
        .map(String::from)
        .to_vec()
}

#[test]
fn a_second_run_into_the_same_folder_is_refused_and_the_first_completes() {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path();
    let first = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(run_args(root, "1"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the first run holds the lock (its staging folder exists).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !litter(root).iter().any(|n| n.starts_with(".mmc.staging-")) {
        assert!(std::time::Instant::now() < deadline, "the first run never started writing");
        std::thread::sleep(Duration::from_millis(5));
    }
    let second = stampede(&run_args(root, "2").iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(second.status.code(), Some(3), "{}", stderr(&second));
    let message = stderr(&second);
    assert!(message.contains(&format!("another stampede run (process {})", first.id())), "{message}");
    assert!(message.contains("nothing was written") && message.contains("hint: wait for it to finish"), "{message}");
    let first = first.wait_with_output().unwrap();
    assert!(first.status.success(), "{}", stderr(&first));
    assert_eq!(assert_one_complete_run(root), Some(1), "the folder holds the first run");
    assert!(litter(root).is_empty(), "{:?}", litter(root));
}

#[test]
fn a_commit_that_cannot_happen_leaves_the_previous_run_whole() {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path();
    // Something that is not a folder where the run folder goes.
    std::fs::write(root.join("mmc"), "a file").unwrap();
    let run = stampede(&run_args(root, "1").iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(run.status.code(), Some(3), "{}", stderr(&run));
    assert!(stderr(&run).contains("is not a folder"), "{}", stderr(&run));
    assert_eq!(std::fs::read_to_string(root.join("mmc")).unwrap(), "a file");
    // The work done is kept for --resume, and the message says so; nothing else is left.
    assert!(stderr(&run).contains("--resume"), "{}", stderr(&run));
    assert_eq!(litter(root), [".mmc.checkpoint"], "{:?}", litter(root));
}

/// Kills runs at six spread-out moments, each signal twice; after each, the folder holds
/// the previous complete run (or none); the next run cleans up and completes.
#[test]
fn runs_killed_at_any_moment_leave_the_previous_run_or_nothing() {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path();
    let mut previous = None;
    // Delays spread over a run's life (it takes ~0.1-1 s here): before the folder,
    // while replicas run, around the commit.
    for (i, delay_ms) in [0u64, 5, 30, 80, 200, 500].into_iter().enumerate() {
        let signal = ["-KILL", "-TERM", "-INT"][i % 3];
        let seed = (100 + i).to_string();
        let child = Command::new(env!("CARGO_BIN_EXE_stampede"))
            .args(run_args(root, &seed))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = Command::new("kill").args([signal, &child.id().to_string()]).status();
        let status = child.wait_with_output().unwrap().status;
        let now = assert_one_complete_run(root);
        if status.success() {
            assert_eq!(now, Some(100 + i as u64), "a run that finished is in place");
        } else {
            assert_eq!(now, previous, "a killed run ({signal} after {delay_ms} ms) left the previous run");
        }
        previous = now;
    }
    // The next run removes whatever killed runs left behind.
    let run = stampede(&run_args(root, "7").iter().map(String::as_str).collect::<Vec<_>>());
    assert!(run.status.success(), "{}", stderr(&run));
    assert_eq!(assert_one_complete_run(root), Some(7));
    assert!(litter(root).is_empty(), "{:?}", litter(root));
}
