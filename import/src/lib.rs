//! `stampede import`: a graph scenario inferred from distributed traces.
//!
//! The pipeline, one module each: a format's reader ([`formats`]) turns records into
//! [`span::Span`]s; the [`assemble`]r holds them until their trace is complete; the
//! model ([`infer`]) adds each complete trace's invocations, calls, self times,
//! network times and arrivals to bounded aggregates; [`write`] renders the scenario,
//! its data files and the summary. Memory is bounded by the open traces and the
//! samples kept, not by the input.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod assemble;
pub mod formats;
pub mod infer;
pub mod span;
pub mod write;

use std::path::PathBuf;

use stampede_scenario::base::error::{Error, Result};

pub use formats::Format;
pub use write::{Options, Written};

/// What to read.
#[derive(Clone, Debug)]
pub struct Input {
    /// The files, read in order.
    pub files: Vec<PathBuf>,
    /// Their format (`None`: detected from each file's first bytes).
    pub format: Option<Format>,
    /// The width of a load bucket, nanoseconds.
    pub bucket_ns: i64,
    /// How far past its caller's end a call may end and still be one the caller waited
    /// for (clock skew), nanoseconds; beyond, it is fire-and-forget.
    pub skew_ns: i64,
}

/// Reads `input` and writes the scenario it describes.
pub fn import(input: &Input, options: &Options) -> Result<Written> {
    let mut reader = formats::Reader::new(input.bucket_ns);
    reader.model.skew_ns = input.skew_ns.max(0);
    for path in &input.files {
        let format = match input.format {
            Some(format) => format,
            None => detect(path)?,
        };
        formats::read_file(path, format, &mut reader)?;
    }
    let (mut model, names) = reader.finish();
    model.skipped.joined = model.join_spellings() as u64;
    let spans = model.spans;
    if spans == 0 {
        let files: Vec<String> = input.files.iter().map(|p| p.display().to_string()).collect();
        let s = &model.skipped;
        let why = [
            (s.no_id, "without a trace or span id"),
            (s.bad_time, "with a negative start time or duration"),
            (s.unreadable, "records that could not be read"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect::<Vec<_>>();
        let skipped = if why.is_empty() { String::new() } else { format!(" (skipped: {})", why.join(", ")) };
        return Err(Error::bad_input(format!("{}: no spans in the input{skipped}", files.join(", "))));
    }
    if model.endpoints.is_empty() {
        return Err(Error::bad_input(format!(
            "{spans} spans read, but no trace had a service-side span to start from ({} skipped): nothing to model",
            model.skipped.no_entry
        )));
    }
    let services: std::collections::BTreeSet<u32> = model.endpoints.keys().map(|(service, _)| *service).collect();
    if services.len() > MAX_SERVICES || model.entries.len() > MAX_SERVICES {
        let named: Vec<&str> = services.iter().take(3).map(|&s| names.get(s)).collect();
        return Err(Error::bad_input(format!(
            "the traces name {} services and {} entry points ({}, …): an import writes at most {MAX_SERVICES} of \
             each (a graph of 5,000 services runs a replica in about 2 GB); nothing was written",
            services.len(),
            model.entries.len(),
            named.join(", ")
        ))
        .with_hint(
            "import the traces of the services you mean to model (one team's, a shorter window), or check that \
             service.name is the service and not a per-request or per-host value",
        ));
    }
    let first = model.entries.values().map(|e| e.first).min().unwrap_or(0);
    let last = model.entries.values().map(|e| e.last).max().unwrap_or(0);
    let window_days = (last as f64 - first as f64) / 1e9 / 86_400.0;
    if window_days > MAX_WINDOW_DAYS {
        return Err(Error::bad_input(format!(
            "the traces' requests arrive over {window_days:.0} days, more than the {MAX_WINDOW_DAYS} days an import \
             models as one window: do the files share a clock? (Alibaba's times count from the trace's start, \
             OTLP's, Jaeger's and Zipkin's from 1970)"
        ))
        .with_hint("import files of one format (one clock) together, and each set on its own"));
    }
    Ok(write::write(&model, &names, options))
}

/// The most services (and entry points) an import writes: a graph of 5,000 services
/// runs one replica in about 2 GB; past 10,000 the scenario alone (its metrics' columns)
/// takes gigabytes to resolve, and such a count is more often a mislabelled
/// `service.name` (a host or a request id) than a system.
pub const MAX_SERVICES: usize = 10_000;

/// The longest stretch of arrivals an import models as one window: beyond it the
/// files almost surely count time from different origins (relative and Unix times).
pub const MAX_WINDOW_DAYS: f64 = 31.0;

/// The format of `path`, from its first 64 KiB.
fn detect(path: &std::path::Path) -> Result<Format> {
    use std::io::Read;
    let shown = path.display();
    let mut head = vec![0u8; 64 * 1024];
    let file = std::fs::File::open(path).map_err(|e| Error::bad_input(format!("{shown}: cannot open: {e}")))?;
    let read = file.take(head.len() as u64).read(&mut head).map_err(|e| Error::bad_input(format!("{shown}: {e}")))?;
    head.truncate(read);
    if head.iter().all(u8::is_ascii_whitespace) {
        return Err(Error::bad_input(format!("{shown}: the file is empty: no spans")));
    }
    Format::detect(&head).ok_or_else(|| {
        Error::bad_input(format!(
            "{shown}: not a trace format stampede recognises; name it with --format ({})",
            Format::NAMES.join(", ")
        ))
    })
}
