//! The figures the README and the scenarios' claim notes quote are the figures a run
//! gives: every entry of `docs/figures.toml` is filled from a run of its scenario (at
//! the scenario's own replicas and seed, the run the text describes) and must appear
//! in its file word for word; the README's example table is the table `stampede run`
//! prints. `STAMPEDE_UPDATE_FIGURES=1` writes the measured figures into the files.

use std::collections::BTreeMap;
use std::path::Path;

use stampede_output::Table;

use crate::common::{stderr, stdout};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn updating() -> bool {
    std::env::var_os("STAMPEDE_UPDATE_FIGURES").is_some_and(|v| !v.is_empty() && v != "0")
}

/// Both tests here rewrite README.md when updating: each reads it, runs scenarios for
/// a while and writes it back, so run in parallel one clobbered the other's update.
/// While updating they take turns.
static REWRITING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn take_turns() -> Option<std::sync::MutexGuard<'static, ()>> {
    updating().then(|| REWRITING.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
}

/// A scenario run at its own replicas and seed: its tables, and what it printed.
struct Run {
    summary: Table,
    replicas: Table,
    stdout: String,
}

/// `stampede run SCENARIO` (its own replicas and seed) into `out`, its tables read back.
/// A scenario ending in `.toml` is a file in the repository, named by its file stem.
fn run(scenario: &str, out: &Path) -> Run {
    let (argument, name) = match scenario.strip_suffix(".toml") {
        Some(stem) => (
            Path::new(env!("CARGO_MANIFEST_DIR")).join(scenario).display().to_string(),
            Path::new(stem).file_name().unwrap().to_string_lossy().to_string(),
        ),
        None => (scenario.to_string(), scenario.to_string()),
    };
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["run", &argument, "--no-report", "--force", "--out", out.to_str().unwrap()])
        .env("COLUMNS", "100")
        .output()
        .unwrap();
    assert!(output.status.success(), "{scenario}: {}", stderr(&output));
    let dir = out.join(name);
    Run {
        summary: Table::read(&dir.join("summary.parquet")).unwrap(),
        replicas: Table::read(&dir.join("replicas.parquet")).unwrap(),
        stdout: stdout(&output).replace(&format!("wrote {}/", out.display()), "wrote out/"),
    }
}

/// `scenario`'s run, made once for every test here that reads it (the showcase,
/// `baltor`, is read by both: 17 s of CPU in a test build). The tables and what it
/// printed are kept; its folder is not.
fn shared_run(scenario: &str) -> std::sync::Arc<Run> {
    static RUNS: std::sync::Mutex<BTreeMap<String, std::sync::Arc<Run>>> = std::sync::Mutex::new(BTreeMap::new());
    let mut runs = RUNS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let made = runs
        .entry(scenario.to_string())
        .or_insert_with(|| std::sync::Arc::new(run(scenario, tempfile::tempdir().unwrap().path())));
    std::sync::Arc::clone(made)
}

impl Run {
    /// A figure's value: the mean of `metric` at `point`, or a statistic across its replicas
    /// (`p95` by nearest rank as `verify` computes it, `max`, or `fraction_at_most` `bound`).
    fn value(&self, point: usize, metric: &str, statistic: &str, bound: Option<f64>) -> f64 {
        if statistic == "mean" {
            let points = self.summary.numbers("grid_point").unwrap();
            let row = points.iter().position(|p| *p as usize == point).expect("the grid point");
            return self.summary.numbers(&format!("{metric}_mean")).unwrap_or_else(|_| panic!("no metric {metric}"))
                [row];
        }
        let points = self.replicas.numbers("grid_point").unwrap();
        let all = self.replicas.numbers(metric).unwrap_or_else(|_| panic!("no metric {metric}"));
        let values: Vec<f64> = points.iter().zip(all).filter(|(p, _)| **p as usize == point).map(|(_, v)| v).collect();
        match statistic {
            "p95" => stampede_run::verify::replica_quantile(&values, 0.95),
            "max" => values.iter().copied().filter(|v| v.is_finite()).fold(f64::NEG_INFINITY, f64::max),
            "fraction_at_most" => {
                let bound = bound.expect("fraction_at_most needs a bound");
                values.iter().filter(|v| **v <= bound).count() as f64 / values.len() as f64
            }
            other => panic!("unknown statistic {other}"),
        }
    }
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
            let mut number = text[at..].chars().take_while(|c| c.is_ascii_digit() || ".,-".contains(*c)).count();
            // A comma or full stop after a number is punctuation, not part of it.
            while number > 0 && text[at..at + number].ends_with([',', '.']) {
                number -= 1;
            }
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

/// `1021` → `1,021` (the integer part's thousands).
fn group_thousands(text: &str) -> String {
    let (whole, rest) = text.split_at(text.find('.').unwrap_or(text.len()));
    let digits: Vec<char> = whole.chars().collect();
    let mut out = String::new();
    for (i, c) in digits.iter().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) && c.is_ascii_digit() && digits[i - 1].is_ascii_digit() {
            out.push(',');
        }
        out.push(*c);
    }
    out + rest
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
    let _turn = take_turns();
    let figures: toml::Table = std::fs::read_to_string(format!("{ROOT}/docs/figures.toml")).unwrap().parse().unwrap();
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    let mut wrong = Vec::new();
    let entries = figures["figure"].as_array().unwrap();
    for figure in entries {
        let scenario = figure["scenario"].as_str().unwrap();
        let file = figure["file"].as_str().unwrap();
        let template = figure["text"].as_str().unwrap();
        let run = shared_run(scenario);
        let number = |v: &toml::Value| v.as_float().or_else(|| v.as_integer().map(|i| i as f64));
        let values: Vec<String> = figure["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|value| {
                let point = value["point"].as_integer().unwrap() as usize;
                let metric = value["metric"].as_str().unwrap();
                let statistic = value.get("statistic").and_then(toml::Value::as_str).unwrap_or("mean");
                let bound = value.get("bound").and_then(number);
                let scale = value.get("scale").and_then(number).unwrap_or(1.0);
                let digits = value.get("digits").and_then(toml::Value::as_integer).unwrap_or(2) as usize;
                let mut measured = run.value(point, metric, statistic, bound);
                // A ratio of two means: `divide_by` names the other metric, `divide_point` its point.
                if let Some(other) = value.get("divide_by").and_then(toml::Value::as_str) {
                    let at = value.get("divide_point").and_then(toml::Value::as_integer).map_or(point, |p| p as usize);
                    measured /= run.value(at, other, "mean", None);
                }
                assert!(measured.is_finite(), "{scenario}: {metric} at grid point {point} is {measured}");
                let text = format!("{:.digits$}", measured * scale);
                if value.get("grouped").and_then(toml::Value::as_bool) == Some(true) {
                    group_thousands(&text)
                } else {
                    text
                }
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
    let _turn = take_turns();
    let showcase = shared_run("baltor");
    let printed = &showcase.stdout;
    let readme_path = format!("{ROOT}/README.md");
    let readme = std::fs::read_to_string(&readme_path).unwrap();
    let start = readme.find("```\nbaltor · 3 grid point(s)").expect("the example table") + 4;
    let end = start + readme[start..].find("```").unwrap();
    let comparable = |text: &str| -> Vec<String> {
        text.lines()
            .skip(1) // the title line ends with the wall-clock time
            .filter(|l| !l.starts_with("ns per event") && !l.starts_with("report: "))
            .map(str::to_string)
            .collect()
    };
    let shown = comparable(&readme[start..end]);
    let measured = comparable(printed);
    if shown != measured && updating() {
        let title = readme[start..end].lines().next().unwrap();
        let mut block: Vec<String> = vec![title.to_string()];
        block.extend(printed.lines().skip(1).filter(|l| !l.starts_with("ns per event")).map(str::to_string));
        block.extend(readme[start..end].lines().filter(|l| l.starts_with("report: ")).map(str::to_string));
        let updated = format!("{}{}\n{}", &readme[..start], block.join("\n"), &readme[end..]);
        std::fs::write(&readme_path, updated).unwrap();
        return;
    }
    assert_eq!(
        shown, measured,
        "the README's example table differs from the run (STAMPEDE_UPDATE_FIGURES=1 rewrites it)"
    );
}
