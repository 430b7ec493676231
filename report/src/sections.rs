//! The report's sections, built from a [`Folder`]: the comparison table and claims,
//! time series with fault windows and recovery, latency percentiles and CDFs, the
//! grid's shape (lines, heatmaps, small multiples, grouped bars), and whatever the
//! model's [`Presentation`] asks for. Each section is a list of [`Block`]s; `page`
//! turns them into HTML.

use plotters::style::RGBColor;
use stampede_run::summary::best;
use stampede_scenario::models::metrics::Direction;
use stampede_scenario::models::presentation::{Section as ModelSection, Segment};
use stampede_scenario::models::MetricDef;

use crate::blocks::{csv, escape, num, Block, Context, Section};
use crate::chart::{
    hex, series_colour, short, Axis, Band, BarPlot, BarSeries, BarValue, Figure, Heatmap, Line, LinePlot, Marker,
    Point, Scale, Window, SMALL, WIDE,
};
use crate::data;

/// The comparison table lists at most this many other metrics (a 1,000-service
/// graph has 46,000).
const MAX_OTHER_METRICS: usize = 2_000;

/// A chart of bars per part (success per entry point, utilisation per service) keeps
/// this many bars, the worst, when the graph is big.
const MAX_BARS: usize = 2 * crate::big::SHOWN;

/// A big graph's service map is drawn up to this many services.
const MAX_DRAWN_SERVICES: usize = 60;

/// The comparison table: headline metrics (then every metric, folded), grid points
/// side by side, `mean [lo, hi]`, the best per row marked by the metric's direction.
pub fn comparison(ctx: &Context) -> Section {
    let headlines = ctx.headlines();
    let mut blocks = vec![Block::Html(metric_table(ctx, &headlines, true))];
    let headline: std::collections::HashSet<&str> = headlines.iter().map(|h| h.name).collect();
    let rest: Vec<&MetricDef> = ctx.defs.iter().filter(|d| !headline.contains(d.name)).collect();
    if rest.len() > MAX_OTHER_METRICS {
        blocks.push(Block::Html(format!(
            "<p class=\"note\">{} other metrics (per service, call site and entry point): too many for a page — \
             summary.parquet has them all, and the Output chapter shows how to query it.</p>",
            rest.len()
        )));
    } else if !rest.is_empty() {
        blocks.push(Block::Details {
            summary: format!("All {} other metrics", rest.len()),
            blocks: vec![Block::Html(metric_table(ctx, &rest, false))],
        });
    }
    if let Some(verify) = &ctx.folder.verify {
        blocks.push(Block::Html(claims_table(ctx, verify)));
    }
    Section {
        id: "comparison".into(),
        title: "Comparison".into(),
        intro: "Each cell is the mean over replicas with its 95% Student-t interval. ★ marks the best value of a \
                row whose metric declares a direction (higher or lower is better)."
            .into(),
        blocks,
    }
}

fn metric_table(ctx: &Context, metrics: &[&MetricDef], with_latency: bool) -> String {
    let mut html = String::from("<div class=\"scroll\"><table class=\"compare\"><thead><tr><th>metric</th>");
    for point in &ctx.points {
        html.push_str(&format!(
            "<th title=\"{}\"><span class=\"swatch\" style=\"background:{}\"></span>{}</th>",
            escape(&point.long()),
            hex(point.colour),
            escape(&point.label)
        ));
    }
    html.push_str("</tr></thead><tbody>");
    for def in metrics {
        let values: Vec<Option<BarValue>> = ctx.points.iter().map(|p| ctx.value(p.index, def.name)).collect();
        // A mean over under half the replicas (the rest undefined) is never the best.
        let too_partial = |v: &BarValue| v.covered.is_some_and(|(k, n)| k * 2 < n);
        let means: Vec<f64> =
            values.iter().map(|v| v.filter(|v| !too_partial(v)).map_or(f64::NAN, |v| v.value)).collect();
        let top = best(&means, def.direction);
        let arrow = match def.direction {
            Direction::Higher => " <span class=\"dir\" title=\"higher is better\">↑</span>",
            Direction::Lower => " <span class=\"dir\" title=\"lower is better\">↓</span>",
            Direction::Neither => "",
        };
        html.push_str(&format!("<tr><th title=\"{}\">{}{arrow}</th>", escape(def.description), escape(def.name)));
        for value in values {
            html.push_str(&match value {
                Some(v) => metric_cell(&v, top.is_some_and(|t| t == v.value) && !too_partial(&v)),
                None => "<td>–</td>".into(),
            });
        }
        html.push_str("</tr>");
    }
    if with_latency {
        html.push_str(&latency_rows(ctx));
    }
    html.push_str("</tbody></table></div>");
    html
}

/// A metric's cell: its mean (starred when `is_best`), its interval, and how many
/// replicas defined it when not all did.
fn metric_cell(v: &BarValue, is_best: bool) -> String {
    let interval = v
        .interval
        .filter(|(lo, hi)| lo.is_finite() && hi.is_finite())
        .map(|(lo, hi)| format!("<span class=\"ci\">[{}, {}]</span>", short(lo), short(hi)))
        .unwrap_or_default();
    let covered = v.covered.map_or(String::new(), |(k, n)| {
        format!(
            " <span class=\"covered\" title=\"defined in {k} of {n} replicas; the mean is over those\">({k}/{n})</span>"
        )
    });
    format!(
        "<td{}>{}{} {interval}{covered}</td>",
        if is_best { " class=\"best\"" } else { "" },
        if is_best { "★ " } else { "" },
        short(v.value)
    )
}

/// The metric table's latency rows: the first request kind's p50 and p99 (answered,
/// then every request where the model splits them), then the share of each ending.
fn latency_rows(ctx: &Context) -> String {
    let mut html = String::new();
    if let Some(first) = ctx.folder.manifest.latencies.first() {
        let endings = endings_of(&ctx.folder.manifest.latencies, first);
        // The answered requests' quantiles, then (where the model splits them) every
        // request's, then the share of each ending.
        let mut shown = vec![(first.clone(), "requests answered in full")];
        if let Some((all, _)) = endings.iter().find(|(_, ending)| *ending == "all") {
            shown.push((all.clone(), "every request that ended: answered, degraded or failed"));
        }
        for (latency, column, name, what) in
            shown.iter().flat_map(|(l, what)| [("p50_s", "p50"), ("p99_s", "p99")].map(|(c, n)| (l, c, n, what)))
        {
            html.push_str(&format!(
                "<tr><th title=\"{what}: from the merged HdrHistogram of all replicas (within 0.1%), with its 95% sectioning interval over ten batches of replicas\">{} {name} (s) <span class=\"dir\">↓</span></th>",
                escape(latency.trim_end_matches("_s"))
            ));
            let table = &ctx.folder.histograms;
            let (Ok(metrics), Ok(values)) = (table.strings("metric"), table.numbers(column)) else { continue };
            // The sectioning interval over batches of replicas (absent in folders
            // written before it existed).
            let bounds = (table.numbers(&format!("{column}_ci_lo")), table.numbers(&format!("{column}_ci_hi")));
            for point in &ctx.points {
                let row = data::rows_of(table, point.index).into_iter().find(|&r| &metrics[r] == latency);
                let interval = match (&bounds, row) {
                    ((Ok(lo), Ok(hi)), Some(r)) if lo[r].is_finite() && hi[r].is_finite() => {
                        format!(" <span class=\"ci\">[{}, {}]</span>", short(lo[r]), short(hi[r]))
                    }
                    _ => String::new(),
                };
                html.push_str(&format!("<td>{}{interval}</td>", row.map_or("–".into(), |r| short(values[r]))));
            }
            html.push_str("</tr>");
        }
        html.push_str(&ending_shares(ctx, &endings));
    }
    html
}

/// The latencies that split `first`'s request kind by ending, as (histogram, ending):
/// `response_s` is `ok`, `response_failed_s` is `failed`, `response_all_s` is `all`
/// (empty when the model does not split it).
fn endings_of(latencies: &[String], first: &str) -> Vec<(String, &'static str)> {
    let base = request_kind(first);
    let mut endings = vec![(first.to_string(), "ok")];
    for ending in ["degraded", "failed", "all"] {
        let name = format!("{base}_{ending}_s");
        if latencies.contains(&name) {
            endings.push((name, ending));
        }
    }
    if endings.len() == 1 {
        endings.clear();
    }
    endings
}

/// The request kind a latency histogram counts: its name without its ending and `_s`
/// (`response_s`, `response_failed_s` and `response_all_s` are all `response`).
fn request_kind(latency: &str) -> &str {
    ["_failed_s", "_degraded_s", "_all_s"]
        .iter()
        .find_map(|ending| latency.strip_suffix(ending))
        .unwrap_or_else(|| latency.trim_end_matches("_s"))
}

/// A row of each ending's share of the requests that ended (from the histograms'
/// counts), "ok / degraded / failed" per grid point; empty without endings.
fn ending_shares(ctx: &Context, endings: &[(String, &'static str)]) -> String {
    let table = &ctx.folder.histograms;
    let (Ok(metrics), Ok(counts)) = (table.strings("metric"), table.numbers("count")) else { return String::new() };
    let Some((all, _)) = endings.iter().find(|(_, ending)| *ending == "all") else { return String::new() };
    let parts: Vec<&(String, &str)> = endings.iter().filter(|(_, ending)| *ending != "all").collect();
    let names: Vec<&str> = parts.iter().map(|(_, ending)| *ending).collect();
    let mut html = format!(
        "<tr><th title=\"the share of the requests that ended, by how they ended (counted in the histograms)\">{} share {}</th>",
        escape(all.trim_end_matches("_all_s")),
        names.join(" / ")
    );
    for point in &ctx.points {
        let count = |latency: &str| {
            data::rows_of(table, point.index).into_iter().find(|&r| metrics[r] == latency).map(|r| counts[r])
        };
        let cell = match count(all) {
            Some(total) if total > 0.0 => parts
                .iter()
                .map(|(latency, _)| format!("{:.3}", count(latency).unwrap_or(0.0) / total))
                .collect::<Vec<_>>()
                .join(" / "),
            _ => "–".into(),
        };
        html.push_str(&format!("<td>{cell}</td>"));
    }
    html + "</tr>"
}

/// A claim's measured statistic: a fraction as a percentage with its count.
fn measured_cell(check: &serde_json::Value) -> String {
    let number = |key: &str| check.get(key).and_then(|v| v.as_f64());
    match (number("fraction"), number("successes"), number("replicas")) {
        (Some(fraction), Some(successes), Some(replicas)) => {
            format!("{:.1}% ({successes} of {replicas} replicas)", 100.0 * fraction)
        }
        _ => number("value").map_or("–".into(), short),
    }
}

/// The claimed statistic's own interval and how it was made (older verify.json files
/// have only the mean's).
fn interval_cell(check: &serde_json::Value) -> String {
    let number = |key: &str| check.get(key).and_then(|v| v.as_f64());
    let end = |v: Option<f64>| v.map_or("unbounded".to_string(), short);
    let percent = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{:.1}%", 100.0 * v));
    match check.get("interval").and_then(|k| k.as_str()) {
        Some("wilson") => format!("[{}, {}] Wilson", percent(number("interval_lo")), percent(number("interval_hi"))),
        Some("order_statistic") => {
            format!("[{}, {}] order statistics", end(number("interval_lo")), end(number("interval_hi")))
        }
        _ => format!("mean {} [{}, {}]", end(number("mean")), end(number("ci_lo")), end(number("ci_hi"))),
    }
}

fn claims_table(ctx: &Context, verify: &serde_json::Value) -> String {
    let checks = verify.get("checks").and_then(|c| c.as_array()).cloned().unwrap_or_default();
    let passed = checks.iter().filter(|c| c.get("passed").and_then(|p| p.as_bool()) == Some(true)).count();
    let mut html = format!(
        "<h3 id=\"claims\">Claims: {passed} of {} passed</h3><div class=\"scroll\"><table class=\"claims\"><thead><tr>\
         <th>result</th><th>grid point</th><th>metric</th><th>statistic</th><th>bound</th><th>measured</th>\
         <th>its 95% interval</th><th>note</th></tr></thead><tbody>",
        checks.len()
    );
    let text = |c: &serde_json::Value, key: &str| {
        c.get(key).map(|v| v.to_string().trim_matches('"').to_string()).unwrap_or_default()
    };
    for check in &checks {
        let ok = check.get("passed").and_then(|p| p.as_bool()) == Some(true);
        let point = check.get("grid_point").and_then(|p| p.as_u64()).unwrap_or(0) as usize;
        let label = ctx.points.get(point).map_or_else(|| format!("#{point}"), |p| p.label.clone());
        let bound = ["at_least", "at_most", "above", "below", "between", "replica_at_most", "replica_at_least"]
            .iter()
            .filter_map(|key| check.get(*key).map(|v| format!("{} {}", key.replace('_', " "), v)))
            .collect::<Vec<_>>()
            .join("; ");
        html.push_str(&format!(
            "<tr class=\"{}\"><td><b>{}</b></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            if ok { "pass" } else { "fail" },
            if ok { "PASS" } else { "FAIL" },
            escape(&label),
            escape(&text(check, "metric")),
            escape(&text(check, "statistic")),
            escape(&bound),
            measured_cell(check),
            interval_cell(check),
            escape(&text(check, "note")),
        ));
    }
    html.push_str("</tbody></table></div>");
    let skipped = verify.get("skipped").and_then(|s| s.as_array()).map_or(0, Vec::len);
    if skipped > 0 {
        html.push_str(&format!(
            "<p class=\"note\">{skipped} claim(s) did not apply to this run's grid or replicas.</p>"
        ));
    }
    html
}

/// Points per line in time-series plots: enough for the eye, few enough that a wide
/// grid stays under the report's size budget.
fn series_resolution(points: usize) -> usize {
    (2400 / points.max(1)).clamp(60, 400)
}

/// Time series: per grid point the mean and its band, fault windows shaded, the
/// recovery band and each point's mean recovery instant marked.
pub fn time_series(ctx: &Context) -> Option<Section> {
    ctx.folder.timeseries.as_ref()?;
    let claimed = part_series(ctx);
    let mut blocks = Vec::new();
    // A big graph draws the whole model's series and those of the entry points it shows.
    let entries: Option<std::collections::HashSet<String>> =
        ctx.focus.as_ref().map(|focus| focus.entries.iter().cloned().collect());
    let shown = |name: &str| entries.as_ref().is_none_or(|entries| crate::big::Focus::wants(entries, name));
    for series in ctx.folder.manifest.series.iter().filter(|s| !claimed.contains(&s.as_str()) && shown(s)) {
        let (figure, judged) = series_figure(ctx, series)?;
        // The series recovery is judged on comes first; every chart is full width, since
        // time series need the width to be read.
        blocks.insert(if judged { 0 } else { blocks.len() }, Block::Figure(figure));
    }
    // The first request kind's p99 and failed share full width; the others' p99 as
    // small multiples (timeseries.parquet has them all).
    let mut more = Vec::new();
    let kinds: Vec<&String> = match &ctx.focus {
        Some(focus) => focus.entries.iter().filter(|e| ctx.folder.manifest.timed.contains(e)).collect(),
        None => ctx.folder.manifest.timed.iter().collect(),
    };
    for (k, kind) in kinds.into_iter().enumerate() {
        let charts = if k == 0 { 2 } else { 1 };
        let figures = latency_over_time(ctx, kind, charts, if k == 0 { WIDE } else { SMALL });
        if k == 0 {
            blocks.extend(figures.into_iter().map(Block::Figure));
        } else {
            more.extend(figures);
        }
    }
    blocks.extend(collapsed(format!("p99 over time of {} more request kinds", more.len()), more));
    if let Some(focus) = &ctx.focus {
        blocks.push(Block::Html(format!(
            "<p class=\"note\">{} entry points: the {} that answered the most requests less than in full are drawn; \
             timeseries.parquet has every one.</p>",
            ctx.folder.manifest.timed.len(),
            focus.entries.len()
        )));
    }
    Some(Section {
        id: "timeseries".into(),
        title: "Over time".into(),
        intro: "What happened during the run, per grid point: the mean across replicas of each bucket and its 95% \
                band; then each request kind's latency and how its requests ended, per latency window."
            .into(),
        blocks,
    })
}

/// A timed request kind's p99 over time (every request that ended in each window,
/// failures counted, with its 95% band) and the share of its requests that failed,
/// every overlaid grid point a line, fault windows shaded.
fn latency_over_time(ctx: &Context, kind: &str, charts: usize, size: (u32, u32)) -> Vec<Figure> {
    let Some(table) = ctx.folder.timeseries.as_ref() else { return Vec::new() };
    let resolution = series_resolution(ctx.overlaid().count());
    let windows = fault_windows(ctx);
    let p99 = crate::data::window_quantile_column(table, kind, "p99_all");
    let failed = format!("{kind}.failed_share");
    let shown = charts;
    let charts = [
        (
            [p99.clone(), format!("{p99}_ci_lo"), format!("{p99}_ci_hi")],
            format!("{kind}: p99 latency of every request, over time"),
            "p99 latency (s)",
            format!(
                "Per latency window (latency_window_t_s in timeseries.parquet), the p99 of every request that ended \
                 in it — answered, degraded or failed (a failure counts the time until its client learned it) — \
                 pooled over replicas, with its 95% sectioning interval over ten batches of replicas; within 3.1% \
                 (one bucket) of the pooled sample's own. timeseries.parquet also has p50, the answered-only \
                 quantiles ({kind}.p99_s) and ended_rps."
            ),
        ),
        (
            [failed.clone(), failed.clone(), failed.clone()],
            format!("{kind}: share of requests that failed, over time"),
            "failed ÷ ended",
            "Per latency window, failed requests ÷ requests that ended in it, pooled over replicas.".into(),
        ),
    ];
    let mut figures = Vec::new();
    for (columns, title, y_label, note) in charts.into_iter().take(shown) {
        let mut lines = Vec::new();
        let mut rows = Vec::new();
        for point in ctx.overlaid() {
            let columns = [columns[0].as_str(), &columns[1], &columns[2]];
            let values = data::time_series_of(table, columns, point.index, resolution, Some("latency_window_t_s"));
            for p in &values {
                let (lo, hi) = p.interval.unwrap_or((f64::NAN, f64::NAN));
                rows.push(vec![point.index.to_string(), num(p.x), num(p.y), num(lo), num(hi)]);
            }
            lines.push(Line { label: point.long(), colour: point.colour, points: values, whiskers: false });
        }
        if lines.iter().all(|l| l.points.is_empty()) {
            continue;
        }
        let plot = LinePlot {
            title,
            x: Axis::linear("time (s)"),
            y: Axis::linear(y_label),
            lines,
            windows: windows.clone(),
            markers: vec![],
            bands: vec![],
            size,
        };
        figures.push(plot.render(
            "latency-over-time",
            csv(&["grid_point", "t_s", "value", "ci_lo", "ci_hi"], rows),
            note,
        ));
    }
    figures
}

/// `figures` as small multiples in a collapsed block (none without figures).
fn collapsed(summary: String, figures: Vec<Figure>) -> Option<Block> {
    (!figures.is_empty()).then(|| Block::Details { summary, blocks: vec![Block::Multiples(figures)] })
}

/// The run's fault windows, as a chart shades them.
/// The fault windows to shade: the scenario's, and those grid points set for
/// themselves (a faults axis), each once.
fn fault_windows(ctx: &Context) -> Vec<Window> {
    let mut windows: Vec<Window> = Vec::new();
    let own = ctx.overlaid().flat_map(|p| p.windows.iter().flatten());
    for w in ctx.presentation.windows.iter().chain(own) {
        if !windows.iter().any(|seen| seen.from == w.start_s && seen.to == w.end_s && seen.label == w.label) {
            windows.push(Window { label: w.label.clone(), from: w.start_s, to: w.end_s });
        }
    }
    windows
}

/// Grid point `point`'s fault windows: its own, or the scenario's.
fn point_windows<'c>(
    ctx: &'c Context,
    point: &'c crate::blocks::PointInfo,
) -> &'c [stampede_scenario::models::presentation::Window] {
    match &point.windows {
        Some(own) if !own.is_empty() => own,
        _ => &ctx.presentation.windows,
    }
}

/// Series a [`ModelSection::Part`] draws in its own section.
fn part_series<'c>(ctx: &'c Context) -> Vec<&'c str> {
    ctx.presentation
        .sections
        .iter()
        .flat_map(|section| match section {
            ModelSection::Part { series, .. } => series.iter().map(String::as_str).collect(),
            _ => Vec::new(),
        })
        .collect()
}

/// One series over time, every overlaid grid point a line, with the fault windows and,
/// when recovery is judged on it, the band and each point's recovery instant (`true`).
fn series_figure(ctx: &Context, series: &str) -> Option<(Figure, bool)> {
    let table = ctx.folder.timeseries.as_ref()?;
    let resolution = series_resolution(ctx.overlaid().count());
    let windows = fault_windows(ctx);
    let mut lines = Vec::new();
    let mut rows = Vec::new();
    for point in ctx.overlaid() {
        let values = data::time_series(table, series, point.index, resolution);
        for p in &values {
            let (lo, hi) = p.interval.unwrap_or((f64::NAN, f64::NAN));
            rows.push(vec![point.index.to_string(), num(p.x), num(p.y), num(lo), num(hi)]);
        }
        lines.push(Line { label: point.long(), colour: point.colour, points: values, whiskers: false });
    }
    let mut note = format!(
        "Mean over replicas per bucket with its 95% band{}. Drawn at up to {resolution} points per line \
         (neighbouring buckets merged into their envelope); timeseries.parquet has every bucket.",
        if windows.is_empty() { "" } else { "; grey: fault windows, labelled above the plot" }
    );
    let recovery = ctx.presentation.recovery.as_ref().filter(|r| r.series == series);
    let (bands, markers) = match recovery {
        Some(recovery) => recovery_marks(ctx, recovery, &lines, &mut note),
        None => (Vec::new(), Vec::new()),
    };
    let plot = LinePlot {
        title: format!("{} over time", series.replace('_', " ")),
        x: Axis::linear("time (s)"),
        y: Axis::linear(series_unit(series)),
        lines,
        windows: windows.clone(),
        markers,
        bands,
        size: WIDE,
    };
    let figure = plot.render("timeseries", csv(&["grid_point", "t_s", "mean", "ci_lo", "ci_hi"], rows), note);
    Some((figure, recovery.is_some()))
}

/// A recovery series' marks: the first point's recovery band (its baseline between
/// warm-up and the first fault, scaled), each point's mean recovery instant with its
/// interval; what they show is added to `note`.
fn recovery_marks(
    ctx: &Context,
    recovery: &stampede_scenario::models::presentation::Recovery,
    lines: &[Line],
    note: &mut String,
) -> (Vec<Band>, Vec<Marker>) {
    // Per point: a faults axis gives each its own windows (recovery counts from its last).
    let last_fault_end = |p| point_windows(ctx, p).iter().map(|w| w.end_s).fold(f64::NEG_INFINITY, f64::max);
    let first_fault = |p| point_windows(ctx, p).iter().map(|w| w.start_s).fold(f64::INFINITY, f64::min);
    let (mut bands, mut markers) = (Vec::new(), Vec::new());
    let mut never = Vec::new();
    for (point, line) in ctx.overlaid().zip(lines) {
        let (first_fault, last_fault_end) = (first_fault(point), last_fault_end(point));
        let before: Vec<f64> =
            line.points.iter().filter(|p| p.x >= recovery.warmup_s && p.x < first_fault).map(|p| p.y).collect();
        if !before.is_empty() && point.index == 0 {
            let baseline = before.iter().sum::<f64>() / before.len() as f64;
            bands.push(Band {
                label: format!(
                    "recovery band: baseline {} × {} + {}",
                    short(baseline),
                    recovery.band_factor,
                    recovery.band_offset
                ),
                colour: RGBColor(0x00, 0x9E, 0x73),
                from: 0.0,
                to: baseline * recovery.band_factor + recovery.band_offset,
            });
        }
        match ctx.value(point.index, recovery.metric).filter(|v| v.value.is_finite() && last_fault_end.is_finite()) {
            Some(v) => markers.push(Marker {
                label: format!(
                    "{}: recovered {} s after the last fault ended (mean{})",
                    point.label,
                    short(v.value),
                    v.interval.map(|(lo, hi)| format!(", 95% [{}, {}]", short(lo), short(hi))).unwrap_or_default()
                ),
                colour: point.colour,
                x: last_fault_end + v.value,
                interval: v.interval.map(|(lo, hi)| (last_fault_end + lo, last_fault_end + hi)),
            }),
            None => never.push(point.label.clone()),
        }
    }
    note.push_str(&format!(
        " Vertical lines: each grid point's mean recovery instant (the end of the last fault plus the mean of \
         {}), with its 95% interval at the top. The band is the first point's baseline (the mean between warm-up \
         and the first fault) × {} + {}; each replica is judged against its own.",
        recovery.metric, recovery.band_factor, recovery.band_offset
    ));
    if !never.is_empty() {
        note.push_str(&format!(" Never recovered on average: {}.", never.join(", ")));
    }
    (bands, markers)
}

fn series_unit(series: &str) -> String {
    if series.ends_with("_rps") {
        format!("{} (per second)", series.trim_end_matches("_rps").replace('_', " "))
    } else {
        format!("{} (mean level)", series.replace('_', " "))
    }
}

/// Latency: per histogram, the percentile curve of every grid point (and, for the
/// first histogram, the CDF).
pub fn latency(ctx: &Context) -> Option<Section> {
    let latencies = &ctx.folder.manifest.latencies;
    if latencies.is_empty() {
        return None;
    }
    let mut blocks = Vec::new();
    let mut more = Vec::new();
    // The first request kind's answered and all-requests curves are drawn wide, one
    // above the other; the rest go in a collapsed grid.
    let first_all = format!("{}_all_s", request_kind(&latencies[0]));
    for (l, latency) in latencies.iter().enumerate() {
        // A request kind split by ending is drawn for the first kind only (answered and
        // every request); the others' curves stay in histograms.parquet, and their p99
        // over time is in "Over time": the page keeps to what a reader compares first,
        // under its size budget.
        let ending_split = latencies.contains(&format!("{}_all_s", request_kind(latency)));
        if l > 0 && *latency != first_all && ending_split {
            continue;
        }
        let mut curves = Vec::new();
        let mut cdfs = Vec::new();
        let mut rows = Vec::new();
        let mut cdf_rows = Vec::new();
        for point in ctx.overlaid() {
            let Some(histogram) = data::histogram(&ctx.folder.histograms, point.index, latency) else { continue };
            let curve = data::percentile_curve(&histogram);
            rows.extend(curve.iter().map(|p| vec![point.index.to_string(), num(1.0 - 1.0 / p.x), num(p.y)]));
            curves.push(Line { label: point.long(), colour: point.colour, points: curve, whiskers: false });
            if l == 0 {
                let cdf = data::cdf(&histogram);
                cdf_rows.extend(cdf.iter().map(|p| vec![point.index.to_string(), num(p.x), num(p.y)]));
                cdfs.push(Line { label: point.long(), colour: point.colour, points: cdf, whiskers: false });
            }
        }
        if curves.is_empty() {
            continue;
        }
        let name = latency.trim_end_matches("_s").replace('_', " ");
        let size = if l == 0 || *latency == first_all { WIDE } else { SMALL };
        let (figure, log_scale) = percentile_figure(&name, curves, rows, size);
        if l == 0 {
            blocks.push(Block::Figure(figure));
            blocks.push(Block::Figure(cdf_figure(&name, cdfs, cdf_rows, log_scale)));
        } else if *latency == first_all {
            blocks.push(Block::Figure(figure));
        } else {
            more.push(figure);
        }
    }
    blocks.extend(collapsed(format!("{} more latency histograms", more.len()), more));
    Some(Section {
        id: "latency".into(),
        title: "Latency".into(),
        intro: ctx.intro("Percentile curves and the CDF from the HDR histograms, one line per grid point."),
        blocks,
    })
}

/// A histogram's percentile curves, one per grid point (`rows` their CSV), its y
/// axis logarithmic when the values span more than 20× (returned with the figure).
fn percentile_figure(name: &str, curves: Vec<Line>, rows: Vec<Vec<String>>, size: (u32, u32)) -> (Figure, bool) {
    let ys: Vec<f64> = curves.iter().flat_map(|c| c.points.iter().map(|p| p.y)).filter(|y| *y > 0.0).collect();
    let spread = ys.iter().cloned().fold(0.0, f64::max) / ys.iter().cloned().fold(f64::INFINITY, f64::min);
    let y_scale = if spread > 20.0 { Scale::Log } else { Scale::Linear };
    let plot = LinePlot {
        title: format!("{name}: latency by percentile"),
        x: Axis { label: "percentile".into(), scale: Scale::Percentile },
        y: Axis { label: "latency (s)".into(), scale: y_scale },
        lines: curves,
        windows: vec![],
        markers: vec![],
        bands: vec![],
        size,
    };
    let note = format!(
        "From the merged HdrHistogram of every replica (3 significant digits); x is 1/(1−q) on a log scale, so p90, \
         p99 and p99.9 are evenly spaced{}.",
        if y_scale == Scale::Log { "; y is logarithmic because the values span more than 20×" } else { "" }
    );
    (plot.render("percentiles", csv(&["grid_point", "quantile", "latency_s"], rows), note), spread > 20.0)
}

/// The first histogram's CDFs, one per grid point (`rows` their CSV), on a log x axis
/// when its percentile curves were.
fn cdf_figure(name: &str, cdfs: Vec<Line>, rows: Vec<Vec<String>>, log_scale: bool) -> Figure {
    let cdf = LinePlot {
        title: format!("{name}: cumulative distribution"),
        x: Axis { label: "latency (s)".into(), scale: if log_scale { Scale::Log } else { Scale::Linear } },
        y: Axis::linear("share of requests at or below"),
        lines: cdfs,
        windows: vec![],
        markers: vec![],
        bands: vec![],
        size: WIDE,
    };
    cdf.render(
        "cdf",
        csv(&["grid_point", "latency_s", "share"], rows),
        "The share of requests answered within each latency, from the same histograms; from the 1st \
                 percentile on, so that the very fastest answers do not stretch the axis over empty decades."
            .into(),
    )
}

/// A grid axis as the report sees it: numeric values (a line or heatmap axis) or labels.
struct GridAxis {
    path: String,
    labels: Vec<String>,
    numbers: Option<Vec<f64>>,
    values: Vec<toml::Value>,
}

fn axis_label(value: &toml::Value) -> String {
    if let Some(label) = value.get("label").and_then(|l| l.as_str()) {
        return label.to_string();
    }
    match value {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn grid_axes(ctx: &Context) -> Vec<GridAxis> {
    let Ok(scenario) = &ctx.folder.scenario else { return Vec::new() };
    scenario
        .grid
        .iter()
        .map(|axis| {
            let numbers: Option<Vec<f64>> =
                axis.values.iter().map(|v| v.as_float().or_else(|| v.as_integer().map(|i| i as f64))).collect();
            GridAxis {
                path: axis.path.clone(),
                labels: axis.values.iter().map(axis_label).collect(),
                numbers,
                values: axis.values.clone(),
            }
        })
        .collect()
}

/// Each point's value index on every axis.
fn coordinates(ctx: &Context, axes: &[GridAxis]) -> Vec<Vec<usize>> {
    ctx.points
        .iter()
        .map(|point| {
            axes.iter()
                .map(|axis| {
                    let value = point.params.iter().find(|(path, _)| *path == axis.path).map(|(_, v)| v);
                    value
                        .and_then(|v| {
                            // A case axis lists tables; a point carries its case's label.
                            axis.values.iter().position(|a| a == v || axis_label(a) == axis_label(v))
                        })
                        .unwrap_or(0)
                })
                .collect()
        })
        .collect()
}

/// The grid as the report sees it: its axes and each point's position on them.
struct GridShape {
    axes: Vec<GridAxis>,
    /// `coords[point][axis]`: the index of the point's value on that axis.
    coords: Vec<Vec<usize>>,
}

impl GridShape {
    /// Every axis but `skip`.
    fn others(&self, skip: &[usize]) -> Vec<usize> {
        (0..self.axes.len()).filter(|a| !skip.contains(a)).collect()
    }

    /// `servers=2 budget=0.1`: where `point` sits on the axes `which`.
    fn combo_label(&self, point: usize, which: &[usize]) -> String {
        which
            .iter()
            .map(|&a| format!("{}={}", short_path(&self.axes[a].path), self.axes[a].labels[self.coords[point][a]]))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The grid's shape drawn: one numeric axis → lines with interval bars; two or more →
/// heatmaps (small multiples over the rest); only labelled axes → grouped bars.
pub fn grid(ctx: &Context) -> Option<Section> {
    let axes = grid_axes(ctx);
    if axes.is_empty() || ctx.points.len() < 2 {
        return None;
    }
    let coords = coordinates(ctx, &axes);
    let shape = GridShape { axes, coords };
    let numeric: Vec<usize> =
        (0..shape.axes.len()).filter(|&a| shape.axes[a].numbers.as_ref().is_some_and(|n| n.len() > 1)).collect();
    let (metrics, empty) = ctx.drawable_headlines();
    let (blocks, mut intro) = match numeric[..] {
        [ax, ay, ..] => grid_heatmaps(ctx, &metrics, &shape, ax, ay),
        [ax] => grid_lines(ctx, &metrics, &shape, ax),
        [] => grid_bars(ctx, &metrics, &shape),
    };
    if !empty.is_empty() {
        intro.push_str(&format!(
            " Not drawn, having no value at any grid point (a recovery time where no replica recovered): {}.",
            empty.join(", ")
        ));
    }
    Some(Section { id: "grid".into(), title: "The grid".into(), intro, blocks })
}

/// Two numeric axes `ax` × `ay`: a heatmap per headline metric (chosen in the page),
/// small multiples over the other axes, one colour scale per metric.
fn grid_heatmaps(
    ctx: &Context,
    metrics: &[&MetricDef],
    shape: &GridShape,
    ax: usize,
    ay: usize,
) -> (Vec<Block>, String) {
    let rest = shape.others(&[ax, ay]);
    let mut groups: Vec<String> = Vec::new();
    for p in 0..ctx.points.len() {
        let g = shape.combo_label(p, &rest);
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    let options = metrics
        .iter()
        .map(|def| {
            let all = ctx.points.iter().filter_map(|p| ctx.value(p.index, def.name)).map(|v| v.value);
            let range = all
                .filter(|v| v.is_finite())
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
            let range = (range.0 <= range.1).then_some(range);
            let figures = groups
                .iter()
                .map(|group| heatmap(ctx, def, shape, (ax, ay), (&rest, group), (range, groups.len() > 1)))
                .collect();
            (def.name.to_string(), figures)
        })
        .collect();
    let intro = if rest.is_empty() {
        "Two numeric axes: a heatmap of the chosen metric with the cell values.".to_string()
    } else {
        format!(
            "Heatmaps over {} × {}, one per value of {} (small multiples); choose the metric.",
            shape.axes[ax].path,
            shape.axes[ay].path,
            rest.iter().map(|&a| shape.axes[a].path.as_str()).collect::<Vec<_>>().join(", ")
        )
    };
    (vec![Block::Choice { label: "metric".into(), options }], intro)
}

/// Metric `def`'s heatmap over axes (`ax`, `ay`) for the grid points whose other
/// axes (`rest`) read `group`: its cells' means (hover for the interval), the best
/// starred, on the colour scale `range` shared by every map of the metric; small
/// when it is one of `many`.
fn heatmap(
    ctx: &Context,
    def: &MetricDef,
    shape: &GridShape,
    (ax, ay): (usize, usize),
    (rest, group): (&[usize], &str),
    (range, many): (Option<(f64, f64)>, bool),
) -> Figure {
    let mut cells = vec![vec![None; shape.axes[ax].labels.len()]; shape.axes[ay].labels.len()];
    let mut rows = Vec::new();
    for (p, point) in ctx.points.iter().enumerate() {
        if shape.combo_label(p, rest) != group {
            continue;
        }
        let value = ctx.value(point.index, def.name);
        cells[shape.coords[p][ay]][shape.coords[p][ax]] = value;
        if let Some(v) = value {
            let (lo, hi) = v.interval.unwrap_or((f64::NAN, f64::NAN));
            rows.push(vec![
                point.index.to_string(),
                shape.axes[ax].labels[shape.coords[p][ax]].clone(),
                shape.axes[ay].labels[shape.coords[p][ay]].clone(),
                num(v.value),
                num(lo),
                num(hi),
            ]);
        }
    }
    let heatmap = Heatmap {
        title: if group.is_empty() { def.name.to_string() } else { format!("{} at {group}", def.name) },
        x_label: shape.axes[ax].path.clone(),
        y_label: shape.axes[ay].path.clone(),
        x_values: shape.axes[ax].labels.clone(),
        y_values: shape.axes[ay].labels.clone(),
        cells,
        higher_is_better: match def.direction {
            Direction::Higher => Some(true),
            Direction::Lower => Some(false),
            Direction::Neither => None,
        },
        range,
        size: if many { SMALL } else { WIDE },
    };
    let header = ["grid_point", shape.axes[ax].path.as_str(), shape.axes[ay].path.as_str(), "mean", "ci_lo", "ci_hi"];
    heatmap.render(
        "heatmap",
        csv(&header, rows),
        format!(
            "{}: mean per cell (hover for the 95% interval); ★ marks the best; one colour scale for all maps of this \
             metric.",
            def.description
        ),
    )
}

/// One numeric axis `ax`: each headline metric as lines over it with interval bars,
/// one line per combination of the other axes.
fn grid_lines(ctx: &Context, metrics: &[&MetricDef], shape: &GridShape, ax: usize) -> (Vec<Block>, String) {
    let rest = shape.others(&[ax]);
    let figures = metrics
        .iter()
        .map(|def| {
            let mut groups: Vec<(String, Vec<Point>)> = Vec::new();
            let mut rows = Vec::new();
            for (p, point) in ctx.points.iter().enumerate() {
                let Some(v) = ctx.value(point.index, def.name) else { continue };
                let x = shape.axes[ax].numbers.as_ref().expect("numeric axis")[shape.coords[p][ax]];
                let group = shape.combo_label(p, &rest);
                let (lo, hi) = v.interval.unwrap_or((f64::NAN, f64::NAN));
                rows.push(vec![point.index.to_string(), group.clone(), num(x), num(v.value), num(lo), num(hi)]);
                let entry = match groups.iter_mut().position(|(g, _)| *g == group) {
                    Some(i) => &mut groups[i].1,
                    None => {
                        groups.push((group, Vec::new()));
                        &mut groups.last_mut().expect("just pushed").1
                    }
                };
                entry.push(Point { x, y: v.value, interval: v.interval });
            }
            let n = groups.len();
            let lines = groups
                .into_iter()
                .enumerate()
                .map(|(i, (label, mut points))| {
                    points.sort_by(|a, b| a.x.total_cmp(&b.x));
                    Line {
                        label: if label.is_empty() { def.name.to_string() } else { label },
                        colour: series_colour(i, n),
                        points,
                        whiskers: true,
                    }
                })
                .collect();
            let plot = LinePlot {
                title: format!("{} over {}", def.name, shape.axes[ax].path),
                x: Axis::linear(shape.axes[ax].path.clone()),
                y: Axis::linear(def.name),
                lines,
                windows: vec![],
                markers: vec![],
                bands: vec![],
                size: SMALL,
            };
            plot.render(
                "grid-line",
                csv(&["grid_point", "series", shape.axes[ax].path.as_str(), "mean", "ci_lo", "ci_hi"], rows),
                format!("{}; bars: 95% intervals.", def.description),
            )
        })
        .collect();
    (
        vec![Block::Multiples(figures)],
        format!("Each headline metric over {}, with 95% interval bars.", shape.axes[ax].path),
    )
}

/// Only labelled axes (cases): each headline metric as bars with 95% whiskers, grouped
/// by the other axes.
fn grid_bars(ctx: &Context, metrics: &[&MetricDef], shape: &GridShape) -> (Vec<Block>, String) {
    let figures = metrics.iter().map(|def| case_bars(ctx, def, shape)).collect();
    (vec![Block::Multiples(figures)], "Labelled cases: each headline metric as bars with 95% whiskers.".to_string())
}

/// One metric's bars: a category per value of the grid's first axis, a series per
/// combination of the others (a bar in its point's colour when there is one axis),
/// with the figure's CSV of (point, category, series, mean, interval).
fn case_bars(ctx: &Context, def: &MetricDef, shape: &GridShape) -> Figure {
    let first = 0;
    let rest = shape.others(&[first]);
    let mut groups: Vec<String> = Vec::new();
    for p in 0..ctx.points.len() {
        let g = shape.combo_label(p, &rest);
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    let categories = shape.axes[first].labels.clone();
    let n = groups.len();
    let mut rows = Vec::new();
    let series = groups
        .iter()
        .enumerate()
        .map(|(g, group)| {
            let mut values = vec![None; categories.len()];
            for (p, point) in ctx.points.iter().enumerate() {
                if shape.combo_label(p, &rest) == *group {
                    let value = ctx.value(point.index, def.name);
                    values[shape.coords[p][first]] = value;
                    if let Some(v) = value {
                        let (lo, hi) = v.interval.unwrap_or((f64::NAN, f64::NAN));
                        rows.push(vec![
                            point.index.to_string(),
                            categories[shape.coords[p][first]].clone(),
                            group.clone(),
                            num(v.value),
                            num(lo),
                            num(hi),
                        ]);
                    }
                }
            }
            BarSeries {
                label: if group.is_empty() { def.name.to_string() } else { group.clone() },
                colour: if n == 1 { series_colour(0, 1) } else { series_colour(g, n) },
                values,
            }
        })
        .collect();
    // One axis of grid points: each bar in its point's colour, named as in the legend.
    let single = shape.axes.len() == 1;
    let category_colours: Vec<RGBColor> =
        if single { ctx.points.iter().map(|p| p.colour).collect() } else { Vec::new() };
    let categories = if single {
        ctx.points.iter().map(|p| p.label.clone()).collect()
    } else if shape.axes[first].path == "case" || ctx.points.iter().all(|p| p.legend.is_none()) {
        categories
    } else {
        (0..categories.len()).map(|c| format!("{} #{c}", short_path(&shape.axes[first].path))).collect()
    };
    let plot = BarPlot {
        title: def.name.to_string(),
        y_label: def.name.to_string(),
        categories,
        series,
        stacked: false,
        category_colours,
        keys: if single { ctx.points.iter().map(|p| format!("#{}", p.index)).collect() } else { Vec::new() },
        size: SMALL,
    };
    plot.render(
        "bars",
        csv(&["grid_point", shape.axes[first].path.as_str(), "series", "mean", "ci_lo", "ci_hi"], rows),
        format!("{}; whiskers: 95% intervals.", def.description),
    )
}

fn short_path(path: &str) -> &str {
    path.rsplit('.').next().unwrap_or(path)
}

/// The colour of a stage of a stacked outcome bar, and lighter shades for its reasons.
fn stage_colour(stage: &str, stages: &[String], shade: usize) -> RGBColor {
    const STAGES: [RGBColor; 8] = [
        RGBColor(0x00, 0x9E, 0x73),
        RGBColor(0xE6, 0x9F, 0x00),
        RGBColor(0x56, 0xB4, 0xE9),
        RGBColor(0xCC, 0x79, 0xA7),
        RGBColor(0xD5, 0x5E, 0x00),
        RGBColor(0xF0, 0xE4, 0x42),
        RGBColor(0x00, 0x72, 0xB2),
        RGBColor(0x33, 0x33, 0x33),
    ];
    let i = stages.iter().position(|s| s == stage).unwrap_or(0);
    let base = if stage == "served" { STAGES[0] } else { STAGES[1 + (i.saturating_sub(1)) % 7] };
    let t = [0.0, 0.35, 0.6, 0.75][shade.min(3)];
    let lift = |c: u8| (c as f64 + (255.0 - c as f64) * t).round() as u8;
    RGBColor(lift(base.0), lift(base.1), lift(base.2))
}

/// Colours for the `shown` segments, assigned over `all` segments so a segment has one
/// colour in every chart: one hue per stage (served first), lighter per reason — or,
/// where the reasons outnumber the stages (causes by service: `timeout` at four
/// services), one hue per reason and lighter per stage, so four services are four
/// colours, not four tints of one (issue 71).
fn segment_colours(all: &[&Segment], shown: &[&Segment]) -> Vec<RGBColor> {
    let distinct = |key: fn(&Segment) -> &str| {
        let mut seen: Vec<&str> = Vec::new();
        for s in all {
            if !seen.contains(&key(s)) {
                seen.push(key(s));
            }
        }
        seen.len()
    };
    let by_label = distinct(|s| s.label.as_str()) > distinct(|s| s.stage.as_str());
    let hue_of = |s: &Segment| if by_label { s.label.clone() } else { s.stage.clone() };
    let mut hues: Vec<String> = vec!["served".into()];
    for s in all {
        if !hues.contains(&hue_of(s)) {
            hues.push(hue_of(s));
        }
    }
    let mut seen: Vec<(String, usize)> = Vec::new();
    let mut colours: Vec<(&Segment, RGBColor)> = Vec::new();
    for s in all {
        if colours.iter().any(|(c, _)| c.stage == s.stage && c.label == s.label) {
            continue;
        }
        let hue = hue_of(s);
        let shade = match seen.iter_mut().find(|(h, _)| *h == hue) {
            Some((_, n)) => {
                *n += 1;
                *n
            }
            None => {
                seen.push((hue.clone(), 0));
                0
            }
        };
        colours.push((s, stage_colour(&hue, &hues, shade)));
    }
    shown
        .iter()
        .map(|s| {
            colours
                .iter()
                .find(|(c, _)| c.stage == s.stage && c.label == s.label)
                .map_or(RGBColor(0x80, 0x80, 0x80), |(_, colour)| *colour)
        })
        .collect()
}

#[cfg(test)]
#[test]
fn causes_at_several_services_are_different_hues() {
    let segment =
        |stage: &str, label: &str| Segment { metric: String::new(), label: label.into(), stage: stage.into() };
    let causes: Vec<Segment> =
        ["edge", "checkout", "payments", "inventory"].iter().map(|s| segment("timeout", s)).collect();
    let all: Vec<&Segment> = causes.iter().collect();
    let colours = segment_colours(&all, &all);
    // The HSV hue, in degrees: a tint (lifted toward white) keeps its colour's hue.
    let hue = |c: &RGBColor| {
        let (r, g, b) = (c.0 as f64, c.1 as f64, c.2 as f64);
        let (max, min) = (r.max(g).max(b), r.min(g).min(b));
        let d = (max - min).max(1e-9);
        let h = if max == r {
            (g - b) / d
        } else if max == g {
            2.0 + (b - r) / d
        } else {
            4.0 + (r - g) / d
        };
        (h * 60.0).rem_euclid(360.0)
    };
    for (i, a) in colours.iter().enumerate() {
        for b in &colours[i + 1..] {
            assert!((hue(a) - hue(b)).abs() > 10.0, "four services, four hues: {colours:?}");
        }
    }
    // Stages that outnumber reasons keep one hue per stage (a funnel's).
    let funnel = [segment("refused", "refused"), segment("failed", "failed"), segment("timeout", "timeout")];
    let all: Vec<&Segment> = funnel.iter().collect();
    let colours = segment_colours(&all, &all);
    assert_eq!(colours.len(), 3);
}

/// A segment's legend entry: `stage: reason`, or the stage alone when they agree.
fn segment_label(segment: &Segment) -> String {
    if segment.stage == segment.label {
        segment.label.clone()
    } else {
        format!("{}: {}", segment.stage, segment.label)
    }
}

/// The model's own plots (what its presentation asks for), after the common sections.
pub fn model_sections(ctx: &Context) -> Option<Section> {
    let mut blocks = Vec::new();
    for section in &ctx.presentation.sections {
        match section {
            ModelSection::MetricBars { title, y_label, metrics } => {
                let (title, metrics) = worst_bars(ctx, title, metrics);
                blocks.push(metric_bars(ctx, &title, y_label, &metrics))
            }
            ModelSection::CountHistogram { title, file, column, x_label } => {
                blocks.extend(count_histogram(ctx, title, file, column, x_label))
            }
            ModelSection::Outcomes { title, groups } => match &ctx.focus {
                Some(focus) => {
                    let shown: Vec<(String, Vec<Segment>)> =
                        groups.iter().filter(|(group, _)| focus.entries.contains(group)).cloned().collect();
                    let title = format!(
                        "{title} (the {} of {} entry points with most requests not answered in full)",
                        shown.len(),
                        groups.len()
                    );
                    blocks.extend(outcomes(ctx, &title, &shown))
                }
                None => blocks.extend(outcomes(ctx, title, groups)),
            },
            ModelSection::Funnel { title, total_label, segments } => {
                blocks.push(funnel(ctx, title, total_label, segments));
                blocks.extend(hints(ctx));
            }
            ModelSection::Topology { title, services, edges, .. } if services.len() > MAX_DRAWN_SERVICES => blocks
                .push(Block::Html(format!(
                    "<p class=\"note\">{title}: {} services and {} calls are too many to draw; the table of every \
                     service below ranks them.</p>",
                    services.len(),
                    edges.len()
                ))),
            ModelSection::Topology { title, services, edges, entries } => {
                blocks.push(topology(ctx, title, services, edges, entries))
            }
            // A section of its own: see `part_sections`.
            ModelSection::Part { .. } => {}
        }
    }
    if blocks.is_empty() {
        return None;
    }
    Some(Section {
        id: "model".into(),
        title: format!("The {} model", ctx.folder.manifest.model),
        intro: ctx.intro("What this model measures beyond the common metrics."),
        blocks,
    })
}

/// A section per part of the system the model names (a graph's services): its figures
/// per grid point, what turned its work away, and its own series over time.
pub fn part_sections(ctx: &Context) -> Vec<Section> {
    let mut sections = Vec::new();
    sections.extend(ctx.focus.as_ref().map(|focus| every_service(ctx, focus)));
    for section in &ctx.presentation.sections {
        let ModelSection::Part { name, detail, metrics, refusals, series } = section else { continue };
        if ctx.focus.as_ref().is_some_and(|focus| !focus.parts.contains(name)) {
            continue;
        }
        let named: Vec<&MetricDef> =
            metrics.iter().filter_map(|metric| ctx.defs.iter().find(|d| d.name == metric.as_str())).collect();
        // A part names every figure it could have; the table keeps those that happened.
        let happened =
            |def: &&MetricDef| ctx.points.iter().any(|p| ctx.value(p.index, def.name).is_some_and(|v| v.value != 0.0));
        let defs: Vec<&MetricDef> = named.iter().copied().filter(happened).collect();
        let mut blocks = vec![Block::Html(metric_table(ctx, &defs, false))];
        if defs.len() < named.len() {
            let zero: Vec<&str> = named.iter().filter(|d| !happened(d)).map(|d| d.name).collect();
            blocks.push(Block::Html(format!(
                "<p class=\"note\">0 at every grid point, left out: {}.</p>",
                escape(&zero.join(", "))
            )));
        }
        let refused = outcome_figures(ctx, &[(format!("{name}: refused"), refusals.clone())]);
        if !refused.is_empty() {
            blocks.push(Block::Multiples(refused));
        }
        blocks.extend(series.iter().filter_map(|s| series_figure(ctx, s)).map(|(figure, _)| Block::Figure(figure)));
        sections.push(Section {
            id: format!("part-{}", name.replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "_")),
            title: name.clone(),
            intro: ctx.intro(detail),
            blocks,
        });
    }
    sections
}

/// A big graph's services in one table, ranked, folded away; the services drawn in
/// full follow as their own sections.
fn every_service(ctx: &Context, focus: &crate::big::Focus) -> Section {
    let mut html = String::from(
        "<div class=\"scroll\"><table class=\"compare\"><thead><tr><th>service</th><th title=\"failed requests at \
         every entry point whose root cause it was, per replica\">failures caused</th><th title=\"busy workers ÷ \
         workers\">utilisation</th><th title=\"requests in it on average: by Little's law, its share of all request \
         time\">in flight</th><th>drawn below</th></tr></thead><tbody>",
    );
    for service in &focus.services {
        html.push_str(&format!(
            "<tr><th>{}</th><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&service.name),
            short(service.failures_caused),
            short(service.utilisation),
            short(service.in_flight),
            if focus.parts.contains(&service.name) { "yes" } else { "" }
        ));
    }
    html.push_str("</tbody></table></div>");
    Section {
        id: "services".into(),
        title: format!("{} services", focus.services.len()),
        intro: ctx.intro(&format!(
            "Too many services to draw each: the {shown} that caused the most failures, the {shown} busiest and the \
             {shown} with the most requests in flight are drawn in full below ({} in all). Every service's figures are \
             in the table, most failures caused first — each the highest over the grid points; attribution.parquet \
             has the failures by entry point, service and reason.",
            focus.parts.len(),
            shown = crate::big::SHOWN,
        )),
        blocks: vec![Block::Details {
            summary: format!("All {} services", focus.services.len()),
            blocks: vec![Block::Html(html)],
        }],
    }
}

/// `metrics` (label, metric) of a bar chart, or for a big graph with more than
/// [`MAX_BARS`] of them, the worst [`MAX_BARS`] — lowest where higher is better,
/// highest otherwise, at any grid point — with the title saying so.
fn worst_bars(ctx: &Context, title: &str, metrics: &[(String, String)]) -> (String, Vec<(String, String)>) {
    if ctx.focus.is_none() || metrics.len() <= MAX_BARS {
        return (title.to_string(), metrics.to_vec());
    }
    let higher: std::collections::HashSet<&str> =
        ctx.defs.iter().filter(|d| d.direction == Direction::Higher).map(|d| d.name).collect();
    let higher_is_better = |metric: &str| higher.contains(metric);
    let badness = |metric: &str| {
        let values =
            ctx.points.iter().filter_map(|p| ctx.value(p.index, metric)).map(|v| v.value).filter(|v| v.is_finite());
        if higher_is_better(metric) {
            -values.fold(f64::INFINITY, f64::min)
        } else {
            values.fold(f64::NEG_INFINITY, f64::max)
        }
    };
    let mut ranked: Vec<(f64, &(String, String))> = metrics.iter().map(|m| (badness(&m.1), m)).collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1 .0.cmp(&b.1 .0)));
    let kept = ranked.into_iter().take(MAX_BARS).map(|(_, m)| m.clone()).collect();
    (format!("{title} (the worst {MAX_BARS} of {})", metrics.len()), kept)
}

/// The service graph per grid point (one shown at a time when there are several).
fn topology(
    ctx: &Context,
    title: &str,
    services: &[stampede_scenario::models::presentation::TopologyService],
    edges: &[stampede_scenario::models::presentation::TopologyEdge],
    entries: &[String],
) -> Block {
    let mean = |point: u32, metric: &str| ctx.value(point, metric).map_or(f64::NAN, |v| v.value);
    let mut options: Vec<(String, Vec<Figure>)> = ctx
        .points
        .iter()
        .map(|point| {
            let requests: f64 = entries.iter().map(|m| mean(point.index, m)).sum();
            let values = crate::topology::Values {
                colour: services.iter().map(|s| mean(point.index, &s.colour_by)).collect(),
                per_request: edges.iter().map(|e| mean(point.index, &e.attempts) / requests).collect(),
                failed: edges.iter().map(|e| mean(point.index, &e.failed) / mean(point.index, &e.calls)).collect(),
            };
            (point.long(), vec![crate::topology::draw(title, services, edges, &values)])
        })
        .collect();
    if options.len() == 1 {
        return Block::Figure(options.pop().expect("one").1.pop().expect("one figure"));
    }
    Block::Choice { label: "grid point".into(), options }
}

/// Each grid point's name and its `#N` key, for bars with one category per point.
fn point_categories(ctx: &Context) -> (Vec<String>, Vec<String>) {
    (ctx.points.iter().map(|p| p.label.clone()).collect(), ctx.points.iter().map(|p| format!("#{}", p.index)).collect())
}

/// Bars with 95% whiskers of `metrics` (label, metric) per grid point.
fn metric_bars(ctx: &Context, title: &str, y_label: &str, metrics: &[(String, String)]) -> Block {
    let (categories, point_keys) = point_categories(ctx);
    let mut rows = Vec::new();
    let n = metrics.len();
    let series = metrics
        .iter()
        .enumerate()
        .map(|(i, (label, metric))| {
            let values: Vec<Option<BarValue>> = ctx.points.iter().map(|p| ctx.value(p.index, metric)).collect();
            for (point, v) in ctx.points.iter().zip(&values) {
                if let Some(v) = v {
                    let (lo, hi) = v.interval.unwrap_or((f64::NAN, f64::NAN));
                    rows.push(vec![point.index.to_string(), metric.clone(), num(v.value), num(lo), num(hi)]);
                }
            }
            BarSeries { label: label.clone(), colour: series_colour(i, n), values }
        })
        .collect();
    let category_colours = if n == 1 { ctx.points.iter().map(|p| p.colour).collect() } else { Vec::new() };
    let plot = BarPlot {
        title: title.to_string(),
        y_label: y_label.to_string(),
        categories: categories.clone(),
        series,
        stacked: false,
        category_colours,
        keys: point_keys.clone(),
        size: WIDE,
    };
    Block::Figure(plot.render(
        "bars",
        csv(&["grid_point", "metric", "mean", "ci_lo", "ci_hi"], rows),
        "Means with 95% whiskers, per grid point.".into(),
    ))
}

/// The model's count histogram (`file`, value column `column`): each overlaid point's
/// share of every value, from exact counts.
fn count_histogram(ctx: &Context, title: &str, file: &str, column: &str, x_label: &str) -> Option<Block> {
    let (_, table) = ctx.folder.extra.iter().find(|(name, _)| name == file)?;
    let per_point: Vec<Vec<(f64, f64)>> = ctx.points.iter().map(|p| data::counts(table, column, p.index)).collect();
    let last = per_point
        .iter()
        .flat_map(|rows| rows.iter().filter(|(_, share)| *share > 0.0).map(|(v, _)| *v as usize))
        .max()
        .unwrap_or(0);
    let categories: Vec<String> = (0..=last).map(|v| v.to_string()).collect();
    let mut rows = Vec::new();
    let series = ctx
        .overlaid()
        .zip(&per_point)
        .map(|(point, counts)| {
            let mut values = vec![None; categories.len()];
            for &(value, share) in counts {
                if (value as usize) <= last {
                    values[value as usize] = Some(BarValue { value: share, interval: None, covered: None });
                    rows.push(vec![point.index.to_string(), num(value), num(share)]);
                }
            }
            BarSeries { label: point.long(), colour: point.colour, values }
        })
        .collect();
    let plot = BarPlot {
        title: title.to_string(),
        y_label: "share of routed attempts".into(),
        categories,
        series,
        stacked: false,
        category_colours: Vec::new(),
        keys: Vec::new(),
        size: WIDE,
    };
    Some(Block::Figure(plot.render(
        "counts",
        csv(&["grid_point", column, "share"], rows),
        format!("x: {x_label}. Exact counts summed over every replica ({file})."),
    )))
}

/// Per group (a call class), a stacked bar per grid point of the outcomes that occurred.
fn outcomes(ctx: &Context, title: &str, groups: &[(String, Vec<Segment>)]) -> Vec<Block> {
    vec![Block::Html(format!("<h3>{}</h3>", escape(title))), Block::Multiples(outcome_figures(ctx, groups))]
}

/// [`outcomes`]' figures: one per group that had any of its segments.
fn outcome_figures(ctx: &Context, groups: &[(String, Vec<Segment>)]) -> Vec<Figure> {
    let (categories, point_keys) = point_categories(ctx);
    let mut figures = Vec::new();
    for (group, segments) in groups {
        let shown: Vec<&Segment> = segments
            .iter()
            .filter(|s| ctx.points.iter().any(|p| ctx.value(p.index, &s.metric).is_some_and(|v| v.value > 0.0)))
            .collect();
        if shown.is_empty() {
            continue;
        }
        let every: Vec<&Segment> = groups.iter().flat_map(|(_, segments)| segments.iter()).collect();
        let colours = segment_colours(&every, &shown);
        let mut rows = Vec::new();
        let series = shown
            .iter()
            .zip(colours)
            .map(|(segment, colour)| {
                let values: Vec<Option<BarValue>> =
                    ctx.points.iter().map(|p| ctx.value(p.index, &segment.metric)).collect();
                for (point, v) in ctx.points.iter().zip(&values) {
                    if let Some(v) = v {
                        rows.push(vec![
                            point.index.to_string(),
                            segment.stage.clone(),
                            segment.label.clone(),
                            num(v.value),
                        ]);
                    }
                }
                BarSeries { label: segment_label(segment), colour, values }
            })
            .collect();
        let plot = BarPlot {
            title: format!("{group} calls"),
            y_label: "calls per replica (mean)".into(),
            categories: categories.clone(),
            series,
            stacked: true,
            category_colours: Vec::new(),
            keys: point_keys.clone(),
            size: SMALL,
        };
        figures.push(plot.render(
            "outcomes",
            csv(&["grid_point", "stage", "reason", "calls_mean"], rows),
            "Stacked means per replica, one segment per cause (requests answered in full are not drawn).".into(),
        ));
    }
    figures
}

/// Where work stopped over every group: a 100% stacked bar per grid point, one segment
/// per (stage, reason) that occurred.
fn funnel(ctx: &Context, title: &str, total_label: &str, segments: &[(Segment, Vec<String>)]) -> Block {
    let (categories, point_keys) = point_categories(ctx);
    let sums: Vec<Vec<f64>> = segments
        .iter()
        .map(|(_, metrics)| {
            ctx.points
                .iter()
                .map(|p| {
                    metrics
                        .iter()
                        .filter_map(|m| ctx.value(p.index, m))
                        .map(|v| v.value)
                        .filter(|v| v.is_finite())
                        .sum()
                })
                .collect()
        })
        .collect();
    let totals: Vec<f64> = (0..ctx.points.len()).map(|p| sums.iter().map(|s| s[p]).sum()).collect();
    let shown: Vec<usize> = (0..segments.len()).filter(|&s| sums[s].iter().any(|v| *v > 0.0)).collect();
    let refs: Vec<&Segment> = shown.iter().map(|&s| &segments[s].0).collect();
    let every: Vec<&Segment> = segments.iter().map(|(s, _)| s).collect();
    let colours = segment_colours(&every, &refs);
    let mut rows = Vec::new();
    let series = shown
        .iter()
        .zip(colours)
        .map(|(&s, colour)| {
            let segment = &segments[s].0;
            let values = (0..ctx.points.len())
                .map(|p| {
                    let share = if totals[p] > 0.0 { sums[s][p] / totals[p] } else { f64::NAN };
                    rows.push(vec![
                        ctx.points[p].index.to_string(),
                        segment.stage.clone(),
                        segment.label.clone(),
                        num(sums[s][p]),
                        num(share),
                    ]);
                    Some(BarValue { value: share, interval: None, covered: None })
                })
                .collect();
            BarSeries { label: segment_label(segment), colour, values }
        })
        .collect();
    let plot = BarPlot {
        title: title.to_string(),
        y_label: total_label.to_string(),
        categories: categories.clone(),
        series,
        stacked: true,
        category_colours: Vec::new(),
        keys: point_keys.clone(),
        size: WIDE,
    };
    Block::Figure(
        plot.render(
            "funnel",
            csv(&["grid_point", "stage", "reason", "calls_mean", "share"], rows),
            "Each bar is every call offered (all classes); segments in the order a call meets them: each gate's \
         refusals, timeouts, provider errors, and at the top the calls served."
                .into(),
        ),
    )
}

/// The model's advice for the grid points whose means call for it (under the funnel:
/// where calls stopped is what it explains).
fn hints(ctx: &Context) -> Option<Block> {
    let Ok(scenario) = &ctx.folder.scenario else { return None };
    let mut items = String::new();
    for point in &ctx.points {
        let Ok(grid_point) = scenario.grid_point(point.index) else { continue };
        for hint in grid_point.model.presentation(&grid_point.run).hints {
            if let Some(text) = hint.fired(|metric| ctx.value(point.index, metric).map(|v| v.value)) {
                items.push_str(&format!("<li>grid point {}: {}</li>", point.index, escape(&text)));
            }
        }
    }
    (!items.is_empty()).then(|| Block::Html(format!("<ul class=\"hints\">{items}</ul>")))
}

/// Every section, in page order.
pub fn all(ctx: &Context) -> Vec<Section> {
    let mut sections = Vec::new();
    sections.extend(crate::race::race(ctx));
    sections.push(comparison(ctx));
    sections.extend(time_series(ctx));
    sections.extend(latency(ctx));
    sections.extend(grid(ctx));
    sections.extend(model_sections(ctx));
    sections.extend(part_sections(ctx));
    sections
}
