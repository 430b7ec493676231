//! What a production service pulls in by adding the middleware: with default features
//! the crate depends on the policy code (`stampede-policy` and the kernel's clock and
//! random streams: no model), tower's traits, tokio's timer and `http` — at most 40
//! crates; the `tracing` feature adds three; the `scenario` feature (the
//! simulator's parser, with its Parquet writer and thread pool) is opt-in.

use std::collections::BTreeSet;
use std::process::Command;

/// The crates `cargo tree` lists for `features` (normal dependencies, each once).
fn crates(features: &[&str]) -> BTreeSet<String> {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let mut args = vec!["tree", "--manifest-path", manifest, "-p", "stampede-tower", "-e", "normal"];
    args.extend(["--prefix", "none", "--offline"]);
    args.extend(features);
    let output = Command::new(env!("CARGO")).args(&args).output().expect("cargo runs");
    assert!(output.status.success(), "cargo tree: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(str::to_string))
        .collect()
}

#[test]
fn default_features_stay_within_forty_crates_and_scenario_is_opt_in() {
    let default = crates(&[]);
    assert!(default.len() <= 40, "{} crates by default: {default:?}", default.len());
    assert!(default.contains("stampede-policy"), "the policies come from stampede-policy: {default:?}");
    for heavy in ["parquet", "arrow-array", "zstd", "rayon", "statrs", "stampede-scenario", "stampede-engine"] {
        assert!(!default.contains(heavy), "{heavy} is a default dependency");
    }
    assert!(!default.contains("tracing"), "tracing is opt-in");
    // The `tracing` feature adds tracing, tracing-core and once_cell, nothing that pulls more.
    let with_tracing = crates(&["--features", "tracing"]);
    let added: Vec<&String> = with_tracing.difference(&default).collect();
    assert!(added.len() <= 3 && with_tracing.contains("tracing"), "the tracing feature adds {added:?}");
    let with_scenario = crates(&["--features", "scenario"]);
    assert!(with_scenario.contains("stampede-scenario") && with_scenario.contains("parquet"));
    assert!(with_scenario.contains("stampede-engine"), "from_scenario reads the models' parameters");
}
