//! `stampede fit`: distributions fitted to measured latencies, and the page of CDFs.

use std::path::PathBuf;

use clap::Args;
use stampede_scenario::{Error, Result};

use super::output_file;

#[derive(Args)]
pub(super) struct FitArgs {
    /// The data: .csv or .parquet (a sample), .hdr/.hlog (an HdrHistogram), or a
    /// Prometheus exposition or API answer (with --metric).
    pub(super) file: String,
    /// The column of a Parquet file, or of a CSV with a header row.
    #[arg(long, value_name = "NAME")]
    pub(super) column: Option<String>,
    /// An HdrHistogram's unit: ns, us, ms or s.
    #[arg(long, value_name = "UNIT")]
    pub(super) unit: Option<String>,
    /// A Prometheus histogram's metric name (without _bucket).
    #[arg(long, value_name = "NAME")]
    pub(super) metric: Option<String>,
    /// A Prometheus label the series must have (repeatable): --label route=/checkout.
    #[arg(long = "label", value_name = "NAME=VALUE")]
    pub(super) labels: Vec<String>,
    /// Above a Prometheus histogram's last finite bucket: cap (default) or exponential.
    #[arg(long, value_name = "cap|exponential")]
    pub(super) tail: Option<String>,
    /// Print the result as one JSON document.
    #[arg(long)]
    pub(super) json: bool,
    /// Write the page of CDFs here (none unless asked).
    #[arg(long, value_name = "FILE")]
    pub(super) out: Option<PathBuf>,
    /// Replace the page even if the file there is not one stampede wrote.
    #[arg(long)]
    pub(super) force: bool,
}

/// `stampede fit FILE`: the data, each candidate, the best value and the page.
pub(super) fn fit(args: FitArgs) -> Result<()> {
    use stampede_scenario::inputs::DistributionSpec;
    let lower = args.file.to_ascii_lowercase();
    let mut labels = std::collections::BTreeMap::new();
    for label in &args.labels {
        let (name, value) = label.split_once('=').ok_or_else(|| {
            Error::bad_input(format!("--label {label:?}: write NAME=VALUE, e.g. --label route=/checkout"))
        })?;
        labels.insert(name.to_string(), value.to_string());
    }
    let spec = if args.metric.is_some() {
        DistributionSpec {
            dist: "prometheus".into(),
            file: Some(args.file.clone()),
            metric: args.metric.clone(),
            labels: (!labels.is_empty()).then_some(labels),
            tail: args.tail.clone(),
            ..DistributionSpec::default()
        }
    } else if [".hdr", ".hlog", ".hgrm", ".hdrz"].iter().any(|e| lower.ends_with(e)) || args.unit.is_some() {
        let unit = args.unit.clone().ok_or_else(|| {
            Error::bad_input(format!(
                "{}: an HdrHistogram needs --unit (ns, us, ms or s): the unit its values were recorded in",
                args.file
            ))
        })?;
        DistributionSpec {
            dist: "hdr".into(),
            file: Some(args.file.clone()),
            unit: Some(unit),
            ..DistributionSpec::default()
        }
    } else {
        DistributionSpec {
            dist: "empirical".into(),
            file: Some(args.file.clone()),
            column: args.column.clone(),
            ..DistributionSpec::default()
        }
    };
    if spec.dist != "prometheus" && (args.tail.is_some() || !args.labels.is_empty()) {
        return Err(Error::bad_input("--tail and --label are for a Prometheus histogram: give --metric too"));
    }
    // The page is written only when asked (issue 71: it appeared in out/ unasked).
    if let Some(page) = &args.out {
        output_file::check(page, "--out", args.force)?;
    }
    let (table, count) = spec.data("fit")?;
    let report = stampede_scenario::inputs::fit::fit(&table, count);
    let source = spec.inline_toml();
    if let Some(page) = &args.out {
        output_file::write(page, "--out", stampede_report::fit_page::render(&source, &report).as_bytes(), args.force)?;
    }
    let page_text = args.out.as_ref().map(|page| page.display().to_string());
    if args.json {
        let json = report.to_json(&args.file, &source, page_text.as_deref());
        super::print_json(&json);
    } else {
        print!("{}", report.render(&args.file, &source, page_text.as_deref()));
    }
    Ok(())
}
