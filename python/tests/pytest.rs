//! The Python package's tests (`python/tests/*.py` and the docstrings' examples), run
//! by `cargo test` with pytest: the package folder is assembled in a temporary folder
//! from `python/stampede/` and the native library cargo just built, so the tests
//! exercise this checkout's code without installing anything. They compare with the
//! `stampede` binary of the same build (`cargo test --workspace` builds both; with
//! `cargo test -p stampede-python` alone, run `cargo build --bin stampede` first).
//!
//! Needs python3 with pyarrow, pandas, duckdb, pytest, matplotlib and tqdm; skipped with
//! what to install when one is missing, and failed instead in CI
//! (`STAMPEDE_REQUIRE_PYTHON=1`).

use std::path::{Path, PathBuf};
use std::process::Command;

const MODULES: &[&str] = &["pyarrow", "pandas", "duckdb", "pytest", "matplotlib", "tqdm"];
const INSTALL: &str = "python3 -m pip install pyarrow pandas duckdb pytest matplotlib tqdm";

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Skips (printing why) or, when CI requires Python, fails.
fn missing(why: &str) {
    if std::env::var_os("STAMPEDE_REQUIRE_PYTHON").is_some_and(|v| v == "1") {
        panic!("{why}");
    }
    eprintln!("SKIPPED the Python package's tests: {why}");
}

/// `target/<profile>/`: this test runs from its `deps/` folder.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    exe.parent().and_then(Path::parent).expect("target/<profile>/deps/<test>").to_path_buf()
}

#[test]
fn the_python_packages_tests_pass() {
    let probe = format!("import {}", MODULES.join(", "));
    match Command::new(python()).args(["-c", &probe]).output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => {
            return missing(&format!(
                "python3 lacks a module it needs ({}): {INSTALL}",
                String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("").trim()
            ))
        }
        Err(error) => return missing(&format!("no python3 ({error}): install Python 3.9 or later, then {INSTALL}")),
    }
    let profile = profile_dir();
    // The cdylib beside this test (an integration test's build builds its package's library).
    let library =
        profile.join("deps").join(format!("{}_stampede{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX));
    assert!(library.exists(), "{} was not built", library.display());
    let binary = profile.join(format!("stampede{}", std::env::consts::EXE_SUFFIX));
    if !binary.exists() {
        return missing(&format!(
            "{} is not built (cargo test --workspace builds it; or cargo build --bin stampede)",
            binary.display()
        ));
    }

    let source = Path::new(env!("CARGO_MANIFEST_DIR"));
    let site = tempfile::tempdir().expect("a temporary folder");
    let package = site.path().join("stampede");
    std::fs::create_dir(&package).expect("the package folder");
    for entry in std::fs::read_dir(source.join("stampede")).expect("python/stampede") {
        let path = entry.expect("an entry").path();
        if path.is_file() {
            std::fs::copy(&path, package.join(path.file_name().expect("a name"))).expect("copied");
        }
    }
    // The name an abi3 extension module has on Linux and macOS.
    std::fs::copy(&library, package.join("_stampede.abi3.so")).expect("the native library copied");

    let status = Command::new(python())
        .args(["-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "--doctest-modules"])
        .arg(&package)
        .arg(source.join("tests"))
        // From the repository's root, as the docs' commands run: the doctests name
        // the shipped examples as `docs/src/examples/…` (the tests use tmp_path).
        .current_dir(source.parent().expect("python/ is in the repository"))
        .env("PYTHONPATH", site.path())
        .env("STAMPEDE_BIN", &binary)
        .env("MPLBACKEND", "Agg")
        .status()
        .expect("pytest runs");
    assert!(status.success(), "pytest failed (its report is above)");
}
