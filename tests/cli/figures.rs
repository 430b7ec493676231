//! The figures the README and the scenarios' claim notes quote are the figures a run
//! gives: every entry of `docs/figures.toml` is filled from a run of its scenario (at
//! the scenario's own replicas and seed, the run the text describes) and must appear
//! in its file word for word; the README's example table is the table `stampede run`
//! prints. `STAMPEDE_UPDATE_FIGURES=1` writes the measured figures into the files.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::common::{stderr, stdout};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn updating() -> bool {
    std::env::var_os("STAMPEDE_UPDATE_FIGURES").is_some_and(|v| !v.is_empty() && v != "0")
}

/// `stampede run SCENARIO --json` (its own replicas and seed), parsed.
fn run_json(scenario: &str, out: &Path) -> Value {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["run", scenario, "--json", "--no-report", "--force", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(output.status.success(), "{scenario}: {}", stderr(&output));
    serde_json::from_str(&stdout(&output)).unwrap()
}

/// The byte range of the first place in `text` that reads `template` with a number
/// (digits, '.', ',', '-') at each `{}`.
fn find_filled(text: &str, template: &str) -> Option<(usize, usize)> {
    let parts: Vec<&str> = template.split("{}").collect();
    let mut from = 0;
    while let Some(offset) = text[from..].find(parts[0]) {
        let start = from + offset;
        let mut at = start + parts[0].len();
        let matched = parts[1..].iter().all(|literal| {
            let number = text[at..].chars().take_while(|c| c.is_ascii_digit() || ".,-".contains(*c)).count();
            if number == 0 || !text[at + number..].starts_with(literal) {
                return false;
            }
            at += number + literal.len();
            true
        });
        if matched {
            return Some((start, at));
        }
        from = start + 1;
    }
    None
}

/// Fills `template`'s `{}` in order.
fn fill(template: &str, values: &[String]) -> String {
    let mut parts = template.split("{}");
    let mut out = parts.next().unwrap().to_string();
    for (part, value) in parts.zip(values) {
        out.push_str(value);
        out.push_str(part);
    }
    out
}

#[test]
fn quoted_figures_are_what_the_runs_give() {
    let figures: toml::Table = std::fs::read_to_string(format!("{ROOT}/docs/figures.toml")).unwrap().parse().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let mut runs: BTreeMap<String, Value> = BTreeMap::new();
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    let mut wrong = Vec::new();
    let entries = figures["figure"].as_array().unwrap();
    for figure in entries {
        let scenario = figure["scenario"].as_str().unwrap();
        let file = figure["file"].as_str().unwrap();
        let template = figure["text"].as_str().unwrap();
        let run = runs.entry(scenario.to_string()).or_insert_with(|| run_json(scenario, scratch.path()));
        let values: Vec<String> = figure["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|value| {
                let point = value["point"].as_integer().unwrap() as usize;
                let metric = value["metric"].as_str().unwrap();
                let scale =
                    value.get("scale").map_or(1.0, |s| s.as_float().unwrap_or_else(|| s.as_integer().unwrap() as f64));
                let digits = value.get("digits").and_then(toml::Value::as_integer).unwrap_or(2) as usize;
                let mean = run["grid"][point]["metrics"][metric]["mean"]
                    .as_f64()
                    .unwrap_or_else(|| panic!("{scenario}: no metric {metric} at grid point {point}"));
                format!("{:.digits$}", mean * scale)
            })
            .collect();
        assert_eq!(values.len(), template.matches("{}").count(), "{template}: one value per {{}}");
        let expected = fill(template, &values);
        let text =
            files.entry(file.to_string()).or_insert_with(|| std::fs::read_to_string(format!("{ROOT}/{file}")).unwrap());
        if text.contains(&expected) {
            continue;
        }
        match find_filled(text, template) {
            Some((start, end)) => {
                wrong.push(format!("{file}: says\n    {}\n  the run gives\n    {expected}", &text[start..end]));
                text.replace_range(start..end, &expected);
            }
            None => wrong.push(format!("{file}: the text of this figure is gone: {template}")),
        }
    }
    assert!(entries.len() >= 8, "{} figures", entries.len());
    if updating() {
        for (file, text) in &files {
            std::fs::write(format!("{ROOT}/{file}"), text).unwrap();
        }
        return;
    }
    assert!(
        wrong.is_empty(),
        "{} figure(s) differ from the runs (STAMPEDE_UPDATE_FIGURES=1 writes the measured ones):\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// The README's example table is what `stampede run` prints for the showcase, but for
/// the wall-clock figures (the run time and the ns per event row).
#[test]
fn the_readmes_example_table_is_the_showcases_output() {
    let scratch = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["run", "--no-report", "--out", scratch.path().to_str().unwrap()])
        .env("COLUMNS", "100")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let printed = stdout(&output);
    let readme_path = format!("{ROOT}/README.md");
    let readme = std::fs::read_to_string(&readme_path).unwrap();
    let start = readme.find("```\nbaltor · 3 grid point(s)").expect("the example table") + 4;
    let end = start + readme[start..].find("```").unwrap();
    let comparable = |text: &str| -> Vec<String> {
        text.lines()
            .skip(1) // the title line ends with the wall-clock time
            .filter(|l| !l.starts_with("ns per event") && !l.starts_with("wrote ") && !l.starts_with("report: "))
            .map(str::to_string)
            .collect()
    };
    let shown = comparable(&readme[start..end]);
    let measured = comparable(&printed);
    if shown != measured && updating() {
        let title = readme[start..end].lines().next().unwrap();
        let mut block: Vec<String> = vec![title.to_string()];
        block.extend(printed.lines().skip(1).filter(|l| !l.starts_with("report: ")).map(|l| {
            // The output root is a scratch folder; the README's is the default.
            l.replace(&format!("wrote {}/", scratch.path().display()), "wrote out/")
        }));
        let updated = format!("{}{}\n{}", &readme[..start], block.join("\n"), &readme[end..]);
        std::fs::write(&readme_path, updated).unwrap();
        return;
    }
    assert_eq!(
        shown, measured,
        "the README's example table differs from the run (STAMPEDE_UPDATE_FIGURES=1 rewrites it)"
    );
}
