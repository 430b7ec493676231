//! The terminal summary at the end of `run` and `verify`: one compact table, metrics
//! as rows and grid points as columns (`mean ±half-width` of the 95% interval),
//! headline metrics first (and by default only them), the best value of each row
//! marked (`*`, bold on a colour terminal) by the direction declared where the metric
//! is defined. A grid too wide for the terminal shows its top and bottom points by a
//! chosen metric and says how many it left out.

use super::latency::QUANTILES;
use super::report::{number, PointReport, RunReport};
use stampede_scenario::base::typing::describe;
use stampede_scenario::models::metrics::{Direction, MetricDef};

/// How to print the summary.
#[derive(Clone, Debug)]
pub struct SummaryOptions {
    /// Every metric, not only the headline ones.
    pub all_metrics: bool,
    /// The metric that ranks grid points when not all fit (default: the first headline).
    pub rank_by: Option<String>,
    /// Terminal columns.
    pub width: usize,
    /// ANSI bold for the best value of each row.
    pub colour: bool,
    /// These metrics as the rows, in order, instead of the headline ones (`run
    /// --metric`); empty: the headlines.
    pub rows: Vec<String>,
}

const NAME_COLUMN: usize = 24;
const CELL: usize = 20;

/// A grid point's column heading: its case label or its scalar axis values, else
/// `#index` with the values spelt out in the legend under the table (see
/// [`column_titles`] for headings that would not fit or would repeat).
fn heading(point: &PointReport) -> (String, Option<String>) {
    point_heading(point.index, &point.params)
}

/// The heading of grid point `index` with axis values `params` (the summary's and
/// the HTML report's): its case label or its scalar axis values, else `#index` with
/// the values spelt out in a legend line.
pub fn point_heading(index: u32, params: &[(String, toml::Value)]) -> (String, Option<String>) {
    if params.is_empty() {
        return (format!("point {index}"), None);
    }
    let tables = params.iter().any(|(_, v)| v.is_table() || v.is_array());
    let shown = |(path, value): &(String, toml::Value)| {
        let text = value.as_str().map_or_else(|| describe(value), str::to_string);
        if path == "case" {
            text
        } else {
            format!("{}={text}", path.rsplit('.').next().unwrap_or(path))
        }
    };
    if tables {
        // The case's label first, whole; then the gist of each other value that has one
        // (a faults axis: `db errors`), so two points that differ only there can be told
        // apart; the legend spells every value out.
        let case = params.iter().find(|(p, _)| p == "case").and_then(|(_, v)| v.as_str());
        let rest: Vec<&(String, toml::Value)> = params.iter().filter(|(p, _)| p != "case").collect();
        let legend = rest.iter().map(|(p, v)| format!("{p} = {}", describe(v))).collect::<Vec<_>>().join(", ");
        let gists: String = rest.iter().filter_map(|(_, v)| gist(v)).map(|g| format!(" · {g}")).collect();
        return match case {
            Some(label) => (format!("#{index} {label}{gists}"), Some(format!("#{index} {label}: {legend}"))),
            None => (format!("#{index}{gists}"), Some(format!("#{index}: {legend}"))),
        };
    }
    (params.iter().map(shown).collect::<Vec<_>>().join(" "), None)
}

/// A table-valued axis value in a few words, where it has a natural one: a list of
/// faults (or incidents) as their targets and kinds (`db errors + api crash`), a table
/// with a `label` as the label.
fn gist(value: &toml::Value) -> Option<String> {
    let of_table = |t: &toml::Table| -> Option<String> {
        if let Some(label) = t.get("label").and_then(toml::Value::as_str) {
            return Some(label.to_string());
        }
        let kind = t.get("kind").and_then(toml::Value::as_str)?;
        Some(match t.get("target").and_then(toml::Value::as_str) {
            Some(target) => format!("{target} {kind}"),
            None => kind.to_string(),
        })
    };
    match value {
        toml::Value::Table(t) => of_table(t),
        toml::Value::Array(items) if items.is_empty() => Some("none".into()),
        toml::Value::Array(items) => {
            let parts: Option<Vec<String>> = items.iter().map(|i| i.as_table().and_then(of_table)).collect();
            parts.map(|p| p.join(" + "))
        }
        _ => None,
    }
}

fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        text.to_string()
    } else {
        let cut: String = text.chars().take(width.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

/// The shown columns' titles and the legend under the table. Axis values are the
/// titles when every one fits its column and no two are alike; otherwise every column
/// is `#N` and the legend spells out each point's values, so that columns can always
/// be told apart.
fn column_titles(report: &RunReport, columns: &[usize]) -> (Vec<String>, Vec<String>) {
    let headings: Vec<(String, Option<String>)> = columns.iter().map(|&c| heading(&report.points[c])).collect();
    let fits = headings.iter().all(|(title, _)| title.chars().count() <= CELL);
    let distinct =
        headings.iter().map(|(title, _)| title).collect::<std::collections::BTreeSet<_>>().len() == headings.len();
    if fits && distinct {
        let legend = headings.iter().filter_map(|(_, line)| line.clone()).collect();
        return (headings.into_iter().map(|(title, _)| title).collect(), legend);
    }
    let legend = columns
        .iter()
        .map(|&c| {
            let point = &report.points[c];
            let values: Vec<String> = point.params.iter().map(|(p, v)| format!("{p} = {}", describe(v))).collect();
            format!("#{}: {}", point.index, values.join(", "))
        })
        .collect();
    (columns.iter().map(|&c| format!("#{}", report.points[c].index)).collect(), legend)
}

/// `line`, broken after commas into lines of at most `width` (continuations indented).
fn wrap(line: &str, width: usize) -> String {
    let mut out = String::new();
    let mut current = String::new();
    for (i, part) in line.split_inclusive(", ").enumerate() {
        if i > 0 && current.chars().count() + part.chars().count() > width {
            out.push_str(current.trim_end());
            out.push('\n');
            current = "    ".to_string();
        }
        current.push_str(part);
    }
    out.push_str(&current);
    out.push('\n');
    out
}

/// The best value of `values` in `direction` (none for `Neither`, all NaN, or all equal).
pub fn best(values: &[f64], direction: Direction) -> Option<f64> {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if finite.windows(2).all(|w| w[0] == w[1]) {
        return None; // all equal: nothing to mark
    }
    match direction {
        Direction::Higher => finite.into_iter().max_by(f64::total_cmp),
        Direction::Lower => finite.into_iter().min_by(f64::total_cmp),
        Direction::Neither => None,
    }
}

/// Which grid points to show: all if they fit, else the top and bottom by `rank`.
fn chosen(report: &RunReport, metrics: &[MetricDef], options: &SummaryOptions) -> (Vec<usize>, Option<String>) {
    let fits = ((options.width.saturating_sub(NAME_COLUMN)) / (CELL + 2)).max(2);
    let n = report.points.len();
    if n <= fits {
        return ((0..n).collect(), None);
    }
    let rank = options
        .rank_by
        .as_deref()
        .and_then(|name| metrics.iter().position(|m| m.name == name))
        .or_else(|| metrics.iter().position(|m| m.headline && m.direction != Direction::Neither))
        .unwrap_or(0);
    let mut order: Vec<usize> = (0..n).collect();
    let value = |i: usize| report.points[i].summaries[rank].mean;
    order.sort_by(|&a, &b| value(a).total_cmp(&value(b)));
    if metrics[rank].direction == Direction::Higher {
        order.reverse();
    }
    let top = fits.div_ceil(2);
    let mut shown: Vec<usize> = order[..top].iter().chain(&order[n - (fits - top)..]).copied().collect();
    shown.sort_unstable();
    // What would show them all: the width every column needs.
    let width = NAME_COLUMN + n * (CELL + 2);
    let note = format!(
        "{fits} of {n} grid points shown: best {top}, worst {} by {} (--rank-by METRIC); all {n} fit in {width} \
         columns (COLUMNS={width}), and every point is in summary.parquet",
        fits - top,
        metrics[rank].name
    );
    (shown, Some(note))
}

/// The summary table.
pub fn render(report: &RunReport, options: &SummaryOptions) -> String {
    let metrics = &report.scenario.schema.metrics;
    let mut out = format!(
        "{} · {} grid point(s) × {} replicas · seed {} · {:.1}s\n\n",
        report.scenario.name,
        report.points.len(),
        report.scenario.run.replicas,
        report.scenario.run.seed,
        report.wall_time_s
    );
    let (columns, note) = chosen(report, metrics, options);
    out.push_str(&format!("{:<NAME_COLUMN$}", "mean ± 95% half-width"));
    let (titles, legend) = column_titles(report, &columns);
    for title in &titles {
        out.push_str(&format!("  {title:>CELL$}"));
    }
    out.push('\n');
    let chosen_rows: Vec<usize> =
        options.rows.iter().filter_map(|name| metrics.iter().position(|m| m.name == name.as_str())).collect();
    let rows = shown_rows(metrics, &chosen_rows, options.all_metrics);
    let mut partial_shown = false;
    for &m in &rows {
        partial_shown |= metric_row(report, m, &columns, options.colour, &mut out);
    }
    latency_rows(report, &columns, options.all_metrics, &mut out);
    cost_row(report, &columns, &mut out);
    out.push('\n');
    let width = options.width.max(40);
    for line in legend.iter().chain(&note) {
        out.push_str(&wrap(line, width));
    }
    for hint in report.hints() {
        out.push_str(&wrap(&format!("note: {hint}"), width));
    }
    out.push_str(&per_replica_usd_note(report, &rows, width));
    if partial_shown {
        out.push_str(
            "(k/N): defined in k of the point's N replicas (a recovery time where the replica recovered), the mean \
             over those; under half is never marked best\n",
        );
    }
    let hidden = if chosen_rows.is_empty() {
        metrics.iter().filter(|m| !m.headline).count()
    } else {
        metrics.len() - chosen_rows.len()
    };
    if !options.all_metrics && hidden > 0 {
        out.push_str(&format!("{hidden} more metrics with --all-metrics; * marks a row's best\n"));
    }
    out.push_str(&format!("wrote {}\n", report.output_dir.display()));
    out
}

/// The metrics shown, in order: those `--rows` chose, else the headline ones; then,
/// with `all`, every other.
fn shown_rows(metrics: &[MetricDef], chosen: &[usize], all: bool) -> Vec<usize> {
    let mut rows: Vec<usize> =
        if chosen.is_empty() { (0..metrics.len()).filter(|&m| metrics[m].headline).collect() } else { chosen.to_vec() };
    if all {
        rows.extend((0..metrics.len()).filter(|&m| !metrics[m].headline && !chosen.contains(&m)));
    }
    rows
}

/// Dollar figures that are per replica over the measured window, not per day or per
/// answer: said under the table (`useful_usd 34.60` read as a day's spend). Empty
/// when the shown `rows` have none.
fn per_replica_usd_note(report: &RunReport, rows: &[usize], width: usize) -> String {
    let metrics = &report.scenario.schema.metrics;
    let per_replica_usd: Vec<&str> = rows
        .iter()
        .map(|&m| &metrics[m])
        .filter(|def| def.name.ends_with("usd") && def.description.contains("per replica over"))
        .map(|def| def.name)
        .collect();
    if per_replica_usd.is_empty() {
        return String::new();
    }
    let run = &report.scenario.run;
    wrap(
        &format!(
            "{}: USD per replica over its measured window ({} s: run.horizon_s − run.warmup_s), not per day \
             (usd_per_day) or per answer (usd_per_1k_answers)",
            per_replica_usd.join(", "),
            run.horizon_s - run.warmup_s
        ),
        width,
    )
}

/// Metric `m`'s row over `columns`: mean ± half-width, the coverage of a value not
/// defined in every replica, and * (bold with `colour`) at the best. Returns whether
/// it showed a coverage.
fn metric_row(report: &RunReport, m: usize, columns: &[usize], colour: bool, out: &mut String) -> bool {
    let def = &report.scenario.schema.metrics[m];
    // A value defined in under half its point's replicas is never the best.
    let means: Vec<f64> = columns
        .iter()
        .map(|&c| if report.points[c].too_partial(m) { f64::NAN } else { report.points[c].summaries[m].mean })
        .collect();
    let best = best(&means, def.direction).filter(|_| columns.len() > 1);
    let is_best = |i: usize| best.is_some_and(|b| means[i] == b);
    let mut partial_shown = false;
    out.push_str(&format!("{:<NAME_COLUMN$}", fit(def.name, NAME_COLUMN)));
    for (i, &c) in columns.iter().enumerate() {
        let s = report.points[c].summaries[m];
        let half = (s.ci_hi - s.ci_lo) / 2.0;
        let mut cell = number(s.mean, def.kind);
        let coverage = report.points[c].partial(m).map(|(covered, replicas)| format!(" ({covered}/{replicas})"));
        if half.is_finite() && half > 0.0 {
            let with_half = format!("{cell} ±{}", number(half, def.kind));
            // The coverage must show: the ± gives way when both do not fit.
            if coverage.as_ref().is_none_or(|c| with_half.chars().count() + c.chars().count() < CELL) {
                cell = with_half;
            }
        }
        if let Some(coverage) = &coverage {
            partial_shown = true;
            cell.push_str(coverage);
        }
        if is_best(i) {
            cell.push('*');
        }
        let padded = format!("{:>CELL$}", fit(&cell, CELL));
        if is_best(i) && colour {
            out.push_str(&format!("  \x1b[1m{padded}\x1b[0m"));
        } else {
            out.push_str(&format!("  {padded}"));
        }
    }
    out.push('\n');
    partial_shown
}

/// Latency tails: the first histogram's p50 and p99, every histogram's with
/// `all_metrics`.
fn latency_rows(report: &RunReport, columns: &[usize], all_metrics: bool, out: &mut String) {
    let latencies = report.scenario.schema.latencies;
    let shown_latencies = if all_metrics { latencies.len() } else { latencies.len().min(1) };
    for (l, name) in latencies.iter().enumerate().take(shown_latencies) {
        for (q, quantile) in QUANTILES.iter().enumerate().filter(|(_, (n, _))| *n == "p50_s" || *n == "p99_s") {
            let label = format!("{} {}", name.trim_end_matches("_s"), quantile.0);
            out.push_str(&format!("{:<NAME_COLUMN$}", fit(&label, NAME_COLUMN)));
            for &c in columns {
                let value = report.points[c].latencies.get(l).map_or(f64::NAN, |s| s.quantiles_s[q]);
                out.push_str(&format!("  {:>CELL$}", number(value, stampede_scenario::models::MetricKind::Real)));
            }
            out.push('\n');
        }
    }
}

/// What each point cost: nanoseconds per event on one core (wall clock, so it varies
/// run to run); nothing when no point counted its events.
fn cost_row(report: &RunReport, columns: &[usize], out: &mut String) {
    let events = report.scenario.schema.metrics.iter().position(|m| m.name == "events");
    let costs: Vec<Option<(f64, f64)>> =
        columns.iter().map(|&c| report.points[c].cost(events, report.scenario.run.replicas)).collect();
    if costs.iter().any(Option::is_some) {
        out.push_str(&format!("{:<NAME_COLUMN$}", "ns per event (1 core)"));
        for cost in &costs {
            let shown = cost.map_or("–".to_string(), |(_, ns)| format!("{ns:.0}"));
            out.push_str(&format!("  {shown:>CELL$}"));
        }
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Summary;
    use stampede_scenario::scenario::builtin::load_scenario_source;
    use stampede_scenario::{Overrides, Scenario};

    fn report(points: usize) -> RunReport {
        let values: Vec<String> = (0..points).map(|i| (2 + i).to_string()).collect();
        let overrides = Overrides {
            sets: vec![],
            grids: vec![stampede_scenario::scenario::overrides::parse_grid(&format!(
                "queue.servers={}",
                values.join(",")
            ))
            .unwrap()],
            cases: vec![],
        };
        let scenario = Scenario::resolve(load_scenario_source("mmc").unwrap(), &overrides).unwrap();
        report_of(scenario)
    }

    /// A report of `scenario`'s grid with made-up values: every metric 1 ± 0, but
    /// the first, which falls with the point's index.
    fn report_of(scenario: Scenario) -> RunReport {
        let metrics = scenario.schema.metrics.len();
        let points = scenario.point_count() as usize;
        let points = (0..points)
            .map(|i| {
                // wait_mean_s falls with servers: point 0 waits longest.
                let wait = 1.0 / (i as f64 + 1.0);
                let mut summaries = vec![Summary { mean: 1.0, sd: 0.0, ci_lo: 1.0, ci_hi: 1.0 }; metrics];
                summaries[0] = Summary { mean: wait, sd: 0.1, ci_lo: wait - 0.01, ci_hi: wait + 0.01 };
                PointReport {
                    index: i as u32,
                    params: scenario.grid_point(i as u32).unwrap().params,
                    summaries,
                    latencies: Vec::new(),
                    replica_values: Default::default(),
                    latency_claims: Default::default(),
                    compute_s: 0.0,
                    covered: vec![10; metrics],
                    replicas: 10,
                }
            })
            .collect();
        RunReport { scenario, points, output_dir: "out/mmc".into(), wall_time_s: 1.0, threads: 2 }
    }

    #[test]
    fn headlines_first_best_marked_and_no_colour_unless_asked() {
        let options = SummaryOptions { all_metrics: false, rank_by: None, width: 120, colour: false, rows: Vec::new() };
        let text = render(&report(3), &options);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[2].contains("servers=2") && lines[2].contains("servers=4"), "{text}");
        assert!(lines[3].starts_with("wait_mean_s"), "the first headline comes first:\n{text}");
        assert!(lines[3].ends_with("0.3333 ±0.01000*"), "lower is better: the last point is best:\n{text}");
        assert!(!text.contains("in_system_mean"), "not a headline:\n{text}");
        assert!(text.contains("more metrics with --all-metrics") && !text.contains('\x1b'), "{text}");
        assert!(!lines[4].contains('*'), "equal values mark nothing:\n{text}");
        let all = render(&report(3), &SummaryOptions { all_metrics: true, colour: true, ..options });
        assert!(all.contains("in_system_mean") && all.contains("\x1b[1m"), "{all}");
    }

    /// A mean over a subset of replicas says how many, and under half is never best:
    /// the last point would be best, but its value covers 1 of 10 replicas.
    #[test]
    fn a_metric_defined_in_few_replicas_says_so_and_is_never_best() {
        let options = SummaryOptions { all_metrics: false, rank_by: None, width: 120, colour: false, rows: Vec::new() };
        let mut partial = report(3);
        partial.points[2].covered[0] = 1;
        partial.points[1].covered[0] = 6;
        let text = render(&partial, &options);
        let row = text.lines().find(|l| l.starts_with("wait_mean_s")).unwrap();
        assert!(row.contains("0.3333 (1/10)") && row.contains("(6/10)"), "{text}");
        assert!(row.contains("0.5000 (6/10)*"), "the best of those covering half or more (the ± gives way):\n{text}");
        assert!(!row.contains("(1/10)*"), "{text}");
        assert!(text.contains("(k/N): defined in k of the point's N replicas"), "{text}");
        assert!(!render(&report(3), &options).contains("(k/N)"), "no legend when every value covers all");
    }

    #[test]
    fn a_wide_grid_shows_its_best_and_worst_and_says_how_many_it_left_out() {
        let options =
            SummaryOptions { all_metrics: false, rank_by: None, width: 24 + 4 * 22, colour: false, rows: Vec::new() };
        let text = render(&report(30), &options);
        let joined = text.replace("\n    ", " ");
        assert!(joined.contains("4 of 30 grid points shown: best 2, worst 2 by wait_mean_s"), "{text}");
        // Best by wait (lower): servers 31 and 30; worst: servers 2 and 3.
        let header = text.lines().nth(2).unwrap();
        for shown in ["servers=2", "servers=3", "servers=30", "servers=31"] {
            assert!(header.contains(shown), "{shown} missing from {header}");
        }
        assert!(text.lines().all(|l| l.chars().count() <= 24 + 4 * 22), "{text}");
        // It says how to see them all (issue 72: wide grids hid points unless COLUMNS was set).
        let needed = NAME_COLUMN + 30 * (CELL + 2);
        assert!(
            text.replace("\n    ", " ").contains(&format!("all 30 fit in {needed} columns (COLUMNS={needed})")),
            "{text}"
        );
        let all = render(&report(30), &SummaryOptions { width: needed, ..options });
        assert!(!all.contains("grid points shown") && all.contains("servers=16"), "{all}");
    }

    /// Dollar figures per replica over the measured window say so under the table
    /// (issue 72: `useful_usd 34.60` read as a day's spend); rates per day do not.
    #[test]
    fn per_replica_dollars_say_what_they_count() {
        let scenario = |rows: &[&str]| {
            let source = load_scenario_source("llm-stack").unwrap();
            let report = report_of(Scenario::resolve(source, &Overrides::default()).unwrap());
            let rows = rows.iter().map(|r| r.to_string()).collect();
            render(&report, &SummaryOptions { all_metrics: false, rank_by: None, width: 200, colour: false, rows })
        };
        let text = scenario(&["useful_usd", "usd_per_day"]);
        assert!(text.contains("useful_usd: USD per replica over its measured window ("), "{text}");
        assert!(!scenario(&["usd_per_day", "usd_per_1k_answers"]).contains("per replica over"));
    }

    /// Headings cut to the column width, or alike, become `#N` with a legend line per
    /// point (policy-grid's `capacity_factor=inf…` columns); a long legend line wraps.
    #[test]
    fn long_or_alike_headings_become_numbers_with_a_legend() {
        let mut wide = report(3);
        for (i, point) in wide.points.iter_mut().enumerate() {
            point.params = vec![
                ("ring.capacity_factor".into(), toml::Value::String("inf".into())),
                ("client.retry.policy_with_a_long_name".into(), toml::Value::String(format!("policy-{i}"))),
            ];
        }
        let options = SummaryOptions { all_metrics: false, rank_by: None, width: 120, colour: false, rows: Vec::new() };
        let text = render(&wide, &options);
        let header = text.lines().nth(2).unwrap();
        assert!(header.contains("#0") && header.contains("#1") && header.contains("#2"), "{text}");
        assert!(!text.contains('…'), "nothing is cut:\n{text}");
        assert!(
            text.contains("#1: ring.capacity_factor = \"inf\", client.retry.policy_with_a_long_name = \"policy-1\""),
            "{text}"
        );
        let narrow = render(&wide, &SummaryOptions { width: 60, ..options.clone() });
        assert!(narrow.contains("#2: ring.capacity_factor = \"inf\",\n    client.retry"), "wrapped:\n{narrow}");
        // Short distinct headings stay as they are.
        assert!(render(&report(3), &options).lines().nth(2).unwrap().contains("servers=3"));
    }
}

/// A grid point's heading tells points apart that differ only in a table-valued axis
/// (issue 71: bars showed the case but not the fault).
#[cfg(test)]
#[test]
fn a_faults_axis_shows_in_the_heading() {
    let faults: toml::Value = toml::from_str::<toml::Table>(
        "v = [{ target = \"db\", kind = \"errors\", rate = 0.3 }, { target = \"api\", kind = \"crash\" }]",
    )
    .unwrap()["v"]
        .clone();
    let params = vec![("faults".to_string(), faults), ("case".to_string(), toml::Value::String("today".into()))];
    let (label, legend) = point_heading(2, &params);
    assert_eq!(label, "#2 today · db errors + api crash");
    assert!(legend.unwrap().starts_with("#2 today: faults = ["), "the case first, then the values");
}
