//! The README's examples work: its `stampede` commands run as written (through `sh`,
//! with `stampede` on PATH as `cargo install` puts it), every SQL block and every
//! Python block run in order on a fresh output folder — with the scenarios they read
//! run first at a few replicas — so an example cannot rot unnoticed.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use crate::common::{python_with_duckdb, skip, stderr};

/// The README's fenced blocks as (info string, text), in order.
fn blocks(readme: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in readme.lines() {
        match (&mut current, line.strip_prefix("```")) {
            (None, Some(info)) => current = Some((info.trim().to_string(), String::new())),
            (Some(_), Some(rest)) => {
                assert!(rest.trim().is_empty(), "a closing fence with text after it: {line:?}");
                found.push(current.take().unwrap());
            }
            (Some((_, text)), None) => {
                text.push_str(line);
                text.push('\n');
            }
            (None, None) => {}
        }
    }
    assert!(current.is_none(), "an unclosed code fence");
    found
}

/// Runs `stampede ARGS` in `dir` (a run with few replicas, quietly), asserting success.
fn stampede_in(dir: &Path, args: &[&str]) {
    let mut args: Vec<&str> = args.to_vec();
    if matches!(args.first(), Some(&"run") | Some(&"verify")) {
        if args.contains(&"--precision") {
            if !args.contains(&"--max-replicas") {
                args.extend_from_slice(&["--max-replicas", "100"]);
            }
        } else if !args.contains(&"--replicas") {
            args.extend_from_slice(&["--replicas", "20"]);
        }
        args.push("--quiet");
    }
    let output = Command::new(env!("CARGO_BIN_EXE_stampede")).args(&args).current_dir(dir).output().unwrap();
    assert!(output.status.success(), "README: stampede {args:?}: {}", stderr(&output));
}

/// A `bin/stampede` in `dir` that runs the binary under test, as `cargo install` would
/// put it on PATH: `run` and `verify` get `--replicas 20 --quiet` appended unless the
/// line gives them — with `--precision`, `--max-replicas 100` instead — and a
/// `--seeds N` above 5 runs 5 seeds (a smaller run, in the form written: `verify mg1
/// --seeds 200` alone was 27 s of this test). Returns the PATH to use.
fn install_wrapper(dir: &Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    // POSIX sh: `for a` walks the arguments as given while `set --` appends the
    // rewritten ones; `shift $n` then drops the originals.
    let seeds = "n=$#; previous=''\nfor a; do\n  if [ \"$previous\" = --seeds ] && [ \"$a\" -gt 5 ] 2>/dev/null; then a=5; fi\n  \
                 set -- \"$@\" \"$a\"; previous=$a\ndone\nshift $n\n";
    let script = format!(
        "#!/bin/sh\nreal='{}'\n{seeds}case \"$1\" in run|verify)\n  extra=''\n  case \" $* \" in *' --replicas '*) ;; \
         *' --max-replicas '*) ;; *' --precision '*) extra='--max-replicas 100' ;; *) extra='--replicas 20' ;; esac\n  case \" $* \" in *' --quiet '*) ;; *) extra=\"$extra --quiet\" ;; \
         esac\n  exec \"$real\" \"$@\" $extra ;;\nesac\nexec \"$real\" \"$@\"\n",
        env!("CARGO_BIN_EXE_stampede")
    );
    let path = bin.join("stampede");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default())
}

/// Runs one README shell line as written, through `sh`, with `stampede` on PATH.
fn run_as_written(dir: &Path, path: &str, line: &str) {
    let output = Command::new("sh").args(["-c", line]).env("PATH", path).current_dir(dir).output().unwrap();
    assert!(
        output.status.success(),
        "README line failed as written:\n  {line}\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        stderr(&output)
    );
}

/// Runs the scenarios `text` reads from `out/NAME/` that have not run yet.
fn run_what_is_read(dir: &Path, text: &str, done: &mut BTreeSet<String>) {
    for part in text.split("out/").skip(1) {
        let name: String = part.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').collect();
        if !name.is_empty() && part[name.len()..].starts_with('/') && done.insert(name.clone()) {
            stampede_in(dir, &["run", &name, "--out", "out"]);
        }
    }
}

#[test]
fn every_readme_example_runs() {
    let python = match python_with_duckdb() {
        Ok(python) => python,
        Err(why) => return skip("README examples", &why),
    };
    let readme = crate::common::book();
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    // The README's worked examples read the shipped fixtures and docs/src/examples by their
    // path in the repository: the scratch folder holds them at the same place.
    for folder in ["scenario/fixtures", "docs/src/examples"] {
        let copy = dir.join(folder);
        std::fs::create_dir_all(&copy).unwrap();
        for entry in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(folder)).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, copy.join(path.file_name().unwrap())).unwrap();
        }
    }
    let mut done = BTreeSet::new();
    let path = install_wrapper(dir);
    let (mut commands, mut queries, mut scripts) = (0, 0, 0);
    let mut first_command = None;
    for (info, text) in blocks(&readme) {
        match info.as_str() {
            "sh" => {
                for line in text.lines().map(str::trim) {
                    let Some(rest) = line.strip_prefix("stampede ") else {
                        // cargo install/test/bench, sbatch, time …: documented, not run here.
                        continue;
                    };
                    first_command.get_or_insert_with(|| line.to_string());
                    let args: Vec<&str> = rest.split(" #").next().unwrap().split_whitespace().collect();
                    if args.first() == Some(&"serve") {
                        continue; // a server runs until stopped; tests/cli/ring.rs drives it
                    }
                    run_as_written(dir, &path, line);
                    if args.first() == Some(&"run") || args.first() == Some(&"verify") {
                        let name = args.get(1).filter(|a| !a.starts_with('-')).copied().unwrap_or("baltor");
                        done.insert(name.to_string());
                    }
                    commands += 1;
                }
            }
            "sql" => {
                run_what_is_read(dir, &text, &mut done);
                let without_comments: String =
                    text.lines().filter(|l| !l.trim_start().starts_with("--")).collect::<Vec<_>>().join("\n");
                for statement in without_comments.split(';').map(str::trim).filter(|s| !s.is_empty()) {
                    let script = "import sys, duckdb\nprint(duckdb.sql(sys.argv[1]).fetchall()[:3])";
                    let output =
                        Command::new(&python).args(["-c", script, statement]).current_dir(dir).output().unwrap();
                    assert!(output.status.success(), "README SQL failed:\n{statement}\n{}", stderr(&output));
                    queries += 1;
                }
            }
            "python" => {
                run_what_is_read(dir, &text, &mut done);
                let output = Command::new(&python).args(["-c", &text]).current_dir(dir).output().unwrap();
                assert!(output.status.success(), "README Python failed:\n{text}\n{}", stderr(&output));
                scripts += 1;
            }
            _ => {}
        }
    }
    assert!(commands >= 1 && queries >= 7 && scripts >= 1, "{commands} commands, {queries} queries, {scripts} scripts");
    // The README starts from zero: installing puts `stampede` on PATH before the first command uses it.
    let install = readme.find("cargo install --path .").expect("the README says how to install stampede");
    let first = readme.find(first_command.as_deref().unwrap()).unwrap();
    assert!(install < first, "`cargo install --path .` comes before the first `stampede` command");
}

/// The graph model's complete example in the README is the file the tests run.
#[test]
fn the_readme_graph_example_is_the_shipped_file() {
    let readme = crate::common::book();
    let file =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/scenario/fixtures/checkout-graph.toml")).unwrap();
    let shown = blocks(&readme)
        .into_iter()
        .find(|(info, text)| {
            info == "toml" && text.contains("model = \"graph\"") && text.starts_with("name = \"checkout\"")
        })
        .expect("the README shows the graph example");
    assert_eq!(shown.1, file, "README's graph example and scenario/fixtures/checkout-graph.toml differ");
}

/// The README's output table and report section name exactly the models that write
/// time series (issue 44, item 15: the graph's were left out): every built-in's model
/// with series is named on the `timeseries.parquet` row and in "Over time", and a model
/// named there has series.
#[test]
fn the_readme_names_the_models_that_write_time_series() {
    use stampede_scenario::scenario::builtin::{load_scenario_source, BUILTINS};
    use stampede_scenario::{Overrides, Scenario};
    let readme = crate::common::book();
    let row = readme.lines().find(|l| l.starts_with("| `timeseries.parquet` |")).expect("the output table's row");
    let row_models = row.split('|').nth(2).unwrap().to_string();
    let over_time =
        readme.lines().find(|l| l.starts_with("- **Over time**")).expect("the report's section").to_string();
    let mut models: std::collections::BTreeMap<&str, bool> = Default::default();
    for (name, _) in BUILTINS {
        let scenario = Scenario::resolve(load_scenario_source(name).unwrap(), &Overrides::default()).unwrap();
        *models.entry(scenario.model.name()).or_default() |= !scenario.schema.series.is_empty();
    }
    for (model, has_series) in models {
        for (place, text) in [("the timeseries.parquet row", &row_models), ("Over time", &over_time)] {
            assert_eq!(text.contains(model), has_series, "{model} (series: {has_series}) in {place}: {text}");
        }
    }
}

/// The book is whole: `docs/src/SUMMARY.md` links every page under `docs/src` once
/// (so the README tests, which read the pages it links, read every page), and every
/// relative link in the README, the book, CONTRIBUTING.md and ARCHITECTURE.md names a
/// file that exists — the same on a code host and in `mdbook build docs`.
#[test]
fn the_book_links_every_page_once_and_every_link_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let pages = crate::common::book_pages();
    let linked: BTreeSet<&String> = pages.iter().collect();
    assert_eq!(linked.len(), pages.len(), "SUMMARY.md links a page twice: {pages:?}");
    fn markdown(dir: &Path, under: &Path, found: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                markdown(&path, under, found);
            } else if path.extension().is_some_and(|e| e == "md") {
                found.insert(path.strip_prefix(under).unwrap().to_string_lossy().to_string());
            }
        }
    }
    let src = root.join("docs/src");
    let mut on_disk = BTreeSet::new();
    markdown(&src, &src, &mut on_disk);
    on_disk.remove("SUMMARY.md");
    let linked: BTreeSet<String> = pages.iter().cloned().collect();
    assert_eq!(on_disk, linked, "pages under docs/src and the pages SUMMARY.md links differ");

    let mut files: Vec<std::path::PathBuf> =
        ["README.md", "CONTRIBUTING.md", "ARCHITECTURE.md", "CHANGELOG.md"].iter().map(|f| root.join(f)).collect();
    files.extend(pages.iter().map(|page| src.join(page)));
    files.push(src.join("SUMMARY.md"));
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for (at, _) in text.match_indices("](") {
            let target: String = text[at + 2..].chars().take_while(|c| *c != ')' && !c.is_whitespace()).collect();
            let path = target.split('#').next().unwrap_or_default();
            if path.is_empty() || path.contains("://") || path.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            if !file.parent().unwrap().join(path).exists() {
                broken.push(format!("{}: {target}", file.strip_prefix(root).unwrap().display()));
            }
        }
    }
    assert!(checked > 20, "the links were read: {checked}");
    assert!(broken.is_empty(), "links to files that do not exist:\n{}", broken.join("\n"));
}
