//! Reading measured latencies from the files a monitoring stack already keeps: a column
//! of samples (CSV, one value a line, or a Parquet column), an HdrHistogram (V2,
//! compressed or not, or a `.hlog` interval log), and a Prometheus histogram (the text
//! exposition format's cumulative `_bucket{le=…}` lines, or the JSON of Prometheus'
//! HTTP API). Each reader returns plain numbers or CDF knots and names the file, line
//! or row of anything it refuses; none knows what the numbers will be used for.

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine as _;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;

use crate::base::error::{Error, Result};

fn refuse(path: &Path, what: impl std::fmt::Display) -> Error {
    Error::bad_input(format!("{}: {what}", path.display()))
}

/// The file as sealed for this process ([`super::sealed`]: read once, kept), refused
/// when it holds nothing but whitespace.
fn read_sealed(path: &Path) -> Result<std::sync::Arc<super::sealed::Sealed>> {
    let sealed = super::sealed::read(path)?;
    if sealed.bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(refuse(path, "the file is empty"));
    }
    Ok(sealed)
}

/// The file's bytes, shared with the sealed copy.
fn read_bytes(path: &Path) -> Result<std::sync::Arc<[u8]>> {
    Ok(std::sync::Arc::clone(&read_sealed(path)?.bytes))
}

/// The file as UTF-8 text, without a leading byte-order mark (spreadsheets write one).
pub(crate) fn read_text(path: &Path) -> Result<String> {
    let sealed = read_sealed(path)?;
    Ok(sealed.text().ok_or_else(|| refuse(path, "not UTF-8 text"))?.to_string())
}

/// A sample: a Parquet column, or a CSV with one value a line (an optional header
/// line that is not a number is skipped; with `column`, a CSV with a header row is
/// read by that column's name).
pub fn sample(path: &Path, column: Option<&str>) -> Result<Vec<f64>> {
    let is_parquet = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("parquet"));
    let values = if is_parquet {
        let column = column.ok_or_else(|| refuse(path, "a Parquet file needs `column`, the column to read"))?;
        let bytes = read_bytes(path)?;
        let values = stampede_output::read::number_column_of(bytes, path, column, super::sealed::max_input_bytes())
            .map_err(|e| Error::bad_input(e.to_string()))?;
        if let Some((row, bad)) = values.iter().enumerate().find(|(_, v)| !v.is_finite() || **v < 0.0) {
            return Err(refuse(path, format!("column {column:?} row {}: {bad} is not a non-negative number", row + 1)));
        }
        values
    } else {
        csv_sample(path, column)?
    };
    if values.len() < 2 {
        return Err(refuse(path, format!("{} value(s): a sample needs at least 2", values.len())));
    }
    Ok(values)
}

/// A text column, row for row: a Parquet text column, or a CSV column by its header.
pub fn labels(path: &Path, column: &str) -> Result<Vec<String>> {
    let is_parquet = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("parquet"));
    if is_parquet {
        let bytes = read_bytes(path)?;
        return stampede_output::read::string_column_of(bytes, path, column, super::sealed::max_input_bytes())
            .map_err(|e| Error::bad_input(e.to_string()));
    }
    let text = read_text(path)?;
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').map(|c| c.trim().trim_matches('"')).collect();
    let field = header
        .iter()
        .position(|c| *c == column)
        .ok_or_else(|| refuse(path, format!("no column {column:?}; its columns: {}", header.join(", "))))?;
    Ok(lines.map(|line| line.split(',').nth(field).unwrap_or_default().trim().trim_matches('"').to_string()).collect())
}

fn csv_sample(path: &Path, column: Option<&str>) -> Result<Vec<f64>> {
    let text = read_text(path)?;
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()).peekable();
    let mut field = 0;
    if let Some((_, first)) = lines.peek() {
        let cells: Vec<&str> = first.split(',').map(str::trim).collect();
        let header = cells.iter().any(|c| c.parse::<f64>().is_err());
        match (header, column) {
            (true, Some(name)) => {
                field = cells
                    .iter()
                    .position(|c| c.trim_matches('"') == name)
                    .ok_or_else(|| refuse(path, format!("no column {name:?}; its columns: {}", cells.join(", "))))?;
                lines.next();
            }
            (true, None) if cells.len() == 1 => {
                lines.next();
            }
            (true, None) => {
                return Err(refuse(path, format!("several columns ({}): say which with `column`", cells.join(", "))))
            }
            (false, Some(name)) => {
                return Err(refuse(path, format!("column {name:?} was asked for, but the file has no header row")))
            }
            (false, None) if cells.len() > 1 => {
                return Err(refuse(path, "several values a line: one value a line, or a header row and `column`"))
            }
            (false, None) => {}
        }
    }
    let mut values = Vec::new();
    for (index, line) in lines {
        let cell = line.split(',').nth(field).map(str::trim).unwrap_or_default();
        match cell.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => values.push(v),
            _ => return Err(refuse(path, format!("line {}: {cell:?} is not a non-negative number", index + 1))),
        }
    }
    Ok(values)
}

/// Seconds per unit of an HdrHistogram's recorded values.
pub fn unit_seconds(unit: &str) -> Option<f64> {
    match unit {
        "ns" => Some(1e-9),
        "us" => Some(1e-6),
        "ms" => Some(1e-3),
        "s" => Some(1.0),
        _ => None,
    }
}

/// An HdrHistogram: one serialised histogram (V2, or V2 + DEFLATE), or an interval
/// log (`.hlog`: every interval merged, or those starting within `[start_s, end_s)`
/// of the log's first interval). Values stay in the recorded unit.
pub fn hdr(path: &Path, window: (Option<f64>, Option<f64>)) -> Result<Histogram<u64>> {
    let bytes = read_bytes(path)?;
    let text = std::str::from_utf8(&bytes).ok().filter(|t| t.lines().any(|l| l.starts_with('#') || l.contains(',')));
    let Some(text) = text else {
        if window != (None, None) {
            return Err(refuse(path, "start_s and end_s choose intervals of an interval log; this is one histogram"));
        }
        return bounded_histogram(&bytes)
            .map_err(|e| refuse(path, format!("not an HdrHistogram (V2 or V2 + DEFLATE): {e}")));
    };
    let mut merged: Option<Histogram<u64>> = None;
    let mut first_start = None;
    let mut intervals = 0;
    let mut inflation_left = MAX_INFLATED_LOG_BYTES;
    for (index, entry) in IntervalLogIterator::new(text.as_bytes()).enumerate() {
        let entry =
            entry.map_err(|e| refuse(path, format!("entry {}: not an interval log entry: {e:?}", index + 1)))?;
        let LogEntry::Interval(interval) = entry else { continue };
        let start = interval.start_timestamp().as_secs_f64();
        let offset = start - *first_start.get_or_insert(start);
        if window.0.is_some_and(|from| offset < from) || window.1.is_some_and(|to| offset >= to) {
            continue;
        }
        let encoded = base64::engine::general_purpose::STANDARD
            .decode(interval.encoded_histogram())
            .map_err(|e| refuse(path, format!("interval {}: not base64: {e}", index + 1)))?;
        let histogram = bounded_histogram_within(&encoded, &mut inflation_left)
            .map_err(|e| refuse(path, format!("interval {}: not an HdrHistogram: {e}", index + 1)))?;
        intervals += 1;
        match &mut merged {
            None => merged = Some(histogram),
            Some(all) => {
                all.add(&histogram).map_err(|e| refuse(path, format!("cannot merge interval {}: {e:?}", index + 1)))?
            }
        }
    }
    match merged {
        Some(histogram) if !histogram.is_empty() => Ok(histogram),
        _ if intervals == 0 => Err(refuse(path, "no interval of the log falls within start_s..end_s (or it has none)")),
        _ => Err(refuse(path, "the histogram holds no values")),
    }
}

/// The most bytes a compressed HdrHistogram may inflate to (64 MiB: a histogram of
/// five significant digits over every `u64` value is about 50 MB of counts, and a
/// real one is kilobytes); a DEFLATE bomb stops here.
pub const MAX_INFLATED_HISTOGRAM_BYTES: u64 = 64 << 20;

const V2_COOKIE: u32 = 0x1c84_9303 | 0x10;
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;
/// cookie, payload length, normalising offset, digits, lowest, highest, ratio.
const V2_HEADER_BYTES: usize = 4 + 4 + 4 + 4 + 8 + 8 + 8;

fn be_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// One serialised histogram, its declared lengths checked against the bytes there
/// are before the `hdrhistogram` crate allocates by them: a V2 payload must fit in the
/// bytes that follow its header, a compressed one's DEFLATE stream in the bytes that
/// follow its length, and what it inflates to at most
/// [`MAX_INFLATED_HISTOGRAM_BYTES`]. So a few bytes cannot make it allocate gigabytes.
pub fn bounded_histogram(bytes: &[u8]) -> std::result::Result<Histogram<u64>, String> {
    let mut allowance = MAX_INFLATED_HISTOGRAM_BYTES;
    bounded_histogram_within(bytes, &mut allowance)
}

/// The most bytes all the histograms of one interval log may inflate to together
/// (256 MiB): each line's own bound is not enough when every line is near it.
pub const MAX_INFLATED_LOG_BYTES: u64 = 256 << 20;

/// [`bounded_histogram`], its inflated bytes also taken from `remaining` (a whole
/// interval log's allowance): a log runs out, however its bytes are spread.
pub(crate) fn bounded_histogram_within(
    bytes: &[u8],
    remaining: &mut u64,
) -> std::result::Result<Histogram<u64>, String> {
    let deserialize = |v2: &[u8]| -> std::result::Result<Histogram<u64>, String> {
        let declared = be_u32(v2, 4).ok_or("shorter than a histogram's header")? as usize;
        let available = v2.len().saturating_sub(V2_HEADER_BYTES);
        if v2.len() < V2_HEADER_BYTES || declared > available {
            return Err(format!("it declares {declared} bytes of counts, but only {available} follow its header"));
        }
        let digits = be_u32(v2, 12).ok_or("shorter than a histogram's header")?;
        if digits > 5 {
            return Err(format!("it declares {digits} significant digits; HdrHistogram allows at most 5"));
        }
        Deserializer::new().deserialize::<u64, _>(&mut std::io::Cursor::new(v2)).map_err(|e| format!("{e:?}"))
    };
    match be_u32(bytes, 0) {
        Some(V2_COOKIE) => deserialize(bytes),
        Some(V2_COMPRESSED_COOKIE) => {
            use std::io::Read as _;
            let declared = be_u32(bytes, 4).ok_or("shorter than a compressed histogram's header")? as usize;
            let available = bytes.len() - 8.min(bytes.len());
            if declared > available {
                return Err(format!("it declares {declared} compressed bytes, but only {available} follow"));
            }
            let mut inflated = Vec::new();
            let limit = MAX_INFLATED_HISTOGRAM_BYTES.min(*remaining);
            flate2::read::ZlibDecoder::new(&bytes[8..8 + declared])
                .take(limit + 1)
                .read_to_end(&mut inflated)
                .map_err(|e| format!("its DEFLATE stream is damaged: {e}"))?;
            if inflated.len() as u64 > MAX_INFLATED_HISTOGRAM_BYTES {
                return Err(format!(
                    "it inflates to more than {MAX_INFLATED_HISTOGRAM_BYTES} bytes, far beyond any real histogram"
                ));
            }
            if inflated.len() as u64 > *remaining {
                return Err(format!(
                    "the log's histograms inflate to more than {MAX_INFLATED_LOG_BYTES} bytes together, far beyond \
                     any real log"
                ));
            }
            *remaining -= inflated.len() as u64;
            if be_u32(&inflated, 0) != Some(V2_COOKIE) {
                return Err("its inflated content is not a V2 histogram".into());
            }
            deserialize(&inflated)
        }
        _ => Err("it does not start with a V2 histogram's cookie".into()),
    }
}

/// The CDF knots (value in the recorded unit, cumulative probability) of a histogram:
/// each bucket's count spread evenly over the bucket, starting at 0.
pub fn hdr_knots(histogram: &Histogram<u64>) -> Vec<(f64, f64)> {
    let total = histogram.len() as f64;
    let mut knots = vec![(0.0, 0.0)];
    let mut seen = 0u64;
    for bucket in histogram.iter_recorded() {
        let value = bucket.value_iterated_to();
        let low = histogram.lowest_equivalent(value) as f64;
        let high = histogram.highest_equivalent(value) as f64 + 1.0;
        let before = seen as f64 / total;
        seen += bucket.count_at_value();
        let last = knots.last().expect("starts with a knot").0;
        if low > last {
            knots.push((low, before));
        }
        knots.push((high.max(low), seen as f64 / total));
    }
    knots
}

/// A Prometheus histogram: `(upper bound le, cumulative count)` per bucket, sorted by
/// le, `+Inf` last, plus `_sum` and `_count` when present.
#[derive(Clone, Debug, PartialEq)]
pub struct Buckets {
    pub bounds: Vec<(f64, f64)>,
    pub sum: Option<f64>,
}

/// One series of `metric`'s buckets whose labels include every one of `labels`, from
/// the text exposition format or the JSON of Prometheus' HTTP API (a vector, or the
/// last sample of each series of a matrix).
pub fn prometheus(path: &Path, metric: &str, labels: &BTreeMap<String, String>) -> Result<Buckets> {
    let text = read_text(path)?;
    let samples = if text.trim_start().starts_with('{') {
        api_samples(path, &text, metric)?
    } else {
        text_samples(path, &text, metric)?
    };
    let series = chosen_series(path, metric, labels, &samples.buckets)?;
    let bounds = checked_bounds(path, metric, samples.buckets.iter().filter(|b| b.labels == series))?;
    let sum = samples.sums.iter().find(|(l, _)| *l == series).map(|(_, s)| *s);
    Ok(Buckets { bounds, sum })
}

/// One `_bucket` sample: its labels without `le`, its `le` as written, its cumulative
/// count, and the line (or API result) it came from.
struct BucketSample {
    labels: BTreeMap<String, String>,
    le: String,
    count: f64,
    line: usize,
}

/// A metric's `_bucket` samples and its `_sum`s by label set, as read.
#[derive(Default)]
struct Samples {
    buckets: Vec<BucketSample>,
    sums: Vec<(BTreeMap<String, String>, f64)>,
}

/// The samples in a Prometheus HTTP API answer (`data.result`).
fn api_samples(path: &Path, text: &str, metric: &str) -> Result<Samples> {
    let (bucket_name, sum_name) = (format!("{metric}_bucket"), format!("{metric}_sum"));
    let json: serde_json::Value = serde_json::from_str(text).map_err(|e| refuse(path, format!("not JSON: {e}")))?;
    let results = json["data"]["result"]
        .as_array()
        .ok_or_else(|| refuse(path, "not a Prometheus API answer: no data.result list"))?;
    let mut samples = Samples::default();
    for (index, series) in results.iter().enumerate() {
        let mut labels = api_labels(series);
        let name = labels.remove("__name__");
        let value = series.get("value").or_else(|| series["values"].as_array().and_then(|v| v.last()));
        let count = value
            .and_then(|v| v.get(1))
            .and_then(|v| v.as_str())
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| refuse(path, format!("result {}: no numeric value", index + 1)))?;
        match (name.as_deref(), labels.remove("le")) {
            // A query such as sum by (le) (rate(…_bucket[5m])) drops the name.
            (Some(n), Some(le)) if n == bucket_name => {
                samples.buckets.push(BucketSample { labels, le, count, line: index + 1 })
            }
            (None, Some(le)) => samples.buckets.push(BucketSample { labels, le, count, line: index + 1 }),
            (Some(n), None) if n == sum_name => samples.sums.push((labels, count)),
            _ => {}
        }
    }
    Ok(samples)
}

/// The samples in the text exposition format.
fn text_samples(path: &Path, text: &str, metric: &str) -> Result<Samples> {
    let (bucket_name, sum_name) = (format!("{metric}_bucket"), format!("{metric}_sum"));
    let mut samples = Samples::default();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, rest) = line.split_at(line.find(['{', ' ']).unwrap_or(line.len()));
        if name != bucket_name && name != sum_name {
            continue;
        }
        let (mut labels, value_text) =
            parse_labels(rest).map_err(|why| refuse(path, format!("line {}: {why}", index + 1)))?;
        let count: f64 = value_text
            .split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| refuse(path, format!("line {}: {value_text:?} is not a number", index + 1)))?;
        if name == sum_name {
            samples.sums.push((labels, count));
            continue;
        }
        let le = labels
            .remove("le")
            .ok_or_else(|| refuse(path, format!("line {}: a _bucket sample without an le label", index + 1)))?;
        samples.buckets.push(BucketSample { labels, le, count, line: index + 1 });
    }
    Ok(samples)
}

/// The one series whose labels include every one of `labels`; refused, listing the
/// series, when none or several do.
fn chosen_series(
    path: &Path,
    metric: &str,
    labels: &BTreeMap<String, String>,
    buckets: &[BucketSample],
) -> Result<BTreeMap<String, String>> {
    let mut series_found: Vec<&BTreeMap<String, String>> = Vec::new();
    for sample in buckets {
        if !series_found.contains(&&sample.labels) {
            series_found.push(&sample.labels);
        }
    }
    let matches = |series: &BTreeMap<String, String>| labels.iter().all(|(k, v)| series.get(k) == Some(v));
    let chosen: Vec<&BTreeMap<String, String>> = series_found.iter().copied().filter(|s| matches(s)).collect();
    match chosen.as_slice() {
        [one] => Ok((*one).clone()),
        [] if series_found.is_empty() => {
            Err(refuse(path, format!("no {metric}_bucket samples (is the metric name right?)")))
        }
        [] => {
            let all: Vec<String> = series_found.iter().map(|s| label_set(s)).collect();
            Err(refuse(
                path,
                format!("no {metric} series has the labels {}; the series: {}", label_set(labels), all.join(" ")),
            ))
        }
        many => {
            let all: Vec<String> = many.iter().map(|s| label_set(s)).collect();
            Err(refuse(
                path,
                format!(
                    "{} {metric} series match {}: {}; add labels to choose one",
                    many.len(),
                    label_set(labels),
                    all.join(" ")
                ),
            ))
        }
    }
}

/// One series' buckets as (le, cumulative count): every le a number from 0 up (`+Inf`
/// last), sorted, the counts cumulative, at least one finite bucket, and something
/// counted.
fn checked_bounds<'a>(
    path: &Path,
    metric: &str,
    samples: impl Iterator<Item = &'a BucketSample>,
) -> Result<Vec<(f64, f64)>> {
    let mut bounds = Vec::new();
    for BucketSample { le, count, line, .. } in samples {
        let bound = match le.as_str() {
            "+Inf" | "Inf" | "inf" => f64::INFINITY,
            other => {
                other.parse::<f64>().map_err(|_| refuse(path, format!("line {line}: le={other:?} is not a number")))?
            }
        };
        if !(count.is_finite() && *count >= 0.0) {
            return Err(refuse(path, format!("line {line}: the count {count} is not a non-negative number")));
        }
        if bound < 0.0 || bound.is_nan() {
            return Err(refuse(path, format!("line {line}: le={le} is below 0; durations start at 0")));
        }
        bounds.push((bound, *count, *line));
    }
    for pair in bounds.windows(2) {
        let ((le0, c0, _), (le1, c1, line)) = (pair[0], pair[1]);
        if le1 <= le0 {
            return Err(refuse(
                path,
                format!("line {line}: le={le1} follows le={le0}; the buckets must be sorted by le"),
            ));
        }
        if c1 < c0 {
            return Err(refuse(path, format!("line {line}: the cumulative count falls from {c0} to {c1} at le={le1}; bucket counts are cumulative")));
        }
    }
    if !bounds.is_empty() && bounds.iter().all(|b| b.0.is_infinite()) {
        return Err(refuse(
            path,
            format!("the {metric} series has only the le=\"+Inf\" bucket: no finite bucket to say where its observations lie"),
        ));
    }
    if bounds.last().is_none_or(|b| b.0.is_finite()) {
        return Err(refuse(path, format!("the {metric} series has no le=\"+Inf\" bucket (the total count)")));
    }
    if bounds.last().is_some_and(|b| b.1 == 0.0) {
        return Err(refuse(path, "every bucket is empty: the histogram counted nothing"));
    }
    Ok(bounds.into_iter().map(|(le, count, _)| (le, count)).collect())
}

/// A series' labels in Prometheus' HTTP API answer (its `metric` object).
pub(crate) fn api_labels(series: &serde_json::Value) -> BTreeMap<String, String> {
    series["metric"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect())
        .unwrap_or_default()
}

/// Labels as a message shows them: `{job="api", le="0.1"}`.
pub(crate) fn label_set(labels: &BTreeMap<String, String>) -> String {
    let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    format!("{{{}}}", inner.join(", "))
}

/// `{a="x",le="0.1"} 42` → ({a: x, le: 0.1}, "42"); without braces, no labels.
pub(crate) fn parse_labels(rest: &str) -> std::result::Result<(BTreeMap<String, String>, &str), String> {
    let mut labels = BTreeMap::new();
    let Some(body) = rest.strip_prefix('{') else { return Ok((labels, rest.trim())) };
    let next = |at: usize| body[at..].chars().next();
    let mut i = 0;
    loop {
        while let Some(c) = next(i).filter(|c| *c == ',' || c.is_whitespace()) {
            i += c.len_utf8();
        }
        match next(i) {
            None => return Err("an unclosed {".into()),
            Some('}') => return Ok((labels, body[i + 1..].trim())),
            Some(_) => {}
        }
        let eq = body[i..].find('=').ok_or("a label without =")? + i;
        let name = body[i..eq].trim().to_string();
        let mut j = eq + 1;
        while let Some(c) = next(j).filter(|c| c.is_whitespace()) {
            j += c.len_utf8();
        }
        if next(j) != Some('"') {
            return Err(format!("label {name}'s value is not quoted"));
        }
        j += 1;
        let mut value = String::new();
        loop {
            let c = next(j).ok_or_else(|| format!("label {name}'s value has no closing quote"))?;
            j += c.len_utf8();
            match c {
                '"' => break,
                '\\' => {
                    let escaped = next(j).ok_or_else(|| format!("label {name}'s value has no closing quote"))?;
                    j += escaped.len_utf8();
                    value.push(if escaped == 'n' { '\n' } else { escaped });
                }
                other => value.push(other),
            }
        }
        labels.insert(name, value);
        i = j;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_parse_with_escapes_and_spaces() {
        let (labels, rest) = parse_labels(r#"{route="/a,\"b\"", le="0.5"} 42 1700000000"#).unwrap();
        assert_eq!(labels["route"], "/a,\"b\"");
        assert_eq!(labels["le"], "0.5");
        assert_eq!(rest, "42 1700000000");
        assert!(parse_labels(r#"{le=0.5} 1"#).unwrap_err().contains("not quoted"));
    }
}
