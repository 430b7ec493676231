//! Production metrics over time, as `stampede calibrate` compares a model with them
//! (issue 50): a CSV (`time_s`, then one column per metric, named as stampede names
//! its metrics, e.g. `api.checkout.goodput_rps`) or a Prometheus range-query answer
//! (`resultType: matrix`) with a map from series selectors to metric names. Both are
//! read into one [`Observed`] table: intervals × metrics, a value missing where the
//! source had none.
//!
//! Invariants: the times are finite and strictly increasing; every metric has one
//! value (or `None`) per time; names are unique. A Prometheus answer's times are made
//! relative to its first sample, so production and simulation both start at zero.
//! Files are read through [`super::sealed`], like every input.

use std::collections::BTreeMap;
use std::path::Path;

use super::sources::{api_labels, label_set, parse_labels, read_text};
use crate::base::error::{Error, Result};

/// Metrics per interval.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    /// Each interval's time, seconds (strictly increasing).
    pub times_s: Vec<f64>,
    /// Per metric, one value per time (`None`: not measured then).
    pub metrics: BTreeMap<String, Vec<Option<f64>>>,
}

/// Which Prometheus series a metric is: a metric name and labels it must have
/// (`http_request_p99{route="/checkout"}`, or `{__name__="x", job="api"}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    /// The series' metric name (`__name__`), if the selector names one.
    pub name: Option<String>,
    /// Labels the series must carry, with these values.
    pub labels: BTreeMap<String, String>,
}

impl Selector {
    /// Reads `NAME{label="value", …}` (either part may be left out, not both).
    pub fn parse(text: &str) -> std::result::Result<Selector, String> {
        let text = text.trim();
        let (name, rest) = text.split_at(text.find('{').unwrap_or(text.len()));
        let (mut labels, tail) = parse_labels(rest)?;
        if !tail.is_empty() {
            return Err(format!("{tail:?} after the labels"));
        }
        let name = match (name.trim(), labels.remove("__name__")) {
            ("", None) if labels.is_empty() => return Err("an empty selector".into()),
            ("", from_label) => from_label,
            (name, None) => Some(name.to_string()),
            (name, Some(label)) if label == name => Some(label),
            (name, Some(label)) => return Err(format!("two names, {name} and __name__={label:?}")),
        };
        Ok(Selector { name, labels })
    }

    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.name.as_ref().is_none_or(|n| labels.get("__name__") == Some(n))
            && self.labels.iter().all(|(k, v)| labels.get(k) == Some(v))
    }
}

impl std::fmt::Display for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{}{}", self.name.as_deref().unwrap_or(""), label_set(&self.labels))
    }
}

/// A series' samples: (time, value; `None` where it was NaN or infinite).
type Points = Vec<(f64, Option<f64>)>;

fn refuse(path: &Path, what: impl std::fmt::Display) -> Error {
    Error::bad_input(format!("{}: {what}", path.display()))
}

/// Reads `path`: a Prometheus answer (JSON) read with `map` (metric name → selector),
/// or a CSV (with `map` empty).
pub fn read(path: &Path, map: &[(String, Selector)]) -> Result<Observed> {
    let text = read_text(path)?;
    if text.trim_start().starts_with('{') {
        if map.is_empty() {
            return Err(refuse(
                path,
                "a Prometheus answer needs a map from series to metrics: --map 'NAME=SELECTOR' \
                 (e.g. --map 'api.checkout.p99_s=checkout_p99_seconds{job=\"api\"}')",
            ));
        }
        prometheus(path, &text, map)
    } else {
        if let Some((name, _)) = map.first() {
            return Err(refuse(
                path,
                format!("--map {name}=…: a CSV names its metrics in its header; --map is for a Prometheus answer"),
            ));
        }
        csv(path, &text)
    }
}

/// A CSV: a header `time_s,METRIC,…`, then a row per interval (an empty cell or `NaN`:
/// not measured).
fn csv(path: &Path, text: &str) -> Result<Observed> {
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines.next().ok_or_else(|| refuse(path, "the file is empty"))?;
    let columns: Vec<&str> = header.split(',').map(str::trim).collect();
    if columns.first() != Some(&"time_s") {
        return Err(refuse(path, format!("line 1: the first column must be time_s, not {:?}", columns[0])));
    }
    if columns.len() < 2 {
        return Err(refuse(path, "line 1: no metric columns after time_s"));
    }
    let mut metrics: BTreeMap<String, Vec<Option<f64>>> = BTreeMap::new();
    for name in &columns[1..] {
        if name.is_empty() {
            return Err(refuse(path, "line 1: a metric column without a name"));
        }
        if metrics.insert(name.to_string(), Vec::new()).is_some() {
            return Err(refuse(path, format!("line 1: the column {name} is given twice")));
        }
    }
    let mut times_s: Vec<f64> = Vec::new();
    for (index, line) in lines {
        let number = index + 1;
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        if cells.len() != columns.len() {
            return Err(refuse(
                path,
                format!("line {number}: {} cells, the header has {}", cells.len(), columns.len()),
            ));
        }
        let time: f64 = cells[0]
            .parse()
            .ok()
            .filter(|t: &f64| t.is_finite())
            .ok_or_else(|| refuse(path, format!("line {number}: time_s {:?} is not a finite number", cells[0])))?;
        if let Some(&last) = times_s.last() {
            if time <= last {
                return Err(refuse(
                    path,
                    format!("line {number}: time_s {time} is not after {last}: rows go forward in time"),
                ));
            }
        }
        times_s.push(time);
        for (cell, name) in cells[1..].iter().zip(&columns[1..]) {
            let value = match *cell {
                "" | "NaN" | "nan" => None,
                text => Some(text.parse::<f64>().ok().filter(|v| v.is_finite()).ok_or_else(|| {
                    refuse(path, format!("line {number}: {name} = {text:?} is not a number (leave the cell empty where nothing was measured)"))
                })?),
            };
            metrics.get_mut(*name).expect("a header column").push(value);
        }
    }
    if times_s.is_empty() {
        return Err(refuse(path, "no rows after the header"));
    }
    Ok(Observed { times_s, metrics })
}

/// A Prometheus range-query answer: each mapped metric is the one series its selector
/// matches; the times are every sample time of those series, relative to the first.
fn prometheus(path: &Path, text: &str, map: &[(String, Selector)]) -> Result<Observed> {
    let json: serde_json::Value = serde_json::from_str(text).map_err(|e| refuse(path, format!("not JSON: {e}")))?;
    let data = &json["data"];
    match data["resultType"].as_str() {
        Some("matrix") => {}
        Some(other) => {
            return Err(refuse(
                path,
                format!("a {other}, not a matrix: export a range query (/api/v1/query_range), one value per interval"),
            ))
        }
        None => return Err(refuse(path, "not a Prometheus API answer: no data.resultType")),
    }
    let results =
        data["result"].as_array().ok_or_else(|| refuse(path, "not a Prometheus API answer: no data.result list"))?;
    let series = api_series(path, results)?;
    let chosen = choose_series(path, &series, map)?;
    // Every sample time of the chosen series, in order (Prometheus steps align them).
    let mut times: Vec<f64> = chosen.iter().flat_map(|(_, points)| points.iter().map(|p| p.0)).collect();
    times.sort_by(f64::total_cmp);
    times.dedup();
    let first = *times.first().ok_or_else(|| refuse(path, "the chosen series have no samples"))?;
    let mut metrics = BTreeMap::new();
    for (name, points) in chosen {
        let at: BTreeMap<u64, Option<f64>> = points.iter().map(|&(t, v)| (t.to_bits(), v)).collect();
        metrics.insert(name.clone(), times.iter().map(|t| at.get(&t.to_bits()).copied().flatten()).collect());
    }
    Ok(Observed { times_s: times.iter().map(|t| t - first).collect(), metrics })
}

/// A Prometheus matrix's series: each one's labels and its [time, "value"] pairs
/// ("NaN" and "+Inf", a quantile over no requests, read as not measured).
fn api_series(path: &Path, results: &[serde_json::Value]) -> Result<Vec<(BTreeMap<String, String>, Points)>> {
    let mut series = Vec::new();
    for (index, result) in results.iter().enumerate() {
        let labels = api_labels(result);
        let values = result["values"].as_array().ok_or_else(|| {
            refuse(path, format!("result {}: no values list (a matrix's series have one)", index + 1))
        })?;
        let mut points = Vec::with_capacity(values.len());
        for value in values {
            let time = value.get(0).and_then(serde_json::Value::as_f64);
            let number = value.get(1).and_then(serde_json::Value::as_str).map(|v| v.parse::<f64>());
            let (Some(time), Some(Ok(number))) = (time, number) else {
                return Err(refuse(path, format!("result {}: {value} is not a [time, \"value\"] pair", index + 1)));
            };
            // "NaN" and "+Inf" (a quantile over no requests): not measured.
            points.push((time, number.is_finite().then_some(number)));
        }
        series.push((labels, points));
    }
    Ok(series)
}

/// The one series each `--map NAME=SELECTOR` picks, in the map's order: a selector
/// matching none or several, or a name given twice, is refused with the series listed.
fn choose_series<'a>(
    path: &Path,
    series: &'a [(BTreeMap<String, String>, Points)],
    map: &'a [(String, Selector)],
) -> Result<Vec<(&'a String, &'a Points)>> {
    let mut chosen: Vec<(&String, &Points)> = Vec::new();
    for (name, selector) in map {
        if chosen.iter().any(|(taken, _)| *taken == name) {
            return Err(refuse(path, format!("--map {name} is given twice")));
        }
        let matching: Vec<_> = series.iter().filter(|(labels, _)| selector.matches(labels)).collect();
        match matching.as_slice() {
            [(_, points)] => chosen.push((name, points)),
            [] => {
                let all: Vec<String> = series.iter().map(|(l, _)| label_set(l)).collect();
                return Err(refuse(
                    path,
                    format!("--map {name}: no series matches {selector}; the series: {}", all.join(" ")),
                ));
            }
            many => {
                let all: Vec<String> = many.iter().map(|(l, _)| label_set(l)).collect();
                return Err(refuse(
                    path,
                    format!(
                        "--map {name}: {selector} matches {} series ({}); add labels to pick one",
                        many.len(),
                        all.join(" ")
                    ),
                ));
            }
        }
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str, suffix: &str) -> tempfile::TempPath {
        let mut file = tempfile::Builder::new().suffix(suffix).tempfile().expect("a temporary file");
        std::io::Write::write_all(&mut file, text.as_bytes()).expect("written");
        file.into_temp_path()
    }

    fn map(pairs: &[(&str, &str)]) -> Vec<(String, Selector)> {
        pairs.iter().map(|(n, s)| (n.to_string(), Selector::parse(s).expect("a selector"))).collect()
    }

    const CSV: &str = "time_s,api.checkout.goodput_rps,api.checkout.p99_s\n0,100,0.25\n60,,0.5\n120,110.5,NaN\n";

    const MATRIX: &str = r#"{"status":"success","data":{"resultType":"matrix","result":[
        {"metric":{"__name__":"checkout_p99_seconds","job":"api"},"values":[[1767225600,"0.25"],[1767225660,"0.5"],[1767225720,"NaN"]]},
        {"metric":{"__name__":"checkout_rps","job":"api"},"values":[[1767225600,"100"],[1767225720,"110.5"]]},
        {"metric":{"__name__":"checkout_rps","job":"batch"},"values":[[1767225600,"3"]]}]}}"#;

    #[test]
    fn a_prometheus_matrix_reads_as_the_same_table_as_its_csv() {
        let csv = read(&file(CSV, ".csv"), &[]).expect("the CSV reads");
        assert_eq!(csv.times_s, [0.0, 60.0, 120.0]);
        assert_eq!(csv.metrics["api.checkout.goodput_rps"], [Some(100.0), None, Some(110.5)]);
        assert_eq!(csv.metrics["api.checkout.p99_s"], [Some(0.25), Some(0.5), None]);
        let pairs = [
            ("api.checkout.goodput_rps", r#"checkout_rps{job="api"}"#),
            ("api.checkout.p99_s", "checkout_p99_seconds"),
        ];
        let matrix = read(&file(MATRIX, ".json"), &map(&pairs)).expect("the matrix reads");
        assert_eq!(matrix, csv);
    }

    #[test]
    fn bad_observed_files_say_where_and_what() {
        let refused = |text: &str, suffix: &str, pairs: &[(&str, &str)], says: &str| {
            let message = read(&file(text, suffix), &map(pairs)).expect_err("refused").to_string();
            assert!(message.contains(says), "{message:?} should say {says:?}");
        };
        refused("t,a\n0,1\n", ".csv", &[], "the first column must be time_s");
        refused("time_s\n0\n", ".csv", &[], "no metric columns");
        refused("time_s,a,a\n0,1,2\n", ".csv", &[], "the column a is given twice");
        refused("time_s,a\n0,1\n0,2\n", ".csv", &[], "line 3: time_s 0 is not after 0");
        refused("time_s,a\n0,x\n", ".csv", &[], "line 2: a = \"x\" is not a number");
        refused("time_s,a\n0,1,2\n", ".csv", &[], "line 2: 3 cells, the header has 2");
        refused("time_s,a\n", ".csv", &[], "no rows after the header");
        refused("time_s,a\n0,1\n", ".csv", &[("a", "x")], "--map is for a Prometheus answer");
        refused(MATRIX, ".json", &[], "needs a map from series to metrics");
        refused(MATRIX, ".json", &[("a", "checkout_rps")], "matches 2 series");
        refused(MATRIX, ".json", &[("a", "nothing")], "no series matches nothing{}");
        refused(&MATRIX.replace("matrix", "vector"), ".json", &[("a", "x")], "a vector, not a matrix");
        refused(
            &MATRIX.replace(r#""0.25""#, "0.25"),
            ".json",
            &[("a", "checkout_p99_seconds")],
            "is not a [time, \"value\"] pair",
        );
    }

    #[test]
    fn selectors_read_a_name_labels_or_both() {
        let s = Selector::parse(r#"http_p99{route="/checkout", job="api"}"#).unwrap();
        assert_eq!(s.name.as_deref(), Some("http_p99"));
        assert_eq!(s.labels.len(), 2);
        assert_eq!(Selector::parse(r#"{__name__="x"}"#).unwrap().name.as_deref(), Some("x"));
        assert_eq!(Selector::parse(r#"{job="a"}"#).unwrap().name, None);
        assert!(Selector::parse("").is_err());
        assert!(Selector::parse(r#"x{__name__="y"}"#).unwrap_err().contains("two names"));
        assert!(Selector::parse(r#"x{job="a"} extra"#).is_err());
    }
}
