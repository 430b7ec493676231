//! Helpers shared by the integration tests: run the `stampede` binary and inspect
//! what it wrote.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `stampede` with `args` and returns its output.
pub fn stampede(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stampede")).args(args).output().expect("the stampede binary runs")
}

/// Standard error as text.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Standard output as text.
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Every file below `dir`, relative, sorted.
pub fn files_below(dir: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, found: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, found);
            } else {
                found.push(path.strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    let mut found = Vec::new();
    walk(dir, dir, &mut found);
    found.sort();
    found
}

/// Python with duckdb, pyarrow and pandas, or why not. CI sets
/// `STAMPEDE_REQUIRE_PYTHON=1`, which turns a missing package into a failure.
pub fn python_with_duckdb() -> Result<String, String> {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let probe = std::process::Command::new(&python).args(["-c", "import duckdb, pyarrow, pandas"]).output();
    match probe {
        Ok(output) if output.status.success() => Ok(python),
        Ok(_) => Err(format!("{python} lacks duckdb, pyarrow or pandas: python3 -m pip install duckdb pyarrow pandas")),
        Err(e) => Err(format!("cannot start {python} ({e}): install Python 3 with duckdb, pyarrow and pandas")),
    }
}

/// Says loudly that a test was skipped and what to install — written to the
/// terminal directly, past the test harness's output capture, so a skip never reads
/// as a silent pass. Panics instead when `STAMPEDE_REQUIRE_PYTHON=1` (CI).
pub fn skip(test: &str, why: &str) {
    skip_unless_required(test, why, "STAMPEDE_REQUIRE_PYTHON");
}

/// [`skip`] for a test that needs a browser: panics when `STAMPEDE_REQUIRE_BROWSER=1` (CI).
pub fn skip_browser(test: &str, why: &str) {
    skip_unless_required(test, why, "STAMPEDE_REQUIRE_BROWSER");
}

fn skip_unless_required(test: &str, why: &str, variable: &str) {
    if std::env::var(variable).is_ok_and(|v| v == "1") {
        panic!("{test}: {why} ({variable}=1 makes this a failure)");
    }
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

/// Debian's Chromium (or `$CHROMIUM`), or why not.
pub fn chromium() -> Result<String, String> {
    let candidates = match std::env::var("CHROMIUM") {
        Ok(path) => vec![path],
        Err(_) => vec!["chromium".to_string(), "chromium-browser".to_string()],
    };
    for candidate in &candidates {
        if let Ok(output) = Command::new(candidate).arg("--version").output() {
            if output.status.success() {
                return Ok(candidate.clone());
            }
        }
    }
    Err(format!(
        "no headless browser ({} not found): install Debian's chromium package (apt-get install chromium) or set CHROMIUM",
        candidates.join(", ")
    ))
}
