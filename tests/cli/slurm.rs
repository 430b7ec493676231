//! Slurm, for real: a 4-task job array of a small scenario and the merge job chained
//! with `--dependency=afterok`, on the single-node cluster `.ci/slurm up` starts; the
//! merged tables must equal a single-process run byte for byte, and the merge job's
//! verdicts (`merge --verify`) a single process's `verify`.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{files_below, parquet_tables as tables, skip_unless_required, stampede, stderr};

/// Whether a Slurm controller answers with a usable node.
fn slurm_ready() -> Result<(), String> {
    let install = "install Debian's slurmctld, slurmd, slurm-client and munge and start them (.ci/slurm up does both)";
    match Command::new("sinfo").args(["-h", "-o", "%t"]).output() {
        Ok(output) if output.status.success() => {
            let states = String::from_utf8_lossy(&output.stdout);
            if states.lines().any(|s| ["idle", "mix", "alloc"].contains(&s.trim())) {
                Ok(())
            } else {
                Err(format!("Slurm answers but no node is up ({:?}): {install}", states.trim()))
            }
        }
        _ => Err(format!("no Slurm cluster (sinfo failed): {install}")),
    }
}

fn sbatch(args: &[&str]) -> String {
    let output = Command::new("sbatch").arg("--parsable").args(args).output().expect("sbatch runs");
    assert!(output.status.success(), "sbatch {args:?}: {}", stderr(&output));
    String::from_utf8_lossy(&output.stdout).trim().split(';').next().unwrap().to_string()
}

#[test]
fn a_slurm_array_and_its_merge_job_match_a_single_process() {
    if let Err(why) = slurm_ready() {
        return skip_unless_required(
            "a_slurm_array_and_its_merge_job_match_a_single_process",
            &why,
            "STAMPEDE_REQUIRE_SLURM",
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let binary = env!("CARGO_BIN_EXE_stampede");
    let run =
        format!("{binary} run mg1 --replicas 8 --set run.horizon_s=500 --set run.warmup_s=50 --quiet --no-report");
    let array = sbatch(&[
        "--array=0-3",
        "-o",
        &format!("{d}/slurm-%A_%a.out"),
        "--wrap",
        &format!("{run} --out {d}/parts --shard auto"),
    ]);
    let merge = sbatch(&[
        &format!("--dependency=afterok:{array}"),
        "-o",
        &format!("{d}/merge.out"),
        "--wrap",
        &format!("{binary} merge {d}/parts/mg1/shards --out {d}/merged --no-report --quiet --verify"),
    ]);
    let started = Instant::now();
    loop {
        let queue = Command::new("squeue").args(["-h", "-j", &format!("{array},{merge}")]).output().unwrap();
        if String::from_utf8_lossy(&queue.stdout).trim().is_empty() {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(300), "the jobs did not finish in 5 minutes");
        std::thread::sleep(Duration::from_millis(300));
    }
    let logs: String = files_below(dir.path())
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "out"))
        .map(|f| format!("{}:\n{}", f.display(), std::fs::read_to_string(dir.path().join(f)).unwrap_or_default()))
        .collect();
    assert!(dir.path().join("merged/mg1/manifest.json").exists(), "the merge job wrote nothing; job logs:\n{logs}");
    for k in 0..4 {
        assert!(
            dir.path().join(format!("parts/mg1/shards/shard={k}/manifest.json")).exists(),
            "shard {k}; logs:\n{logs}"
        );
    }
    let single = dir.path().join("single");
    let output = stampede(&[
        "verify",
        "mg1",
        "--replicas",
        "8",
        "--set",
        "run.horizon_s=500",
        "--set",
        "run.warmup_s=50",
        "--quiet",
        "--no-report",
        "--out",
        single.to_str().unwrap(),
    ]);
    assert!(matches!(output.status.code(), Some(0 | 1)), "{}", stderr(&output));
    let (a, b) = (tables(&single.join("mg1")), tables(&dir.path().join("merged/mg1")));
    assert!(!a.is_empty() && a == b, "the Slurm-merged tables differ from the single-process run");
    // The merge job checked the claims as one process's verify does.
    let verdicts = |folder: &Path| std::fs::read(folder.join("verify.json")).unwrap();
    assert_eq!(verdicts(&dir.path().join("merged/mg1")), verdicts(&single.join("mg1")), "verify.json; logs:\n{logs}");
}
