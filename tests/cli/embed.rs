//! `stampede::cli::embed`, the command line in process (what the Python package
//! calls): a command hands back the document and summary the binary would print,
//! errors carry the binary's message and exit code, and a cancelled command leaves no
//! folder.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use stampede::cli::embed::{command, Progress};

fn args(text: &str) -> Vec<String> {
    text.split_whitespace().map(String::from).collect()
}

#[test]
fn a_command_hands_back_its_document_and_warnings() {
    let out = tempfile::tempdir().expect("temp dir");
    let line = format!("run mmc --replicas 4 --json --no-report --out {}", out.path().display());
    let finished = command(&args(&line), Arc::default(), Progress::default()).expect("runs");
    assert_eq!(finished.exit_code, 0);
    assert_eq!(finished.documents.len(), 1);
    assert_eq!(finished.documents[0]["replicas"], 4);
    let summary = finished.summary.expect("the summary table");
    assert!(summary.contains("wait_mean_s"), "{summary}");
    assert!(out.path().join("mmc/summary.parquet").exists());
    // The capture is per call: a second command on the same thread hands back its own
    // document and warnings, nothing of the first's.
    let again = format!("run mmc --replicas 2 --json --no-report --force --out {}", out.path().display());
    let finished = command(&args(&again), Arc::default(), Progress::default()).expect("runs");
    assert_eq!(finished.documents.len(), 1);
    assert_eq!(finished.documents[0]["replicas"], 2);
    assert!(finished.warnings.is_empty(), "{:?}", finished.warnings);
}

#[test]
fn errors_carry_the_binarys_message_and_exit_code() {
    let failure =
        command(&args("run no-such-scenario --json"), Arc::default(), Progress::default()).expect_err("refused");
    assert_eq!(failure.exit_code, 2);
    assert!(failure.message.starts_with("unknown scenario \"no-such-scenario\""), "{}", failure.message);
    let failure =
        command(&args("run mmc --replicas many"), Arc::default(), Progress::default()).expect_err("refused by clap");
    assert_eq!(failure.exit_code, 2);
    assert!(failure.message.contains("invalid value 'many' for '--replicas <N>'"), "{}", failure.message);
    assert!(!failure.message.contains("Usage:"), "{}", failure.message);
}

#[test]
fn a_cancelled_command_fails_and_writes_no_folder() {
    let out = tempfile::tempdir().expect("temp dir");
    let line = format!("run mmc --replicas 100000 --json --out {}", out.path().display());
    let cancel = Arc::new(AtomicBool::new(true));
    let failure = command(&args(&line), cancel, Progress::default()).expect_err("cancelled");
    assert!(failure.cancelled);
    assert!(!out.path().join("mmc").exists());
}
