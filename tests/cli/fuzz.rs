//! The command line's inputs, fuzzed: every built-in scenario, mutated at random
//! (a field deleted, or replaced by a string, a boolean, a table, a huge, negative,
//! zero, tiny, NaN or infinite number, or a 20,000-character string), through `show`
//! and then `run` at two replicas. The only allowed outcomes are exit 0, or exit 2 with
//! a message and no output written — never a panic (101), an I/O error (3), a hang
//! (30 s) or a half-written folder. Cases come from a fixed sequence, so a failure
//! repeats; `STAMPEDE_FUZZ_CASES=2000` runs more (the default runs in well under a minute).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{files_below, stampede, stdout};

/// A path into a TOML document: table keys and array indexes.
#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Index(usize),
}

fn paths(value: &toml::Value, prefix: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    match value {
        toml::Value::Table(table) => {
            for (key, inner) in table {
                prefix.push(Step::Key(key.clone()));
                out.push(prefix.clone());
                paths(inner, prefix, out);
                prefix.pop();
            }
        }
        toml::Value::Array(items) => {
            for (i, inner) in items.iter().enumerate() {
                prefix.push(Step::Index(i));
                out.push(prefix.clone());
                paths(inner, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

/// Replaces (or, with `None`, deletes) the value at `path`.
fn mutate(value: &mut toml::Value, path: &[Step], new: Option<toml::Value>) {
    let (last, parents) = path.split_last().expect("a non-empty path");
    let parent = parents.iter().fold(value, |v, step| match step {
        Step::Key(k) => v.get_mut(k.as_str()).unwrap(),
        Step::Index(i) => v.get_mut(*i).unwrap(),
    });
    match (last, parent, new) {
        (Step::Key(k), toml::Value::Table(t), Some(v)) => {
            t.insert(k.clone(), v);
        }
        (Step::Key(k), toml::Value::Table(t), None) => {
            t.remove(k);
        }
        (Step::Index(i), toml::Value::Array(a), Some(v)) => a[*i] = v,
        (Step::Index(i), toml::Value::Array(a), None) => {
            a.remove(*i);
        }
        _ => unreachable!("paths come from the document"),
    }
}

/// Runs `stampede args`, killed after `limit`: its exit code (None: it hung) and stderr.
fn run_bounded(args: &[&str], limit: Duration) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut text = String::new();
            use std::io::Read;
            let _ = child.stderr.take().unwrap().read_to_string(&mut text);
            return (status.code(), text);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return (None, String::new());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn mutated_scenarios_exit_0_or_2_with_a_message_and_nothing_written() {
    let cases: u64 = std::env::var("STAMPEDE_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(60);
    let list = stdout(&stampede(&["list"]));
    let names: Vec<&str> = list.lines().filter_map(|l| l.split_whitespace().next()).collect();
    let sources: Vec<toml::Value> =
        names.iter().map(|name| toml::Value::Table(stdout(&stampede(&["show", name])).parse().unwrap())).collect();
    let scratch = tempfile::tempdir().unwrap();
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = |n: usize| {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        ((state >> 33) % n as u64) as usize
    };
    let (mut ran, mut refused) = (0, 0);
    let mut failures = Vec::new();
    for case in 0..cases {
        let which = next(sources.len());
        let mut document = sources[which].clone();
        let mut all = Vec::new();
        paths(&document, &mut Vec::new(), &mut all);
        let path = all[next(all.len())].clone();
        let replacements: [Option<toml::Value>; 11] = [
            None,
            Some(toml::Value::String("x".into())),
            Some(toml::Value::Boolean(true)),
            Some(toml::Value::Float(1e308)),
            Some(toml::Value::Float(-5.0)),
            Some(toml::Value::Integer(0)),
            Some(toml::Value::Float(1e-300)),
            Some(toml::Value::Float(f64::NAN)),
            Some(toml::Value::Float(f64::INFINITY)),
            Some(toml::Value::String("y".repeat(20_000))),
            Some(toml::Value::Table("a = { b = { c = { d = 1 } } }".parse().unwrap())),
        ];
        let kind = next(replacements.len());
        mutate(&mut document, &path, replacements[kind].clone());
        let file = scratch.path().join(format!("case-{case}.toml"));
        std::fs::write(&file, toml::to_string(&document).unwrap()).unwrap();
        let out = scratch.path().join(format!("out-{case}"));
        let what = format!("case {case}: {} with {path:?} → mutation {kind}", names[which]);
        let file = file.to_str().unwrap();
        for args in [
            vec!["show", file],
            vec!["run", file, "--replicas", "2", "--quiet", "--no-report", "--out", out.to_str().unwrap()],
        ] {
            let (code, message) = run_bounded(&args, Duration::from_secs(30));
            match code {
                Some(0) => {
                    if args[0] == "run" {
                        ran += 1;
                    }
                    continue;
                }
                Some(2) => {
                    refused += 1;
                    if !message.starts_with("stampede: error: ") || message.len() < 30 {
                        failures.push(format!("{what}: {} exit 2 without a message: {message:?}", args[0]));
                    }
                    if args[0] == "run" && !files_below(Path::new(&out)).is_empty() {
                        failures.push(format!("{what}: run exit 2 wrote {:?}", files_below(&out)));
                    }
                }
                Some(other) => failures.push(format!("{what}: {} exit {other}: {}", args[0], tail(&message))),
                None => failures.push(format!("{what}: {} did not finish in 30 s", args[0])),
            }
            break;
        }
    }
    assert!(failures.is_empty(), "{} of {cases} cases failed:\n{}", failures.len(), failures.join("\n"));
    assert!(ran > 0 && refused > 0, "{ran} ran, {refused} refused: the mutations exercise both outcomes");
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(6)..].join("\n")
}
