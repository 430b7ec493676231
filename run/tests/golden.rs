//! Golden checksums: every built-in scenario, run small (3 replicas, its own horizon
//! and grid), must write byte-identical output tables. A refactoring that changes a
//! single random draw, a fold order or a column fails here.
//!
//! The expected SHA-256s are in `tests/golden/checksums.txt`. When a change of
//! results is intended, regenerate them with
//! `STAMPEDE_BLESS=1 cargo test -p stampede-run --test golden` and say why
//! in the commit message.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use sha2::{Digest, Sha256};
use stampede_run::pipeline::execute;
use stampede_scenario::scenario::builtin::{load_scenario_source, BUILTINS};
use stampede_scenario::{Overrides, Scenario};

const REPLICAS: i64 = 3;
/// The tables whose bytes must not change (the manifest carries the wall time).
const TABLES: &[&str] =
    &["summary.parquet", "replicas.parquet", "histograms.parquet", "timeseries.parquet", "hops.parquet"];

fn checksums(out: &Path) -> String {
    let mut lines = String::new();
    for (name, _) in BUILTINS {
        let overrides = Overrides {
            sets: vec![("run.replicas".into(), toml::Value::Integer(REPLICAS))],
            grids: vec![],
            cases: vec![],
        };
        let scenario = Scenario::resolve(load_scenario_source(name).unwrap(), &overrides).unwrap();
        execute(&scenario, out, 2, &|| {}).unwrap();
        for table in TABLES {
            let path = out.join(&scenario.name).join(table);
            if let Ok(bytes) = std::fs::read(&path) {
                let digest = Sha256::digest(without_version(&bytes));
                let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
                writeln!(lines, "{name} {table} {hex}").unwrap();
            }
        }
    }
    lines
}

/// The file with the writer's name (`stampede X.Y.Z`, in Parquet's `created_by`)
/// replaced by a placeholder, so that a version bump alone does not change a checksum.
fn without_version(bytes: &[u8]) -> Vec<u8> {
    let needle = format!("stampede {}", env!("CARGO_PKG_VERSION")).into_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(&needle) {
            out.extend_from_slice(b"stampede VERSION");
            i += needle.len();
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

#[test]
fn every_builtin_writes_its_golden_bytes() {
    let out = tempfile::tempdir().unwrap();
    let actual = checksums(out.path());
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/checksums.txt");
    if std::env::var_os("STAMPEDE_BLESS").is_some() {
        std::fs::write(&golden, &actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&golden).expect("tests/golden/checksums.txt exists (bless it first)");
    let keyed = |text: &str| -> BTreeMap<String, String> {
        text.lines().filter_map(|l| l.rsplit_once(' ')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    let (expected, actual) = (keyed(&expected), keyed(&actual));
    let mut problems = Vec::new();
    for (key, hash) in &expected {
        match actual.get(key) {
            None => problems.push(format!("  {key}: no longer written")),
            Some(other) if other != hash => problems.push(format!("  {key}: {hash} → {other}")),
            Some(_) => {}
        }
    }
    problems.extend(
        actual.keys().filter(|k| !expected.contains_key(*k)).map(|k| format!("  {k}: new, not in the golden file")),
    );
    assert!(
        problems.is_empty(),
        "output bytes changed:\n{}\nIf the change is intended, rerun with STAMPEDE_BLESS=1 and say why in the commit.",
        problems.join("\n")
    );
}
