//! The page `stampede calibrate` writes: per compared metric, production against the
//! simulated mean and the replicas' 95% band over time, with its MAPE, bias,
//! correlation and share inside the band; above them, the fitted values with their
//! intervals. Self-contained and offline, like the run report. It takes plain data
//! (this crate sits below `optimize`, which calibrates).

use crate::blocks::escape;
use crate::chart::{hex, series_colour, Axis, Line, LinePlot, Point};
use plotters::style::RGBColor;

/// One compared metric over time.
#[derive(Clone, Debug)]
pub struct MetricPanel {
    pub name: String,
    /// Each interval's midpoint, seconds.
    pub times_s: Vec<f64>,
    pub observed: Vec<Option<f64>>,
    pub mean: Vec<Option<f64>>,
    pub low: Vec<Option<f64>>,
    pub high: Vec<Option<f64>>,
    /// MAPE, bias, correlation, share inside the band (fractions).
    pub figures: [Option<f64>; 4],
    /// Over the `--max-error` bound.
    pub disagrees: bool,
}

/// What the page shows.
#[derive(Clone, Debug)]
pub struct CalibratePage {
    pub scenario: String,
    pub observed_file: String,
    /// The command's summary lines (intervals, loads, verdict).
    pub notes: Vec<String>,
    /// (path, value, interval) of each fitted unknown, as text.
    pub fitted: Vec<(String, String, String)>,
    pub interval_method: String,
    pub replicas: u32,
    pub metrics: Vec<MetricPanel>,
}

fn figure_text(value: Option<f64>, signed: bool) -> String {
    match value {
        None => "—".into(),
        Some(v) if signed => format!("{:+.1}%", v * 100.0),
        Some(v) => format!("{:.1}%", v * 100.0),
    }
}

/// One metric's section: production and the simulated mean with its 95% band over
/// time (the plot, with its data as CSV), and the figures that judge them.
fn panel(metric: &MetricPanel, production: RGBColor, simulated: RGBColor) -> String {
    let observed: Vec<Point> = metric
        .times_s
        .iter()
        .zip(&metric.observed)
        .filter_map(|(&x, y)| Some(Point { x, y: (*y)?, interval: None }))
        .collect();
    let mean: Vec<Point> = (0..metric.times_s.len())
        .filter_map(|i| {
            let (y, lo, hi) = (metric.mean[i]?, metric.low[i]?, metric.high[i]?);
            Some(Point { x: metric.times_s[i], y, interval: Some((lo, hi)) })
        })
        .collect();
    let plot = LinePlot {
        title: metric.name.clone(),
        x: Axis::linear("simulated time (s)"),
        y: Axis::linear(metric.name.clone()),
        lines: vec![
            Line { label: "simulated mean, 95% band".into(), colour: simulated, points: mean, whiskers: false },
            Line { label: "production".into(), colour: production, points: observed, whiskers: false },
        ],
        windows: Vec::new(),
        markers: Vec::new(),
        bands: Vec::new(),
        size: (900, 320),
    };
    let cell = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
    let csv = std::iter::once("t_s,observed,mean,low,high".to_string())
        .chain((0..metric.times_s.len()).map(|i| {
            let row = [metric.observed[i], metric.mean[i], metric.low[i], metric.high[i]].map(cell);
            format!("{},{}", metric.times_s[i], row.join(","))
        }))
        .collect::<Vec<_>>()
        .join("\n");
    let figure = plot.render("calibration", csv, String::new());
    let [mape, bias, correlation, inside] = metric.figures;
    format!(
        "<section class=\"metric{}\" data-metric=\"{}\"><h3>{}</h3><p>MAPE {} · bias {} · correlation {} · \
         production inside the band {}{}</p>{}</section>\n",
        if metric.disagrees { " disagrees" } else { "" },
        escape(&metric.name),
        escape(&metric.name),
        figure_text(mape, false),
        figure_text(bias, true),
        correlation.map_or("—".into(), |c| format!("{c:.3}")),
        figure_text(inside, false),
        if metric.disagrees { " · <strong>over --max-error</strong>" } else { "" },
        figure.svg
    )
}

/// The fitted values with their intervals, or what `--check` means.
fn fitted_table(page: &CalibratePage) -> String {
    if page.fitted.is_empty() {
        return "<p>No unknowns fitted (<code>--check</code>): the scenario as it is.</p>".to_string();
    }
    let rows: String = page
        .fitted
        .iter()
        .map(|(path, value, interval)| {
            format!(
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                escape(path),
                escape(value),
                escape(interval)
            )
        })
        .collect();
    format!(
        "<table><tr><th>unknown</th><th>fitted</th><th>95% interval</th></tr>{rows}</table><p class=\"note\">{}</p>",
        escape(&page.interval_method)
    )
}

/// The page's HTML.
pub fn render(page: &CalibratePage) -> String {
    let (production, simulated) = (series_colour(1, 2), series_colour(0, 2));
    let panels: String = page.metrics.iter().map(|metric| panel(metric, production, simulated)).collect();
    let fitted = fitted_table(page);
    let notes: String = page.notes.iter().map(|n| format!("<li>{}</li>", escape(n))).collect();
    let legend = format!(
        "<p><span class=\"key\" style=\"background:{}\"></span> production <span class=\"key\" style=\"background:{}\"></span> \
         simulated mean, shaded: the {} replicas' 2.5–97.5% band (where one production interval should fall if the model is right)</p>",
        hex(production),
        hex(simulated),
        page.replicas
    );
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n\
         <meta name=\"generator\" content=\"stampede {}\">\n<title>stampede calibrate {}</title><style>body{{font:15px/1.45 system-ui,sans-serif;max-width:960px;margin:2em auto;padding:0 1em}}\
         table{{border-collapse:collapse}}td,th{{border-bottom:1px solid #ddd;padding:.3em .6em;text-align:left}}code{{font-size:13px}}\
         .key{{display:inline-block;width:1.6em;height:.5em;vertical-align:middle;margin:0 .3em 0 .8em}}.note{{color:#555;font-size:13px}}\
         .disagrees h3{{color:#b00}}</style></head>\n\
         <body><h1>stampede calibrate: {}</h1><p>production: <code>{}</code></p><ul>{notes}</ul>\
         <h2>Fitted values</h2>{fitted}<h2>Production against simulation</h2>{legend}{panels}</body></html>\n",
        env!("CARGO_PKG_VERSION"),
        escape(&page.scenario),
        escape(&page.scenario),
        escape(&page.observed_file),
    )
}
