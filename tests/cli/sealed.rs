//! Inputs sealed at the start (issue 43, items 1–3 and 5): a file changed while a run
//! is under way, between a kill and `--resume`, or between shards never mixes two
//! versions into one result; a merge takes its inputs from the shards (the files may
//! be gone) and refuses a shard whose files were damaged.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{parquet_tables as tables, stampede, stderr};

const OLD: &str = "latency_s\n0.2\n0.4\n0.9\n1.1\n0.3\n";
const NEW: &str = "latency_s\n0.1\n0.1\n0.1\n0.2\n";

/// A scenario folder: `s.toml` (M/G/1, service times from `lat.csv`) and `lat.csv`.
fn scenario(dir: &Path, replicas: u32) -> PathBuf {
    std::fs::write(dir.join("lat.csv"), OLD).unwrap();
    let path = dir.join("s.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"sealed\"\nmodel = \"mg1\"\n[run]\nhorizon_s = 100000.0\nwarmup_s = 100.0\nreplicas = {replicas}\n\
             seed = 5\n[queue]\narrival_rate_per_s = 1.2\nservice = {{ dist = \"empirical\", file = \"lat.csv\", \
             column = \"latency_s\" }}\n"
        ),
    )
    .unwrap();
    path
}

fn run_args<'a>(scenario: &'a Path, out: &'a Path) -> Vec<&'a str> {
    vec!["run", scenario.to_str().unwrap(), "--quiet", "--no-report", "--threads", "2", "--out", out.to_str().unwrap()]
}

fn manifest(folder: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(folder.join("manifest.json")).unwrap()).unwrap()
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Waits until the run's checkpoint holds a finished piece (so it is mid-run).
fn wait_for_a_piece(out: &Path, child: &mut std::process::Child) -> bool {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        let pieces = std::fs::read_dir(out.join(".sealed.checkpoint"))
            .map(|entries| entries.flatten().any(|e| e.file_name().to_string_lossy().starts_with("piece-")))
            .unwrap_or(false);
        if pieces {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

fn spawn(args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(args)
        .env("STAMPEDE_CHECKPOINT_S", "0.02")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_file_changed_mid_run_or_before_a_resume_never_mixes_versions() {
    let dir = tempfile::tempdir().unwrap();
    let path = scenario(dir.path(), 300);
    let reference = dir.path().join("reference");
    let output = stampede(&run_args(&path, &reference));
    assert!(output.status.success(), "{}", stderr(&output));
    let expected = tables(&reference.join("sealed"));

    // Mid-run: the file is replaced once the first piece is on disk.
    let out = dir.path().join("swapped");
    let mut child = spawn(&run_args(&path, &out));
    let mid_run = wait_for_a_piece(&out, &mut child);
    std::fs::write(dir.path().join("lat.csv"), NEW).unwrap();
    assert!(child.wait().unwrap().success());
    assert!(mid_run, "the run finished before its first piece was seen: lengthen it");
    assert!(tables(&out.join("sealed")) == expected, "the run used the file as it was when it started");
    let input = &manifest(&out.join("sealed"))["inputs"][0];
    assert_eq!(input["sha256"].as_str().unwrap(), sha256_hex(OLD.as_bytes()), "the hash of the bytes used");
    assert_eq!(input["content"].as_str().unwrap(), OLD);

    // Between a kill and --resume: refused, naming the file; nothing resumed.
    std::fs::write(dir.path().join("lat.csv"), OLD).unwrap();
    let out = dir.path().join("killed");
    let mut child = spawn(&run_args(&path, &out));
    assert!(wait_for_a_piece(&out, &mut child), "the run finished before its first piece was seen");
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::write(dir.path().join("lat.csv"), NEW).unwrap();
    let resumed = stampede(&[run_args(&path, &out), vec!["--resume"]].concat());
    assert_eq!(resumed.status.code(), Some(2), "{}", stderr(&resumed));
    let message = stderr(&resumed);
    assert!(
        message.contains("lat.csv (queue.service.file) changed") && message.contains("since the checkpoint"),
        "{message}"
    );
    assert!(!out.join("sealed").exists(), "nothing written");
    // With the file restored the resume goes ahead, into the reference's bytes.
    std::fs::write(dir.path().join("lat.csv"), OLD).unwrap();
    let resumed = stampede(&[run_args(&path, &out), vec!["--resume"]].concat());
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    assert!(tables(&out.join("sealed")) == expected);
}

#[test]
fn shards_merge_from_their_own_inputs_and_refuse_what_differs_or_is_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let path = scenario(dir.path(), 12);
    let single = dir.path().join("single");
    let output = stampede(&run_args(&path, &single));
    assert!(output.status.success(), "{}", stderr(&output));
    let parts = dir.path().join("parts");
    for shard in ["0/2", "1/2"] {
        let output = stampede(&[run_args(&path, &parts), vec!["--shard", shard]].concat());
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let shards = parts.join("sealed/shards");
    let shard_dirs = [shards.join("shard=0"), shards.join("shard=1")];
    let shard_manifest = manifest(&shard_dirs[0]);
    let checksums = &shard_manifest["file_checksums"];
    for name in ["replicas.parquet", "partials.parquet"] {
        let bytes = std::fs::read(shard_dirs[0].join(name)).unwrap();
        assert_eq!(checksums[name]["sha256"].as_str().unwrap(), sha256_hex(&bytes), "{name}");
        assert_eq!(checksums[name]["bytes"].as_u64(), Some(bytes.len() as u64));
    }

    // The input file is gone (edited and then removed) on the merging machine: the merge
    // takes it from the shards and records their hash.
    std::fs::write(dir.path().join("lat.csv"), NEW).unwrap();
    std::fs::remove_file(dir.path().join("lat.csv")).unwrap();
    let merged = dir.path().join("merged");
    let merge = |out: &Path| {
        stampede(&["merge", shards.to_str().unwrap(), "--out", out.to_str().unwrap(), "--no-report", "--quiet"])
    };
    let output = merge(&merged);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(tables(&merged.join("sealed")) == tables(&single.join("sealed")), "the merge equals the single run");
    let input = &manifest(&merged.join("sealed"))["inputs"][0];
    assert_eq!(input["sha256"].as_str().unwrap(), sha256_hex(OLD.as_bytes()));

    // One flipped bit in a shard's partials: refused, naming the file; nothing written.
    let partials = shard_dirs[1].join("partials.parquet");
    let mut bytes = std::fs::read(&partials).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    std::fs::write(&partials, &bytes).unwrap();
    let damaged = dir.path().join("damaged");
    let output = merge(&damaged);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains("shard=1/partials.parquet is damaged"), "{message}");
    assert!(!damaged.exists(), "nothing written");
    bytes[middle] ^= 0x10;
    std::fs::write(&partials, &bytes).unwrap();

    // Shard 1 run again with another version of the file: the shards no longer merge.
    std::fs::write(dir.path().join("lat.csv"), NEW).unwrap();
    let output = stampede(&[run_args(&path, &parts), vec!["--shard", "1/2"]].concat());
    assert!(output.status.success(), "{}", stderr(&output));
    let output = merge(&dir.path().join("mixed"));
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains("the shards read different content for lat.csv (queue.service.file)"), "{message}");
}
