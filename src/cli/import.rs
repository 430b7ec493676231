//! `stampede import FILE… --out SCENARIO.toml`: a graph scenario inferred from
//! distributed traces (the `stampede-import` crate), its self-time and network samples
//! in a folder beside it (`SCENARIO.data/`). Checked before anything is read, resolved
//! as `run` would resolve it before anything is written, written atomically.

use std::path::{Path, PathBuf};

use clap::Args;
use stampede_import::{Format, Input, Options};
use stampede_scenario::{Error, Overrides, Result, Scenario};

use super::output_file;

/// The file that marks a data folder as one `stampede import` wrote.
const DATA_MARK: &str = "IMPORTED_BY_STAMPEDE";

#[derive(Args)]
pub(super) struct ImportArgs {
    /// Trace files: OTLP JSON (a request per line, or one), Jaeger JSON, Zipkin v2 JSON,
    /// or Alibaba's MSCallGraph CSV.
    #[arg(required = true, value_name = "FILE")]
    pub(super) files: Vec<PathBuf>,
    /// The files' format (detected from each file's first bytes when not given).
    #[arg(long, value_name = "otlp-json|jaeger-json|zipkin-json|alibaba-csv")]
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
    /// The scenario's name (default: the file's stem).
    #[arg(long)]
    pub(super) name: Option<String>,
    /// Replace the scenario and its data folder even if stampede did not write them.
    #[arg(long)]
    pub(super) force: bool,
}

/// A duration as `60s`, `500ms`, `5m`, `1h` or plain seconds.
fn parse_duration(text: &str) -> Option<f64> {
    let text = text.trim();
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = text.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (text, 1.0)
    };
    number.trim().parse::<f64>().ok().map(|n| n * scale).filter(|s| s.is_finite() && *s > 0.0)
}

pub(super) fn import(args: ImportArgs) -> Result<()> {
    let format = args.format.as_deref().map(Format::parse).transpose()?;
    let bucket_s = parse_duration(&args.bucket).ok_or_else(|| {
        Error::bad_input(format!("--bucket {}: give a positive duration, e.g. 60s, 500ms or 5m", args.bucket))
    })?;
    if !(args.sample_rate > 0.0 && args.sample_rate <= 1.0) {
        return Err(Error::bad_input(format!(
            "--sample-rate {}: the share of requests the traces kept, above 0 and at most 1",
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
    if data_dir.exists() && !args.force && !data_dir.join(DATA_MARK).is_file() {
        return Err(Error::bad_input(format!(
            "--out {}: {} exists and stampede import did not write it; nothing was written",
            out.display(),
            data_dir.display()
        ))
        .with_hint("choose another --out, or pass --force to replace it"));
    }
    for file in &args.files {
        if !file.is_file() {
            return Err(Error::bad_input(format!("{}: no such file", file.display())));
        }
    }
    let input = Input { files: args.files.clone(), format, bucket_ns: (bucket_s * 1e9) as i64 };
    let shown: Vec<String> = args.files.iter().map(|f| f.display().to_string()).collect();
    let source = match format {
        Some(format) => format!("{} ({})", shown.join(", "), format.name()),
        None => shown.join(", "),
    };
    let name = stampede_import::write::clean(args.name.as_deref().unwrap_or(&stem));
    let options = Options { name, data_dir: data_name.clone(), sample_rate: args.sample_rate, source };
    let written = stampede_import::import(&input, &options)?;

    // Staged beside the result, resolved as `run` would, then moved into place.
    std::fs::create_dir_all(&folder).map_err(|e| Error::io(format!("cannot create {}: {e}", folder.display())))?;
    let staging = folder.join(format!(".{stem}.import-{}", std::process::id()));
    let result = stage(&staging, &data_name, &written, out, &data_dir, args.force);
    let _ = std::fs::remove_dir_all(&staging);
    result?;
    print!("{}", written.summary);
    println!("wrote {} and {}/ ({} sample files)", out.display(), data_dir.display(), written.files.len());
    println!(
        "next: set what the traces cannot tell (marked `# not in the traces`), then `stampede verify {}`",
        out.display()
    );
    Ok(())
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
    for (file, content) in &written.files {
        std::fs::write(staged_data.join(file), content).map_err(|e| io(&staged_data.join(file), e))?;
    }
    std::fs::write(staged_data.join(DATA_MARK), "written by stampede import\n").map_err(|e| io(&staged_data, e))?;
    let source = stampede_scenario::base::typing::parse_text(&written.toml, "the imported scenario")?;
    Scenario::resolve_in(source, &Overrides::default(), staging).map_err(|e| {
        Error::io(format!(
            "the imported scenario does not resolve (a bug in stampede import; nothing was written): {e}"
        ))
    })?;
    if data_dir.exists() {
        std::fs::remove_dir_all(data_dir).map_err(|e| io(data_dir, e))?;
    }
    std::fs::rename(&staged_data, data_dir).map_err(|e| io(data_dir, e))?;
    output_file::write(out, "--out", written.toml.as_bytes(), force)
}
