//! Sharded runs merged: byte-identical to a single process for several splits and
//! every model; shards that do not belong together, missing or given twice are
//! refused with nothing written; shard folders read by DuckDB before merging.

use std::path::Path;

use crate::common::{parquet_tables as tables, python_with_duckdb, skip, stampede, stderr, stdout};

fn run(args: &[&str]) {
    let output = stampede(args);
    assert!(output.status.success(), "{args:?}: {}", stderr(&output));
}

/// Runs `scenario`'s `count` shards (`extra` settings) into `root`: their folder.
fn shards_of(root: &Path, scenario: &str, replicas: &str, count: u32, extra: &[&str]) -> std::path::PathBuf {
    for k in 0..count {
        let shard = format!("{k}/{count}");
        let mut args = vec![
            "run",
            scenario,
            "--replicas",
            replicas,
            "--out",
            root.to_str().unwrap(),
            "--quiet",
            "--shard",
            &shard,
        ];
        args.extend_from_slice(extra);
        run(&args);
    }
    root.join(Path::new(scenario).file_stem().unwrap()).join("shards")
}

/// Runs `scenario` whole and in `count` shards (a few replicas, `extra` settings),
/// merges, and compares every table.
fn check(scenario: &str, replicas: &str, count: u32, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let root = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let single_root = root("single");
    let mut single = vec!["run", scenario, "--replicas", replicas, "--out", &single_root, "--quiet", "--no-report"];
    single.extend_from_slice(extra);
    run(&single);
    let mut sharded = vec!["--threads", "1"];
    sharded.extend_from_slice(extra);
    let shards = shards_of(&dir.path().join("parts"), scenario, replicas, count, &sharded);
    let name = Path::new(scenario).file_stem().unwrap().to_str().unwrap().to_string();
    let merged = root("merged");
    run(&["merge", shards.to_str().unwrap(), "--out", &merged, "--quiet", "--no-report"]);
    let (a, b) = (tables(&dir.path().join("single").join(&name)), tables(&dir.path().join("merged").join(&name)));
    assert_eq!(a.iter().map(|t| &t.0).collect::<Vec<_>>(), b.iter().map(|t| &t.0).collect::<Vec<_>>(), "{scenario}");
    for ((file, x), (_, y)) in a.iter().zip(&b) {
        assert!(x == y, "{scenario} in {count} shards: {file} differs from the single run");
    }
}

#[test]
fn merged_shards_equal_a_single_run_for_any_split() {
    for count in [1, 2, 3, 7] {
        check("baltor", "6", count, &[]);
    }
    // More shards than replicas: some shards hold no replica of a point.
    check("mmc", "3", 5, &["--set", "run.horizon_s=200", "--set", "run.warmup_s=20"]);
}

#[test]
fn merged_shards_equal_a_single_run_for_every_model() {
    check("mg1", "4", 3, &["--set", "run.horizon_s=500", "--set", "run.warmup_s=50"]);
    check("dependency-slowdown", "4", 3, &[]);
    check("llm-stack", "3", 2, &[]);
    check("bounded-load", "4", 4, &[]);
    check("graph-three-tier", "4", 3, &["--set", "run.horizon_s=16"]);
}

#[test]
fn shards_that_do_not_belong_together_are_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let parts = dir.path().join("parts");
    let other = dir.path().join("other");
    let p = parts.to_str().unwrap();
    for k in 0..3 {
        run(&[
            "run",
            "mmc",
            "--replicas",
            "3",
            "--out",
            p,
            "--quiet",
            "--shard",
            &format!("{k}/3"),
            "--set",
            "run.horizon_s=100",
        ]);
    }
    run(&[
        "run",
        "mmc",
        "--replicas",
        "3",
        "--out",
        other.to_str().unwrap(),
        "--quiet",
        "--shard",
        "1/3",
        "--seed",
        "7",
        "--set",
        "run.horizon_s=100",
    ]);
    let shard = |root: &Path, k: u32| root.join(format!("mmc/shards/shard={k}")).to_str().unwrap().to_string();
    let out = dir.path().join("merged");
    let o = out.to_str().unwrap();
    for (args, expected) in [
        (vec![shard(&parts, 0), shard(&other, 1), shard(&parts, 2)], "of another run"),
        (vec![shard(&parts, 0), shard(&parts, 2)], "missing shard(s) 1 of 3"),
        (vec![shard(&parts, 0), shard(&parts, 1), shard(&parts, 1), shard(&parts, 2)], "given twice: 1"),
        (vec![dir.path().to_str().unwrap().to_string()], "not a shard folder"),
    ] {
        let mut all = vec!["merge".to_string()];
        all.extend(args);
        all.extend(["--out".to_string(), o.to_string()]);
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        let output = stampede(&refs);
        assert_eq!(output.status.code(), Some(2), "{refs:?}: {}", stderr(&output));
        assert!(stderr(&output).contains(expected), "{refs:?}: {}", stderr(&output));
        assert!(!out.exists(), "nothing written");
    }
    // Merging into the folder that holds the shards would destroy them.
    let output = stampede(&["merge", parts.join("mmc/shards").to_str().unwrap(), "--out", p]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("holds shard"), "{}", stderr(&output));
    assert!(parts.join("mmc/shards/shard=0/manifest.json").exists());
}

#[test]
fn shard_auto_reads_the_schedulers_variables_and_says_which() {
    let dir = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args([
            "run",
            "mmc",
            "--replicas",
            "4",
            "--out",
            dir.path().to_str().unwrap(),
            "--shard",
            "auto",
            "--set",
            "run.horizon_s=100",
        ])
        .env("SLURM_ARRAY_TASK_ID", "5")
        .env("SLURM_ARRAY_TASK_COUNT", "2")
        .env("SLURM_ARRAY_TASK_MIN", "4")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).contains("shard 1 of 2 (from SLURM_ARRAY_TASK_ID=5"), "{}", stderr(&output));
    assert!(stdout(&output).contains("shard=1"), "{}", stdout(&output));
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("mmc/shards/shard=1/manifest.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["shard"]["index"], 1);
    assert_eq!(manifest["shard"]["count"], 2);
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["run", "mmc", "--out", dir.path().to_str().unwrap(), "--shard", "auto"])
        .env_remove("SLURM_ARRAY_TASK_ID")
        .env_remove("JOB_COMPLETION_INDEX")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("no scheduler variables"), "{}", stderr(&output));
}

#[test]
fn duckdb_reads_every_shard_before_the_merge() {
    let python = match python_with_duckdb() {
        Ok(python) => python,
        Err(why) => return skip("duckdb_reads_every_shard_before_the_merge", &why),
    };
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_str().unwrap();
    for k in 0..3 {
        run(&[
            "run",
            "mmc",
            "--replicas",
            "5",
            "--out",
            p,
            "--quiet",
            "--shard",
            &format!("{k}/3"),
            "--set",
            "run.horizon_s=100",
        ]);
    }
    let query = "SELECT shard, count(*) AS rows, count(DISTINCT (grid_point, replica)) AS tasks \
                 FROM read_parquet('mmc/shards/*/replicas.parquet', hive_partitioning = true) GROUP BY shard ORDER BY shard";
    let script = format!("import duckdb\nprint(duckdb.sql(\"{query}\").fetchall())");
    let output = std::process::Command::new(python).args(["-c", &script]).current_dir(dir.path()).output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    // 3 points × 5 replicas over 3 shards: 5 each, every task once.
    assert_eq!(stdout(&output).trim(), "[(0, 5, 5), (1, 5, 5), (2, 5, 5)]");
}

/// The merge's own account of its peak memory (Linux; `None` elsewhere).
fn merge_peak_mib(stdout: &str) -> Option<f64> {
    let after = stdout.split("peak memory ").nth(1)?;
    after.split(' ').next()?.parse().ok()
}

/// Runs `count` shards of a small M/M/c of `replicas` replicas (four at a time) and
/// merges them; returns the merged folder's tables and the merge's peak memory.
/// Its replicas simulate 10 s: the merge's bytes and memory are what is tested, and
/// 200 s replicas made this test 46 s of the CLI suite for the same rows.
fn shards_merged(dir: &Path, replicas: u32, count: u32) -> (Vec<(String, Vec<u8>)>, Option<f64>) {
    let parts = dir.join(format!("parts-{count}"));
    let parts_text = parts.to_str().unwrap().to_string();
    let replicas_text = replicas.to_string();
    let next = std::sync::atomic::AtomicU32::new(0);
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| loop {
                let k = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if k >= count {
                    return;
                }
                let shard = format!("{k}/{count}");
                run(&[
                    "run",
                    "mmc",
                    "--replicas",
                    &replicas_text,
                    "--out",
                    &parts_text,
                    "--quiet",
                    "--shard",
                    &shard,
                    "--threads",
                    "1",
                    "--set",
                    "run.horizon_s=10",
                    "--set",
                    "run.warmup_s=1",
                ]);
            });
        }
    });
    let merged = dir.join(format!("merged-{count}"));
    let output =
        stampede(&["merge", &format!("{parts_text}/mmc/shards"), "--out", merged.to_str().unwrap(), "--no-report"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains(&format!("merged {count} shards")), "{text}");
    (tables(&merged.join("mmc")), merge_peak_mib(&text))
}

#[test]
fn two_hundred_shards_merge_byte_identically_in_the_memory_seven_take() {
    let dir = tempfile::tempdir().unwrap();
    let replicas = 2_000;
    let out = dir.path().join("single");
    run(&[
        "run",
        "mmc",
        "--replicas",
        "2000",
        "--out",
        out.to_str().unwrap(),
        "--quiet",
        "--no-report",
        "--set",
        "run.horizon_s=10",
        "--set",
        "run.warmup_s=1",
    ]);
    let single = tables(&out.join("mmc"));
    let (seven, seven_peak) = shards_merged(dir.path(), replicas, 7);
    let (many, many_peak) = shards_merged(dir.path(), replicas, 200);
    assert!(seven == single, "7 shards merged differ from the single run");
    assert!(many == single, "200 shards merged differ from the single run");
    match (seven_peak, many_peak) {
        (Some(seven), Some(many)) => {
            // The merge holds one shard's slice of one point at a time: 200 shards cost
            // what 7 do (the rows, 2,000 × 27 metrics, are 0.4 MiB; the margin is
            // for the allocator and 193 more manifests and partial-row ranges).
            assert!(many < seven + 8.0, "peak memory grew with the shards: {seven} MiB for 7, {many} MiB for 200");
            assert!(many < 64.0, "a small merge took {many} MiB");
        }
        _ => eprintln!("SKIPPED the peak-memory half: this system has no /proc/self/status VmHWM (Linux has)"),
    }
}

/// `merge --verify` checks the claims on the merged run: the same verify.json, the
/// same exit status and the same tables as `stampede verify` in one process — for
/// claims on means (mg1) and on replicas' quantiles and fractions (baltor, whose
/// fractions fail at 12 replicas: exit 1 either way) — and JUnit beside it.
#[test]
fn merge_verify_gives_the_single_verify_s_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    for (scenario, replicas, merge_rows) in [("mg1", "24", "all"), ("baltor", "12", "none")] {
        let root = dir.path().join(scenario);
        let shards = shards_of(&root.join("parts"), scenario, replicas, 3, &[]);
        let merged = root.join("merged");
        let junit = root.join("verdicts.xml");
        let merge = stampede(&[
            "merge",
            shards.to_str().unwrap(),
            "--out",
            merged.to_str().unwrap(),
            "--verify",
            "--junit",
            junit.to_str().unwrap(),
            "--replica-rows",
            merge_rows,
            "--quiet",
        ]);
        let single = root.join("single");
        let verify = stampede(&[
            "verify",
            scenario,
            "--replicas",
            replicas,
            "--out",
            single.to_str().unwrap(),
            "--replica-rows",
            merge_rows,
            "--quiet",
        ]);
        assert!(matches!(verify.status.code(), Some(0 | 1)), "{}", stderr(&verify));
        assert_eq!(merge.status.code(), verify.status.code(), "{scenario}: {}", stderr(&merge));
        let verdicts =
            |text: String| text.lines().filter(|l| !l.starts_with("report: ")).collect::<Vec<_>>().join("\n");
        assert_eq!(verdicts(stdout(&merge)), verdicts(stdout(&verify)), "{scenario}: the verdicts printed");
        assert!(stdout(&merge).contains(&format!("report: {}", merged.join(scenario).join("report.html").display())));
        let read = |d: &Path| std::fs::read(d.join(scenario).join("verify.json")).unwrap();
        assert_eq!(read(&merged), read(&single), "{scenario}: verify.json");
        assert!(tables(&merged.join(scenario)) == tables(&single.join(scenario)), "{scenario}: the tables");
        let xml = std::fs::read_to_string(&junit).unwrap();
        assert!(xml.contains("<testsuite") && xml.contains(scenario), "{xml}");
        assert!(merged.join(scenario).join("report.html").exists());
    }
}

/// `merge --json` prints what `run --json` prints for the same run (but where it
/// wrote), and with `--verify` what `verify --json` prints, byte for byte.
#[test]
fn merge_json_is_run_s_and_verify_s_document() {
    let dir = tempfile::tempdir().unwrap();
    let shards = shards_of(&dir.path().join("parts"), "mg1", "12", 2, &[]);
    let out = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let printed = |args: &[&str]| {
        let output = stampede(args);
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        serde_json::from_str::<serde_json::Value>(&stdout(&output)).expect("one JSON document")
    };
    let mut merged = printed(&["merge", shards.to_str().unwrap(), "--out", &out("m"), "--json", "--no-report"]);
    let mut single = printed(&["run", "mg1", "--replicas", "12", "--out", &out("s"), "--json", "--no-report"]);
    assert_ne!(merged["output_dir"], single["output_dir"]);
    merged["output_dir"] = serde_json::Value::Null;
    single["output_dir"] = serde_json::Value::Null;
    assert_eq!(merged, single);
    let verdicts = printed(&["merge", shards.to_str().unwrap(), "--out", &out("mv"), "--json", "--verify"]);
    let verified = printed(&["verify", "mg1", "--replicas", "12", "--out", &out("sv"), "--json"]);
    assert_eq!(verdicts, verified);
    assert!(verdicts.to_string().contains("\"passed\""), "{verdicts}");
}

/// What `merge --verify` and `verify --shard` cannot do is refused with exit 2 before
/// anything is written: claims over replicas from shards that kept no rows (the
/// message names the claims and the fix), a scenario without claims, --junit without
/// --verify, and a shard of a verify (a claim is about the whole run).
#[test]
fn merge_verify_refuses_what_it_cannot_check_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("merged");
    let refused = |args: &[&str], needles: &[&str]| {
        let output = stampede(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stderr(&output));
        for needle in needles {
            assert!(stderr(&output).contains(needle), "{args:?}: wants {needle:?} in {}", stderr(&output));
        }
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    };
    let rowless = shards_of(&dir.path().join("rowless"), "baltor", "6", 2, &["--replica-rows", "none"]);
    let (rowless, out_arg) = (rowless.to_str().unwrap(), out.to_str().unwrap());
    refused(
        &["merge", rowless, "--out", out_arg, "--verify"],
        &["verify[3] (p95 of recovery_s)", "--replica-rows none", "run them with --replica-rows all"],
    );
    let mmc = shards_of(&dir.path().join("mmc"), "mmc", "4", 2, &[]);
    refused(&["merge", mmc.to_str().unwrap(), "--out", out_arg, "--verify"], &["declares no [[verify]] assertions"]);
    refused(&["merge", mmc.to_str().unwrap(), "--out", out_arg, "--junit", "j.xml"], &["--verify"]);
    refused(
        &["verify", "mg1", "--shard", "0/2", "--out", out_arg],
        &["--shard 0/2 with verify", "stampede merge --verify"],
    );
}
