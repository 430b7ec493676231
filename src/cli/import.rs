//! `stampede import FILE… --out SCENARIO.toml`: a graph scenario inferred from
//! distributed traces (the `stampede-import` crate), its self-time and network samples
//! in a folder beside it (`SCENARIO.data/`). Checked before anything is read, resolved
//! as `run` would resolve it before anything is written, written atomically.

use std::path::{Path, PathBuf};

use clap::Args;
use stampede_import::{Format, Input, Options};
use stampede_scenario::base::numbers::duration_s;
use stampede_scenario::{Error, Overrides, Result, Scenario};

use super::{output_file, ExitStatus};

/// The file that marks a data folder as one `stampede import` wrote: its first line,
/// then `SHA256  NAME` for every file written beside it, so a re-run sees a sample file
/// the user changed, removed or added and refuses to replace the folder.
const DATA_MARK: &str = "IMPORTED_BY_STAMPEDE";
const DATA_MARK_HEAD: &str = "written by stampede import";

/// What a re-run of `import` finds in the data folder it would replace.
fn data_folder_changes(dir: &Path) -> Option<Vec<String>> {
    let listing = std::fs::read_to_string(dir.join(DATA_MARK)).ok()?;
    let mut lines = listing.lines();
    if lines.next() != Some(DATA_MARK_HEAD) {
        return None;
    }
    let recorded: std::collections::BTreeMap<&str, &str> =
        lines.filter_map(|line| line.split_once("  ").map(|(hash, name)| (name, hash))).collect();
    let mut changes = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => return Some(vec![format!("the folder cannot be listed ({e})")]),
    };
    let mut seen = std::collections::BTreeSet::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == DATA_MARK {
            continue;
        }
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        match recorded.get(name.as_str()) {
            Some(hash) if is_file => {
                seen.insert(name.clone());
                let same = std::fs::read(entry.path())
                    .is_ok_and(|bytes| stampede_scenario::inputs::sealed::sha256_hex(&bytes) == *hash);
                if !same {
                    changes.push(format!("{name} (changed)"));
                }
            }
            _ => changes.push(format!("{name} (not written by stampede import)")),
        }
    }
    changes.extend(recorded.keys().filter(|name| !seen.contains(**name)).map(|name| format!("{name} (removed)")));
    Some(changes)
}

/// The smallest `--sample-rate`: below one kept in a million, the rates it scales to
/// say more about the guess than the traces.
const MIN_SAMPLE_RATE: f64 = 1e-6;

#[derive(Args)]
pub(super) struct ImportArgs {
    /// Trace files: OTLP JSON (a request per line, or documents, pretty or not), OTLP
    /// protobuf (.pb), Jaeger JSON, Zipkin v2 JSON, or Alibaba's MSCallGraph CSV.
    #[arg(required = true, value_name = "FILE")]
    pub(super) files: Vec<PathBuf>,
    /// The files' format (detected from each file's first bytes when not given).
    #[arg(long, value_name = "otlp-json|otlp-proto|jaeger-json|zipkin-json|alibaba-csv")]
    pub(super) format: Option<String>,
    /// The scenario to write; its samples go in a folder beside it (SCENARIO.data/).
    #[arg(long, value_name = "SCENARIO.toml")]
    pub(super) out: PathBuf,
    /// The width of a load bucket: an entry whose arrivals vary from bucket to bucket
    /// gets a `load` schedule (e.g. 60s, 500ms, 5m).
    #[arg(long, value_name = "DURATION", default_value = "60s")]
    pub(super) bucket: String,
    /// The share of requests the traces kept (head sampling, 0 < r ≤ 1): rates are
    /// divided by it. Self times and call plans need no scaling.
    #[arg(long, value_name = "R", default_value_t = 1.0)]
    pub(super) sample_rate: f64,
    /// The time the traces were collected over (e.g. 1h, 15m): each entry's rate is its
    /// arrivals over it. Default: the time the spans cover, first start to last end.
    #[arg(long, value_name = "DURATION")]
    pub(super) window: Option<String>,
    /// Clock skew allowed between hosts: a call that ends up to this long after its
    /// caller answered is one the caller waited for; one ending later (or a message)
    /// is fire-and-forget, written with wait = "none".
    #[arg(long, value_name = "DURATION", default_value = "5ms")]
    pub(super) skew: String,
    /// The scenario's name (default: the file's stem).
    #[arg(long)]
    pub(super) name: Option<String>,
    /// Then run the scenario written (`--check-replicas` replicas, defaults where the
    /// traces are silent) and print it beside the traces: each busy entry's p50 and
    /// p99, each busy service's calls per second; exit 1 when one is off.
    #[arg(long)]
    pub(super) check: bool,
    /// Replicas of the `--check` run.
    #[arg(long, value_name = "N", default_value_t = 10, requires = "check")]
    pub(super) check_replicas: u32,
    /// Replace the scenario and its data folder even if stampede did not write them.
    #[arg(long)]
    pub(super) force: bool,
    /// Print nothing but errors (and, with --check, its table).
    #[arg(long)]
    pub(super) quiet: bool,
}

pub(super) fn import(args: ImportArgs) -> Result<ExitStatus> {
    let format = args.format.as_deref().map(Format::parse).transpose()?;
    let bucket_s = duration_s(&args.bucket).ok_or_else(|| {
        Error::bad_input(format!("--bucket {}: give a positive duration, e.g. 60s, 500ms or 5m", args.bucket))
    })?;
    let window_s = args
        .window
        .as_deref()
        .map(|text| {
            duration_s(text).ok_or_else(|| {
                Error::bad_input(format!(
                    "--window {text}: give the positive duration the traces were collected over, e.g. 1h, 15m or 90s"
                ))
            })
        })
        .transpose()?;
    if !(MIN_SAMPLE_RATE..=1.0).contains(&args.sample_rate) {
        return Err(Error::bad_input(format!(
            "--sample-rate {}: the share of requests the traces kept, from {MIN_SAMPLE_RATE:e} (one in a million) to 1",
            args.sample_rate
        )));
    }
    let out = &args.out;
    if out.extension().and_then(|e| e.to_str()) != Some("toml") {
        return Err(Error::bad_input(format!("--out {}: a scenario file ends in .toml", out.display())));
    }
    output_file::check(out, "--out", args.force)?;
    let stem = out.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
    let folder = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
    let data_name = format!("{stem}.data");
    let data_dir = folder.join(&data_name);
    if !args.force {
        check_data_folder(out, &data_dir)?;
    }
    check_trace_files(&args.files)?;
    let skew_s = duration_s(&args.skew)
        .or((args.skew.trim() == "0").then_some(0.0))
        .ok_or_else(|| Error::bad_input(format!("--skew {}: give a duration, e.g. 5ms, 0.5s or 0", args.skew)))?;
    let input =
        Input { files: args.files.clone(), format, bucket_ns: (bucket_s * 1e9) as i64, skew_ns: (skew_s * 1e9) as i64 };
    let shown: Vec<String> = args.files.iter().map(|f| f.display().to_string()).collect();
    let source = match format {
        Some(format) => format!("{} ({})", shown.join(", "), format.name()),
        None => shown.join(", "),
    };
    let name = stampede_import::write::clean(args.name.as_deref().unwrap_or(&stem));
    let options = Options { name, data_dir: data_name.clone(), sample_rate: args.sample_rate, source, window_s };
    let written = stampede_import::import(&input, &options)?;

    // Staged beside the result, resolved as `run` would, then moved into place.
    std::fs::create_dir_all(&folder).map_err(|e| Error::io(format!("cannot create {}: {e}", folder.display())))?;
    let staging = folder.join(format!(".{stem}.import-{}", std::process::id()));
    let result = stage(&staging, &data_name, &written, out, &data_dir, args.force);
    let _ = std::fs::remove_dir_all(&staging);
    result?;
    if !args.quiet {
        print!("{}", written.summary);
        println!("wrote {} and {}/ ({} sample files)", out.display(), data_dir.display(), written.files.len());
    }
    if args.check {
        return check(out, args.check_replicas);
    }
    if !args.quiet {
        println!(
            "next: set what the traces cannot tell (marked `# not in the traces`), then `stampede verify {}`",
            out.display()
        );
    }
    Ok(ExitStatus::Success)
}

/// `import --check`: `stampede verify` of the scenario just written (this binary, a
/// temporary folder), its claims printed as a table of the traces beside the model.
fn check(scenario: &Path, replicas: u32) -> Result<ExitStatus> {
    let folder = std::env::temp_dir().join(format!("stampede-import-check-{}", std::process::id()));
    let result = check_in(scenario, replicas, &folder);
    let _ = std::fs::remove_dir_all(&folder);
    result
}

fn check_in(scenario: &Path, replicas: u32, folder: &Path) -> Result<ExitStatus> {
    let exe = std::env::current_exe().map_err(|e| Error::io(format!("--check: cannot find this program: {e}")))?;
    let output = std::process::Command::new(exe)
        .args(["verify", &scenario.display().to_string(), "--replicas", &replicas.to_string()])
        .args(["--no-report", "--quiet", "--json", "--out", &folder.display().to_string(), "--force"])
        .output()
        .map_err(|e| Error::io(format!("--check: cannot run verify: {e}")))?;
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).map_err(|_| {
        Error::bad_input(format!(
            "--check: the scenario written does not run as it is: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ))
        .with_hint(format!("set what the traces cannot tell, then `stampede verify {}`", scenario.display()))
    })?;
    let checks = json["checks"].as_array().cloned().unwrap_or_default();
    println!(
        "
check: the model ({replicas} replicas, defaults where the traces are silent) beside its traces"
    );
    let number = |v: &serde_json::Value| v.as_f64().map_or("-".to_string(), |x| format!("{x:.4}"));
    let mut rows = vec![["figure".to_string(), "traces".into(), "model [95%]".into(), "".into()]];
    for c in &checks {
        let figure = match (c["latency"].as_str(), c["metric"].as_str()) {
            (Some(latency), _) => {
                format!("{} p{}", latency.trim_end_matches(".latency_all_s"), c["quantile"].as_f64().unwrap_or(0.0))
            }
            (None, Some(metric)) => format!("{} calls/s", metric.split(".arrivals").next().unwrap_or(metric)),
            _ => continue,
        };
        let traces = c["note"].as_str().unwrap_or("").trim_start_matches("the traces: ").to_string();
        let model = format!("{} [{}, {}]", number(&c["value"]), number(&c["ci_lo"]), number(&c["ci_hi"]));
        let verdict = if c["passed"].as_bool() == Some(true) { "ok" } else { "OFF" };
        rows.push([figure, traces, model, verdict.to_string()]);
    }
    let widths: Vec<usize> = (0..4).map(|k| rows.iter().map(|r| r[k].chars().count()).max().unwrap_or(0)).collect();
    for row in &rows {
        println!(
            "  {:<w0$}  {:<w1$}  {:<w2$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        );
    }
    let failed = checks.iter().filter(|c| c["passed"].as_bool() != Some(true)).count();
    println!(
        "{} of {} figures within the traces' bounds; rerun with `stampede verify {}`",
        checks.len() - failed,
        checks.len(),
        scenario.display()
    );
    Ok(if failed > 0 { ExitStatus::VerificationFailed } else { ExitStatus::Success })
}

fn stage(
    staging: &Path,
    data_name: &str,
    written: &stampede_import::Written,
    out: &Path,
    data_dir: &Path,
    force: bool,
) -> Result<()> {
    let io = |what: &Path, e: std::io::Error| Error::io(format!("cannot write {}: {e}", what.display()));
    let staged_data = staging.join(data_name);
    std::fs::create_dir_all(&staged_data).map_err(|e| io(&staged_data, e))?;
    let mut listing = format!("{DATA_MARK_HEAD}\n");
    for (file, content) in &written.files {
        std::fs::write(staged_data.join(file), content).map_err(|e| io(&staged_data.join(file), e))?;
        let digest = stampede_scenario::inputs::sealed::sha256_hex(content.as_bytes());
        listing.push_str(&format!("{digest}  {file}\n"));
    }
    std::fs::write(staged_data.join(DATA_MARK), listing).map_err(|e| io(&staged_data, e))?;
    let source = stampede_scenario::base::typing::parse_text(&written.toml, "the imported scenario")?;
    Scenario::resolve_in(source, &Overrides::default(), staging).map_err(|e| {
        Error::io(format!(
            "the imported scenario does not resolve (a bug in stampede import; nothing was written): {e}"
        ))
    })?;
    output_file::check(out, "--out", force)?;
    if std::fs::symlink_metadata(data_dir).is_ok() {
        // Ours and unchanged (checked before anything was read), or --force: then
        // what is there is kept, never deleted.
        if data_folder_changes(data_dir).is_some_and(|changes| changes.is_empty()) {
            std::fs::remove_dir_all(data_dir).map_err(|e| io(data_dir, e))?;
        } else {
            let backup = output_file::backup_name(data_dir);
            std::fs::rename(data_dir, &backup).map_err(|e| io(data_dir, e))?;
            super::warning(&format!("--out: kept the folder it replaces as {}", backup.display()));
        }
    }
    std::fs::rename(&staged_data, data_dir).map_err(|e| io(data_dir, e))?;
    output_file::write(out, "--out", &output_file::sealed(written.toml.as_bytes()), force)
}

/// The data folder beside `--out` may be replaced only if `stampede import` wrote it
/// and nothing in it changed since (else `--force`, which keeps it as .bak).
fn check_data_folder(out: &Path, data_dir: &Path) -> Result<()> {
    if std::fs::symlink_metadata(data_dir).is_err() {
        return Ok(());
    }
    let hint = "choose another --out, or pass --force to replace it (the folder is kept as .bak)";
    match data_folder_changes(data_dir) {
        None => Err(Error::bad_input(format!(
            "--out {}: {} exists and stampede import did not write it; nothing was written",
            out.display(),
            data_dir.display()
        ))
        .with_hint(hint)),
        Some(changes) if !changes.is_empty() => {
            let shown: Vec<&str> = changes.iter().take(5).map(String::as_str).collect();
            let more = if changes.len() > 5 { format!(" and {} more", changes.len() - 5) } else { String::new() };
            Err(Error::bad_input(format!(
                "--out {}: {} changed since stampede import wrote it: {}{more}; nothing was written",
                out.display(),
                data_dir.display(),
                shown.join(", ")
            ))
            .with_hint(hint))
        }
        Some(_) => Ok(()),
    }
}

/// Every trace named is a regular file that exists and can be read.
fn check_trace_files(files: &[PathBuf]) -> Result<()> {
    for file in files {
        match std::fs::metadata(file) {
            Ok(metadata) if metadata.is_file() => {}
            Ok(metadata) if metadata.is_dir() => {
                return Err(Error::bad_input(format!("{}: is a folder; give trace files", file.display())));
            }
            Ok(_) => {
                return Err(Error::bad_input(format!(
                    "{}: is not a regular file (a pipe, socket or device); give a trace file",
                    file.display()
                )));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::unreadable(format!("{}: no such file", file.display())));
            }
            Err(e) => return Err(Error::unreadable(format!("{}: cannot be read: {e}", file.display()))),
        }
    }
    Ok(())
}
