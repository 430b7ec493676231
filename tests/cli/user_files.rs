//! Abusive input and output paths (issue 43, items 5, 12 and 14): explicit output files
//! never replace a file stampede did not write (without --force) and never make a new
//! folder tree outside the current folder; a FIFO or device named as an input is
//! refused at once; `fit` on constant data, zeros, a `+Inf`-only histogram or a CSV
//! with a byte-order mark says something true.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{stampede, stderr, stdout};

fn mmc(out: &Path, replicas: &str) {
    let output = stampede(&[
        "run",
        "mmc",
        "--quiet",
        "--no-report",
        "--replicas",
        replicas,
        "--set",
        "run.horizon_s=20",
        "--set",
        "run.warmup_s=1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
}

#[test]
fn explicit_output_files_replace_only_what_stampede_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("lat.csv");
    std::fs::write(&data, "latency_s\n0.1\n0.2\n0.35\n0.5\n0.8\n").unwrap();
    let important = dir.path().join("important.txt");
    std::fs::write(&important, "my notes").unwrap();
    let fit = |out: &Path, extra: &[&str]| {
        stampede(&[&["fit", data.to_str().unwrap(), "--out", out.to_str().unwrap()][..], extra].concat())
    };
    // fit --out onto a user's file: refused before any work, the file untouched.
    let output = fit(&important, &[]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert!(stderr(&output).contains("the file exists and stampede did not write it"), "{}", stderr(&output));
    assert_eq!(std::fs::read_to_string(&important).unwrap(), "my notes");
    // A page stampede wrote is replaced; --force replaces anything.
    let page = dir.path().join("page.html");
    assert!(fit(&page, &[]).status.success());
    let output = fit(&page, &[]);
    assert!(output.status.success(), "its own page is replaced: {}", stderr(&output));
    assert!(fit(&important, &["--force"]).status.success());
    assert!(std::fs::read_to_string(&important).unwrap().contains("stampede fit"));
    // No new tree outside the current folder; one new folder inside an existing one is fine.
    let output = fit(Path::new("/nonexistent-stampede-test/dir/x.html"), &[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("folder /nonexistent-stampede-test does not exist"), "{}", stderr(&output));
    assert!(!Path::new("/nonexistent-stampede-test").exists());
    assert!(fit(&dir.path().join("new/x.html"), &[]).status.success());
    assert!(fit(&dir.path().join("a/b/x.html"), &[]).status.code() == Some(2));

    // compare --html and verify --junit likewise.
    std::fs::write(&important, "my notes again").unwrap();
    let (a, b) = (dir.path().join("a-run"), dir.path().join("b-run"));
    mmc(&a, "4");
    mmc(&b, "4");
    let output = stampede(&[
        "compare",
        a.join("mmc").to_str().unwrap(),
        b.join("mmc").to_str().unwrap(),
        "--html",
        important.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert_eq!(std::fs::read_to_string(&important).unwrap(), "my notes again");
    let notes = dir.path().join("notes.xml");
    std::fs::write(&notes, "<notes/>").unwrap();
    let output = stampede(&[
        "verify",
        "mg1",
        "--replicas",
        "3",
        "--quiet",
        "--no-report",
        "--out",
        dir.path().join("v").to_str().unwrap(),
        "--junit",
        notes.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert!(stderr(&output).contains("--junit"), "{}", stderr(&output));
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "<notes/>");
    assert!(!dir.path().join("v").exists(), "refused before the run");
}

#[test]
fn fifos_and_devices_named_as_inputs_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe.csv");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().map(|s| s.success()).unwrap_or(false);
    assert!(made, "mkfifo is part of coreutils");
    for input in [fifo.to_str().unwrap(), "/dev/zero", dir.path().to_str().unwrap()] {
        let started = Instant::now();
        let output = stampede(&["fit", input, "--out", dir.path().join("f.html").to_str().unwrap()]);
        assert_eq!(output.status.code(), Some(2), "{input}: {}", stdout(&output));
        assert!(stderr(&output).contains("an input must be a regular file"), "{}", stderr(&output));
        let scenario = dir.path().join("s.toml");
        std::fs::write(
            &scenario,
            format!(
                "name = \"x\"\nmodel = \"mg1\"\n[run]\nhorizon_s = 100.0\nreplicas = 2\nseed = 1\n[queue]\n\
                 arrival_rate_per_s = 1.0\nservice = {{ dist = \"empirical\", file = {input:?} }}\n"
            ),
        )
        .unwrap();
        let output = stampede(&["run", scenario.to_str().unwrap(), "--out", dir.path().join("o").to_str().unwrap()]);
        assert_eq!(output.status.code(), Some(2), "{input}: {}", stdout(&output));
        assert!(stderr(&output).contains("an input must be a regular file"), "{}", stderr(&output));
        assert!(started.elapsed() < Duration::from_secs(20), "{input}: {:?}", started.elapsed());
    }
}

#[test]
fn fit_says_something_true_of_odd_data() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("f.html");
    let fit = |name: &str, text: &str, extra: &[&str]| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        stampede(&[&["fit", path.to_str().unwrap(), "--json", "--out", page.to_str().unwrap()][..], extra].concat())
    };
    // Constant data: the constant, which `run` takes (a lognormal's sigma = 0 it refuses).
    let output = fit("const.csv", "0.25\n0.25\n0.25\n0.25\n", &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let answer: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(answer["best"], "constant");
    assert_eq!(answer["best_toml"], "{ dist = \"constant\", value_s = 0.25 }");
    assert_eq!(answer["candidates"].as_array().unwrap().len(), 1);
    // Zeros: the constant 0, with a note.
    let output = fit("zeros.csv", "0\n0\n0\n", &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let answer: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(answer["best_toml"], "{ dist = \"constant\", value_s = 0.0 }");
    assert!(answer["notes"][0].as_str().unwrap().contains("every observation is 0 s"), "{answer}");
    // A +Inf-only histogram has nowhere to put its observations.
    let output =
        fit("inf.txt", "rpc_seconds_bucket{le=\"+Inf\"} 10\nrpc_seconds_count 10\n", &["--metric", "rpc_seconds"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("no finite bucket"), "{}", stderr(&output));
    // A byte-order mark (spreadsheets write one) is not a header: every value counts.
    let output = fit("bom.csv", "\u{feff}0.1\n0.2\n0.3\n", &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let answer: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(answer["count"], 3.0, "{answer}");
}
