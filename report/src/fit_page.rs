//! The page `stampede fit` writes: the data's CDF against each fitted family's, on a
//! log time axis, and the table of candidates with their Kolmogorov–Smirnov distances
//! and the TOML value of each. Self-contained and offline, like the run report.

use stampede_scenario::inputs::fit::{FitReport, DATA_QUANTILES};

use crate::blocks::escape;
use crate::chart::{series_colour, Axis, Line, LinePlot, Point, Scale};

/// Points per fitted CDF curve (each is a marker with its value on hover).
const CURVE_POINTS: usize = 40;
/// Data points drawn at most (a large sample's CDF is thinned evenly).
const DATA_POINTS: usize = 60;

/// The page for `report` of the data in `source` (its TOML value as given).
pub fn render(source: &str, report: &FitReport) -> String {
    let figure = cdf_plot(report).render("cdf", String::new(), String::new());
    let legend = crate::blocks::legend_html(&figure);
    let rows = candidate_rows(report);
    let data_row = data_quantile_cells(report);
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n\
         <meta name=\"generator\" content=\"stampede {}\">\n<title>stampede fit</title><style>body{{font:15px/1.45 system-ui,sans-serif;max-width:960px;margin:2em auto;padding:0 1em}}\
         table{{border-collapse:collapse}}td,th{{border-bottom:1px solid #ddd;padding:.3em .6em;text-align:left}}code{{font-size:13px}}</style></head>\n\
         <body><h1>stampede fit</h1><p><code>{}</code></p>\
         <p>{} observations · mean {:.4} s · scv {:.3}</p><table><tr>{data_row}</tr></table>\
         <h2>The data's CDF against each fit</h2><p>{legend}</p>{}\
         <h2>Candidates, best first</h2><p>KS: the Kolmogorov–Smirnov distance, the largest gap between the data's CDF and the fit's.</p>\
         <table><tr><th>family</th><th>KS</th><th>p50</th><th>p99</th><th>p99.9</th><th>value</th></tr>{rows}</table></body></html>\n",
        env!("CARGO_PKG_VERSION"),
        escape(source),
        report.count,
        report.mean,
        report.scv,
        figure.svg
    )
}

/// The data's empirical CDF (thinned to [`DATA_POINTS`]) and each candidate's fitted
/// CDF over the data's range, on a log axis.
fn cdf_plot(report: &FitReport) -> LinePlot {
    let positive: Vec<(f64, f64)> = report.cdf.iter().copied().filter(|(x, _)| *x > 0.0).collect();
    let step = (positive.len() / DATA_POINTS).max(1);
    let data: Vec<Point> = positive.iter().step_by(step).map(|(x, y)| Point { x: *x, y: *y, interval: None }).collect();
    let (low, high) = (positive.first().map_or(1e-6, |p| p.0), positive.last().map_or(1.0, |p| p.0));
    let xs: Vec<f64> =
        (0..CURVE_POINTS).map(|i| low * (high / low).powf(i as f64 / (CURVE_POINTS - 1) as f64)).collect();
    let n = report.candidates.len() + 1;
    let mut lines = vec![Line { label: "data".into(), colour: series_colour(0, n), points: data, whiskers: false }];
    for (i, candidate) in report.candidates.iter().enumerate() {
        let points = xs
            .iter()
            .map(|x| Point {
                x: *x,
                y: stampede_scenario::inputs::fit::cdf_of(&candidate.distribution, *x),
                interval: None,
            })
            .collect();
        lines.push(Line { label: candidate.family.into(), colour: series_colour(i + 1, n), points, whiskers: false });
    }
    LinePlot {
        title: "The data's CDF against each fit".into(),
        x: Axis { label: "seconds (log)".into(), scale: Scale::Log },
        y: Axis::linear("fraction at or below"),
        lines,
        windows: Vec::new(),
        markers: Vec::new(),
        bands: Vec::new(),
        size: (900, 480),
    }
}

/// One table row per candidate, best first: family, KS distance, three quantiles and
/// the TOML value to paste.
fn candidate_rows(report: &FitReport) -> String {
    report
        .candidates
        .iter()
        .map(|c| {
            format!(
                "<tr><td>{}</td><td>{:.4}</td><td>{:.4}</td><td>{:.4}</td><td>{:.4}</td><td><code>{}</code></td></tr>",
                c.family,
                c.ks,
                c.quantiles[0],
                c.quantiles[1],
                c.quantiles[2],
                escape(&c.toml)
            )
        })
        .collect()
}

/// The data's own quantiles as table cells: min, the percentiles, max.
fn data_quantile_cells(report: &FitReport) -> String {
    DATA_QUANTILES
        .iter()
        .zip(report.quantiles)
        .map(|(p, v)| {
            let name = if *p == 0.0 {
                "min".into()
            } else if *p == 1.0 {
                "max".into()
            } else {
                format!("p{}", p * 100.0)
            };
            format!("<td>{name}: {v:.4}</td>")
        })
        .collect()
}
