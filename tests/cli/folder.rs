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

/// Everything in the output root besides the run folder (a clean exit removes the lock file).
fn litter(root: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root) else { return Vec::new() };
    entries.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).filter(|name| name != "mmc").collect()
}

/// A run of about a second (1,200 short replicas): long enough to be killed or
/// raced mid-way, short enough that these tests cost seconds, not minutes.
fn run_args(root: &Path, seed: &str) -> Vec<String> {
    [
        "run",
        "mmc",
        "--quiet",
        "--replicas",
        "400",
        "--set",
        "run.horizon_s=100",
        "--set",
        "run.warmup_s=10",
        "--seed",
        seed,
        "--out",
        root.to_str().unwrap(),
    ]
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
fn a_file_where_the_folder_goes_is_refused_before_the_run_and_kept() {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path();
    // Something that is not a folder where the run folder goes.
    std::fs::write(root.join("mmc"), "a file").unwrap();
    for force in [false, true] {
        let mut args = run_args(root, "1");
        if force {
            args.push("--force".into());
        }
        let run = stampede(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(run.status.code(), Some(2), "{}", stderr(&run));
        assert!(stderr(&run).contains("mmc: is a file, not a folder"), "{}", stderr(&run));
        assert!(stderr(&run).contains("hint: move the file away"), "{}", stderr(&run));
        assert_eq!(std::fs::read_to_string(root.join("mmc")).unwrap(), "a file");
        assert!(litter(root).is_empty(), "nothing was written: {:?}", litter(root));
    }
    // The output root itself a file: named, and said not to be a folder.
    let file = root.join("afile");
    std::fs::write(&file, "mine").unwrap();
    let run = stampede(&["run", "mmc", "--quiet", "--replicas", "5", "--out", file.to_str().unwrap()]);
    assert_eq!(run.status.code(), Some(2), "{}", stderr(&run));
    assert!(stderr(&run).contains("afile: is a file, not a folder; the output root (--out)"), "{}", stderr(&run));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
}

/// A user's own folder (`danger/src/` holding `main.rs` and `deep/y.txt`) that a run
/// would write to (`--set name=src --out danger`): refused with exit 2 before any work,
/// naming what is in the way; every file stays.
#[test]
fn a_users_folder_in_the_way_is_refused_and_kept() {
    let scratch = tempfile::tempdir().unwrap();
    let danger = scratch.path().join("danger");
    std::fs::create_dir_all(danger.join("src/deep")).unwrap();
    std::fs::write(danger.join("src/main.rs"), "fn main() {}").unwrap();
    std::fs::write(danger.join("src/deep/y.txt"), "y").unwrap();
    let before = crate::common::files_below(&danger);
    let out = danger.to_str().unwrap();
    for (command, scenario) in [("run", "mmc"), ("verify", "mg1")] {
        let run = stampede(&[command, scenario, "--set", "name=src", "--replicas", "5", "--quiet", "--out", out]);
        assert_eq!(run.status.code(), Some(2), "{command}: {}", stderr(&run));
        let message = stderr(&run);
        assert!(message.contains("src: is not a stampede output folder"), "{message}");
        assert!(message.contains("deep/, main.rs, which stampede did not write"), "{message}");
        assert!(message.contains("nothing was written") && message.contains("--force"), "{message}");
        assert_eq!(crate::common::files_below(&danger), before, "{command} wrote or deleted something");
        assert_eq!(std::fs::read_to_string(danger.join("src/deep/y.txt")).unwrap(), "y");
    }
    // A shard's folder sits below OUT/NAME: it adds shards/ beside the user's files and deletes none.
    let shard =
        stampede(&["run", "mmc", "--set", "name=src", "--replicas", "5", "--quiet", "--shard", "0/2", "--out", out]);
    assert!(shard.status.success(), "{}", stderr(&shard));
    assert!(danger.join("src/main.rs").exists() && danger.join("src/shards/shard=0/manifest.json").exists());
}

/// A file a user put into an earlier output folder is refused the same way; the same
/// run with `--force` replaces the folder; a folder stampede wrote is replaced without it.
#[test]
fn a_user_file_inside_an_earlier_output_folder_is_refused_unless_forced() {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path();
    let first = stampede(&run_args(root, "1").iter().map(String::as_str).collect::<Vec<_>>());
    assert!(first.status.success(), "{}", stderr(&first));
    // stampede's own: replaced, also after `stampede report` and with verify.json.
    assert!(stampede(&["report", root.join("mmc").to_str().unwrap()]).status.success());
    let again = stampede(&run_args(root, "2").iter().map(String::as_str).collect::<Vec<_>>());
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(assert_one_complete_run(root), Some(2));
    std::fs::write(root.join("mmc/notes.md"), "my analysis").unwrap();
    std::fs::create_dir(root.join("mmc/plots")).unwrap();
    std::fs::write(root.join("mmc/plots/a.png"), "png").unwrap();
    let refused = stampede(&run_args(root, "3").iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    let message = stderr(&refused);
    assert!(message.contains("is an earlier stampede output folder, but it also holds notes.md, plots/"), "{message}");
    assert_eq!(std::fs::read_to_string(root.join("mmc/notes.md")).unwrap(), "my analysis");
    assert!(litter(root).is_empty(), "nothing was written: {:?}", litter(root));
    // merge --out into the same root is held to the same rule.
    let elsewhere = tempfile::tempdir().unwrap();
    let shards = elsewhere.path().join("sharded");
    for k in ["0/2", "1/2"] {
        let args = ["run", "mmc", "--quiet", "--replicas", "40", "--seed", "3", "--shard", k, "--out"];
        let shard = stampede(&[&args[..], &[shards.to_str().unwrap()]].concat());
        assert!(shard.status.success(), "{}", stderr(&shard));
    }
    let shard_dir = shards.join("mmc/shards");
    let merge = stampede(&["merge", shard_dir.to_str().unwrap(), "--quiet", "--out", root.to_str().unwrap()]);
    assert_eq!(merge.status.code(), Some(2), "{}", stderr(&merge));
    assert!(stderr(&merge).contains("notes.md, plots/"), "{}", stderr(&merge));
    let forced =
        stampede(&["merge", shard_dir.to_str().unwrap(), "--quiet", "--force", "--out", root.to_str().unwrap()]);
    assert!(forced.status.success(), "{}", stderr(&forced));
    assert_eq!(assert_one_complete_run(root), Some(3), "--force replaced the folder");
    std::fs::write(root.join("mmc/notes.md"), "again").unwrap();
    let mut args = run_args(root, "4");
    args.push("--force".into());
    let forced = stampede(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(forced.status.success(), "{}", stderr(&forced));
    assert_eq!(assert_one_complete_run(root), Some(4));
    assert!(litter(root).is_empty(), "{:?}", litter(root));
}

/// A clean run leaves no lock file behind; `--resume` without a checkpoint says so.
#[test]
fn a_clean_run_leaves_only_its_folder_and_resume_without_a_checkpoint_says_so() {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path();
    let mut args = run_args(root, "1");
    args.push("--resume".into());
    let run = stampede(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(run.status.success(), "{}", stderr(&run));
    assert!(stderr(&run).contains("--resume: no checkpoint in"), "{}", stderr(&run));
    assert!(stderr(&run).contains("running from the start"), "{}", stderr(&run));
    let names: Vec<String> =
        std::fs::read_dir(root).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["mmc"], "no .mmc.lock, staging or checkpoint left");
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
