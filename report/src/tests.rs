//! The data behind each plot, checked against the Parquet it came from: a run of a
//! small built-in is written in-process, read back, and every section's numbers are
//! compared with the tables.

use std::path::Path;

use stampede_output::Table;
use stampede_run::pipeline::execute;
use stampede_scenario::scenario::builtin::load_scenario_source;
use stampede_scenario::{Overrides, Scenario};

use crate::blocks::{self, Block, Context};
use crate::folder::Folder;
use crate::sections;
use crate::{chart, data};

/// Runs built-in `name` with `replicas` replicas into `out` and reads the folder back.
fn run(name: &str, replicas: i64, out: &Path) -> Folder {
    let overrides =
        Overrides { sets: vec![("run.replicas".into(), toml::Value::Integer(replicas))], grids: vec![], cases: vec![] };
    let scenario = Scenario::resolve(load_scenario_source(name).unwrap(), &overrides).unwrap();
    let report = execute(&scenario, out, 2, &|| {}).unwrap();
    Folder::read(&report.output_dir).unwrap()
}

fn context(folder: &Folder) -> Context<'_> {
    let scenario = folder.scenario.as_ref().unwrap();
    let defs = folder.metric_defs();
    let presentation = scenario.model.presentation(&scenario.run);
    let summary = crate::data::SummaryIndex::of(&folder.summary);
    let (points, overlay_note) = blocks::points(folder, &defs, &summary);
    let focus = crate::big::Focus::of(&presentation, &scenario.schema.attribution, &summary, &summary.points());
    Context { folder, defs, points, overlay_note, presentation, summary, focus }
}

fn figures(blocks: &[Block]) -> Vec<&chart::Figure> {
    let mut out = Vec::new();
    for block in blocks {
        match block {
            Block::Figure(f) => out.push(f),
            Block::Multiples(fs) => out.extend(fs),
            Block::Choice { options, .. } => out.extend(options.iter().flat_map(|(_, fs)| fs)),
            Block::Details { blocks, .. } => out.extend(figures(blocks)),
            Block::Html(_) => {}
        }
    }
    out
}

/// CSV rows as fields (the header dropped); quoted fields may hold commas and "".
fn csv_rows(csv: &str) -> Vec<Vec<String>> {
    let fields = |line: &str| {
        let (mut out, mut field, mut quoted) = (Vec::new(), String::new(), false);
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match (c, quoted) {
                ('"', true) if chars.peek() == Some(&'"') => {
                    field.push('"');
                    chars.next();
                }
                ('"', _) => quoted = !quoted,
                (',', false) => out.push(std::mem::take(&mut field)),
                (c, _) => field.push(c),
            }
        }
        out.push(field);
        out
    };
    csv.lines().skip(1).map(fields).collect()
}

/// A CSV value against a table's: six significant digits; an empty field is NaN.
fn close_text(text: &str, b: f64) -> bool {
    if text.is_empty() {
        return b.is_nan();
    }
    close(text.parse().unwrap(), b)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-5 * a.abs().max(b.abs()) + 1e-12
}

#[test]
fn baltor_bands_markers_and_percentiles_come_from_its_tables() {
    let out = tempfile::tempdir().unwrap();
    let folder = run("baltor", 6, out.path());
    let ctx = context(&folder);
    let timeseries = Table::read(&folder.dir.join("timeseries.parquet")).unwrap();
    let summary = Table::read(&folder.dir.join("summary.parquet")).unwrap();

    // At full resolution a drawn series is the table's rows: mean, band ends.
    let buckets = data::rows_of(&timeseries, 1).len();
    let series = data::time_series(&timeseries, "queue_depth", 1, buckets);
    let rows = data::rows_of(&timeseries, 1);
    let mean = timeseries.numbers("queue_depth_mean").unwrap();
    let lo = timeseries.numbers("queue_depth_ci_lo").unwrap();
    let hi = timeseries.numbers("queue_depth_ci_hi").unwrap();
    assert_eq!(series.len(), buckets);
    for (p, &r) in series.iter().zip(&rows) {
        assert_eq!((p.y, p.interval), (mean[r], Some((lo[r], hi[r]))));
    }
    // Thinned, each drawn band holds every bucket's band it stands for.
    let thin = data::time_series(&timeseries, "queue_depth", 1, 100);
    let step = buckets.div_ceil(100);
    for (i, p) in thin.iter().enumerate() {
        let (plo, phi) = p.interval.unwrap();
        for &r in rows.iter().skip(i * step).take(step) {
            assert!(plo <= lo[r] && phi >= hi[r], "bucket {r}");
        }
    }

    // The recovery markers stand at the last fault's end plus the summary's mean.
    let section = sections::time_series(&ctx).unwrap();
    let Block::Figure(queue) = &section.blocks[0] else { panic!("the queue-depth plot comes first") };
    assert!(queue.title.starts_with("queue depth"), "{}", queue.title);
    let recovery_mean = summary.numbers("recovery_s_mean").unwrap();
    let last_end = ctx.presentation.windows.iter().map(|w| w.end_s).fold(0.0, f64::max);
    assert_eq!(last_end, 3.5, "baltor's brownout ends at 3.5 s");
    for point in [1u32, 2] {
        let expected = last_end + recovery_mean[point as usize];
        let label = format!(
            "{}: recovered {} s",
            ctx.points[point as usize].label,
            chart::short(recovery_mean[point as usize])
        );
        assert!(queue.svg.contains(&label), "marker for point {point}: {label}");
        assert!(expected > last_end);
    }
    assert!(queue.note.contains("Never recovered on average: #0"), "{}", queue.note);
    // Its CSV is the drawn series: point 1's rows agree with the thinned data.
    let csv = csv_rows(&queue.csv);
    let resolution = (2400 / 3usize).clamp(60, 400);
    let drawn = data::time_series(&timeseries, "queue_depth", 1, resolution);
    let csv_point: Vec<&Vec<String>> = csv.iter().filter(|r| r[0] == "1").collect();
    assert_eq!(csv_point.len(), drawn.len());
    for (row, p) in csv_point.iter().zip(&drawn) {
        assert!(close(row[2].parse().unwrap(), p.y));
        assert!(close(row[3].parse().unwrap(), p.interval.unwrap().0));
        assert!(close(row[4].parse().unwrap(), p.interval.unwrap().1));
    }

    // A percentile curve's p90, p99 and p99.9 are the histogram table's columns.
    let histograms = Table::read(&folder.dir.join("histograms.parquet")).unwrap();
    for point in 0..3u32 {
        let histogram = data::histogram(&histograms, point, "response_s").unwrap();
        let curve = data::percentile_curve(&histogram);
        let row = data::rows_of(&histograms, point)[0];
        for (x, column) in [(10.0, "p90_s"), (100.0, "p99_s"), (1000.0, "p999_s")] {
            let at = curve.iter().find(|p| (p.x - x).abs() < 1e-9 * x).expect("the curve has the decade");
            assert_eq!(at.y, histograms.numbers(column).unwrap()[row], "point {point} {column}");
        }
        let cdf = data::cdf(&histogram);
        let median = cdf.iter().find(|p| p.y == 0.5).unwrap();
        assert_eq!(median.x, histograms.numbers("p50_s").unwrap()[row]);
    }

    // Every grid bar is the summary's mean with its interval's ends.
    let grid = sections::grid(&ctx).unwrap();
    let bars = figures(&grid.blocks);
    assert_eq!(bars.len(), ctx.defs.iter().filter(|d| d.headline).count());
    for figure in bars {
        let metric = figure.title.as_str();
        for row in csv_rows(&figure.csv) {
            let point: usize = row[0].parse().unwrap();
            let column = |s: &str| summary.numbers(&format!("{metric}_{s}")).unwrap()[point];
            assert!(close_text(&row[3], column("mean")), "{metric} {point}");
            assert!(close_text(&row[4], column("ci_lo")), "{metric} {point}");
            assert!(close_text(&row[5], column("ci_hi")), "{metric} {point}");
        }
    }
}

#[test]
fn policy_grid_draws_heatmaps_over_two_numeric_axes_with_small_multiples() {
    let out = tempfile::tempdir().unwrap();
    let folder = run("policy-grid", 2, out.path());
    let ctx = context(&folder);
    let grid = sections::grid(&ctx).unwrap();
    let [Block::Choice { options, .. }] = grid.blocks.as_slice() else { panic!("a metric choice") };
    assert_eq!(options.len(), ctx.defs.iter().filter(|d| d.headline).count());
    let summary = Table::read(&folder.dir.join("summary.parquet")).unwrap();
    for (metric, maps) in options {
        // One map per value of the third axis, 3 × 3 cells each: all 27 points once.
        assert_eq!(maps.len(), 3, "{metric}");
        let mut seen: Vec<usize> = Vec::new();
        for map in maps {
            assert_eq!(map.kind, "heatmap");
            for row in csv_rows(&map.csv) {
                let point: usize = row[0].parse().unwrap();
                seen.push(point);
                let mean = summary.numbers(&format!("{metric}_mean")).unwrap()[point];
                assert!(close(row[3].parse().unwrap(), mean), "{metric} {point}");
            }
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..27).collect::<Vec<_>>(), "{metric}");
    }
    // 27 points: overlays show eight, the best and worst four by the first headline.
    assert_eq!(ctx.points.iter().filter(|p| p.overlaid).count(), 8);
    assert!(ctx.overlay_note.as_deref().unwrap().contains("best 4 and the worst 4"));
}

#[test]
fn the_gateway_funnel_sums_every_class_and_its_shares_add_up_to_one() {
    let out = tempfile::tempdir().unwrap();
    let folder = run("llm-stack", 2, out.path());
    let ctx = context(&folder);
    let section = sections::model_sections(&ctx).unwrap();
    let all = figures(&section.blocks);
    let funnel = all.iter().find(|f| f.kind == "funnel").expect("a funnel");
    let summary = Table::read(&folder.dir.join("summary.parquet")).unwrap();
    for point in 0..2usize {
        let rows: Vec<Vec<String>> = csv_rows(&funnel.csv).into_iter().filter(|r| r[0] == point.to_string()).collect();
        let share: f64 = rows.iter().map(|r| r[4].parse::<f64>().unwrap()).sum();
        assert!((share - 1.0).abs() < 1e-4, "point {point}: shares sum to {share}");
        let served = rows.iter().find(|r| r[1] == "served").unwrap()[3].parse::<f64>().unwrap();
        let expected: f64 = ["guard", "rewrite", "answer", "think", "title", "answer_fallback"]
            .iter()
            .map(|c| summary.numbers(&format!("{c}_served_mean")).unwrap()[point])
            .sum();
        assert!(close(served, expected), "{served} vs {expected}");
    }
    assert!(all.iter().filter(|f| f.kind == "outcomes").count() >= 4, "a stacked bar per class that had calls");
}

/// graph-three-tier: a section per service with its table (figures that happened),
/// its refusals, and its own series, which leave the common "Over time" section.
#[test]
fn every_graph_service_gets_a_section_with_its_figures_refusals_and_series() {
    let out = tempfile::tempdir().unwrap();
    let folder = run("graph-three-tier", 2, out.path());
    let ctx = context(&folder);
    let parts = sections::part_sections(&ctx);
    let titles: Vec<&str> = parts.iter().map(|s| s.title.as_str()).collect();
    assert_eq!(titles, ["api", "cache", "db", "web"]);
    let summary = Table::read(&folder.dir.join("summary.parquet")).unwrap();
    for part in &parts {
        let name = &part.title;
        assert_eq!(part.id, format!("part-{name}"));
        let Block::Html(table) = &part.blocks[0] else { panic!("{name}: a table first") };
        // Its utilisation at grid point 0, as the summary has it (mean, 4 significant digits).
        let utilisation = summary.numbers(&format!("{name}.utilisation_mean")).unwrap()[0];
        assert!(table.contains(&format!("{name}.utilisation")), "{name}");
        assert!(table.contains(&chart::short(utilisation)), "{name}: {} not in its table", chart::short(utilisation));
        let series: Vec<&str> =
            figures(&part.blocks).iter().filter(|f| f.kind == "timeseries").map(|f| f.title.as_str()).collect();
        assert_eq!(series, [format!("{name}.queue depth over time"), format!("{name}.busy over time")]);
    }
    // The edges into api and out of it are in api's table.
    let Block::Html(api) = &parts[0].blocks[0] else { unreachable!() };
    // Only the cache turned work away (its queue filled in the brownout): one stacked
    // bar there, of that reason alone, as the summary counts it.
    let refusals: Vec<(&str, usize)> = parts
        .iter()
        .map(|p| (p.title.as_str(), figures(&p.blocks).iter().filter(|f| f.kind == "outcomes").count()))
        .collect();
    assert_eq!(refusals, [("api", 0), ("cache", 1), ("db", 0), ("web", 0)]);
    let bar = figures(&parts[1].blocks).into_iter().find(|f| f.kind == "outcomes").unwrap();
    let full = summary.numbers("cache.refused_queue_full_mean").unwrap();
    for row in csv_rows(&bar.csv) {
        assert_eq!(row[2], "queue full", "{row:?}");
        let point: usize = row[0].parse().unwrap();
        assert!(close(row[3].parse().unwrap(), full[point]), "{row:?} vs {}", full[point]);
    }
    assert!(api.contains("web-&gt;api.attempts") && api.contains("api-&gt;cache.retries"), "{api}");
    let common = sections::time_series(&ctx).unwrap();
    let common: Vec<&str> = figures(&common.blocks).iter().map(|f| f.title.as_str()).collect();
    assert!(common.iter().all(|t| !t.starts_with("api.") && !t.starts_with("cache.")), "{common:?}");
    assert!(common.contains(&"queue depth over time"), "{common:?}");
}

/// The outage mechanisms' state over time is drawn in their services' parts; a headline
/// metric with no value at any point (no replica of graph-ejection recovers: the crash
/// lasts to the end) gets no empty chart in the grid, and the intro says so.
#[test]
fn mechanism_series_are_drawn_and_a_metric_without_values_is_named_not_drawn() {
    let out = tempfile::tempdir().unwrap();
    let folder = run("graph-ejection", 2, out.path());
    let ctx = context(&folder);
    let parts = sections::part_sections(&ctx);
    let inventory = parts.iter().find(|p| p.title == "inventory").unwrap();
    let series: Vec<&str> =
        figures(&inventory.blocks).iter().filter(|f| f.kind == "timeseries").map(|f| f.title.as_str()).collect();
    assert!(series.contains(&"inventory.unhealthy over time"), "{series:?}");
    assert!(series.contains(&"api->inventory.ejected over time"), "{series:?}");
    let grid = sections::grid(&ctx).unwrap();
    let titles: Vec<&str> = figures(&grid.blocks).iter().map(|f| f.title.as_str()).collect();
    assert!(!titles.contains(&"recovery_s"), "{titles:?}");
    assert!(titles.contains(&"api.get.success_ratio"), "{titles:?}");
    assert!(grid.intro.contains("Not drawn") && grid.intro.contains("recovery_s"), "{}", grid.intro);

    let folder = run("graph-autoscale", 2, out.path());
    let ctx = context(&folder);
    let app = sections::part_sections(&ctx).into_iter().find(|p| p.title == "app").unwrap();
    let instances = figures(&app.blocks).into_iter().find(|f| f.title == "app.instances over time").unwrap();
    // 3 instances before the step at 60 s, in every case (case 0 never scales).
    let rows = csv_rows(&instances.csv);
    let before: Vec<&Vec<String>> = rows.iter().filter(|r| r[1].parse::<f64>().unwrap() < 55.0).collect();
    assert!(before.len() >= 4 * 50, "every case's first 55 buckets: {}", before.len());
    for row in before {
        assert!(close(row[2].parse().unwrap(), 3.0), "{row:?}");
    }
    assert!(rows.iter().any(|r| r[2].parse::<f64>().unwrap() > 5.0), "the autoscaled step reaches 8");
}

#[test]
fn a_newer_or_foreign_manifest_is_refused_and_an_older_one_is_read() {
    let out = tempfile::tempdir().unwrap();
    let folder = run("mmc", 2, out.path());
    let manifest = folder.dir.join("manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    // Written before the field existed: format 1.
    json.as_object_mut().unwrap().remove("format");
    std::fs::write(&manifest, serde_json::to_vec(&json).unwrap()).unwrap();
    assert!(crate::render(&folder.dir).is_ok());
    json["format"] = serde_json::json!(2);
    std::fs::write(&manifest, serde_json::to_vec(&json).unwrap()).unwrap();
    let error = crate::render(&folder.dir).err().unwrap().to_string();
    assert!(error.contains("output format 2") && error.contains("reads format 1"), "{error}");
    std::fs::write(&manifest, b"{\"tool\": \"other\"}").unwrap();
    let error = crate::render(&folder.dir).err().unwrap().to_string();
    assert!(error.contains("not a stampede manifest"), "{error}");
}

/// A graph of `services` services in pairs (service 2k's entry calls service 2k+1),
/// service 1 answering half its calls with errors: wide enough to be written long.
fn pairs_graph(services: usize) -> String {
    let mut text = String::from(
        "name = \"pairs\"\nmodel = \"graph\"\n[run]\nhorizon_s = 4.0\nwarmup_s = 0.5\nreplicas = 3\nseed = 2\n",
    );
    for s in 0..services {
        text += &format!("[services.s{s}]\nworkers = 8\n[services.s{s}.endpoints.e]\nwork = {{ dist = \"exponential\", mean_s = 0.005 }}\n");
        if s % 2 == 0 {
            text += &format!("steps = [{{ call = \"s{}.e\" }}]\n", s + 1);
        }
    }
    for k in 0..services / 2 {
        text += &format!("[[workload]]\nentry = \"s{}.e\"\nrate_per_s = 50.0\n", 2 * k);
    }
    text += "[[faults]]\ntarget = \"s1\"\nkind = \"errors\"\nrate = 0.5\nstart_s = 0.0\nduration_s = 10.0\n";
    text
}

/// Past 1,000 metrics the summary, replica rows and series are written long and read
/// back wide: the pivoted summary is the wide summary's columns with the run's own
/// numbers, every replica's row is there, and attribution.parquet holds the causes
/// that occurred — the failures s1's errors caused, equal to their summary metric, and
/// s1 as their culprit (slow requests, the tail of every entry, may name any service).
#[test]
fn a_wide_graph_is_written_long_and_read_back_wide() {
    let out = tempfile::tempdir().unwrap();
    let scenario = Scenario::resolve(pairs_graph(24).parse().unwrap(), &Overrides::default()).unwrap();
    let metrics = scenario.schema.metrics.len();
    assert!(metrics > stampede_scenario::schema::columns::LONG_ABOVE_METRICS, "{metrics} metrics");
    assert!(scenario.columns.long.is_some());
    let report = execute(&scenario, out.path(), 2, &|| {}).unwrap();
    let dir = &report.output_dir;

    let raw = Table::read(&dir.join("summary.parquet")).unwrap();
    assert_eq!(
        raw.names().collect::<Vec<_>>(),
        ["grid_point", "replicas", "metric", "mean", "sd", "ci_lo", "ci_hi", "n"]
    );
    assert_eq!(raw.rows(), metrics);
    let replicas = Table::read(&dir.join("replicas.parquet")).unwrap();
    assert_eq!(replicas.names().collect::<Vec<_>>(), ["grid_point", "replica", "seed", "metric", "value"]);
    assert_eq!(replicas.rows(), 3 * metrics);

    let folder = Folder::read(dir).unwrap();
    assert!(folder.manifest.long);
    let wide_columns = scenario.columns.summary_wide();
    let wide: Vec<&str> = wide_columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(folder.summary.names().collect::<Vec<_>>(), wide);
    for (def, summary) in scenario.schema.metrics.iter().zip(&report.points[0].summaries) {
        let mean = folder.summary.numbers(&format!("{}_mean", def.name)).unwrap()[0];
        assert!(mean.to_bits() == summary.mean.to_bits() || (mean.is_nan() && summary.mean.is_nan()), "{}", def.name);
    }
    let series = folder.timeseries.as_ref().unwrap();
    let wide: Vec<&str> = scenario.columns.timeseries.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(series.names().collect::<Vec<_>>(), wide);

    let attribution = Table::read(&dir.join("attribution.parquet")).unwrap();
    let rows: Vec<(String, String, String, f64)> = (0..attribution.rows())
        .map(|r| {
            let text = |c: &str| attribution.strings(c).unwrap()[r].clone();
            (text("entry"), text("service"), text("reason"), attribution.numbers("mean").unwrap()[r])
        })
        .collect();
    let caused = rows.iter().find(|(e, s, why, _)| e == "s0.e" && s == "s1" && why == "error").expect("s1's errors");
    let metric = scenario.schema.metric_index("s0.e.failed_by.s1.error").unwrap();
    assert_eq!(caused.3, report.points[0].summaries[metric].mean);
    assert!(caused.3 > 10.0, "{caused:?}");
    assert!(rows.iter().all(|r| r.3 > 0.0), "only causes that occurred");
    let failures = rows.iter().filter(|(.., why, _)| why != "slow");
    assert!(failures.clone().all(|(e, s, ..)| e == "s0.e" && (s == "s1" || s == "s0")), "{rows:?}");
    // s1's errors are its own: it caused every failure it decided.
    let culprit = rows.iter().find(|(e, s, why, _)| e == "s0.e" && s == "s1" && why == "caused").expect("caused");
    assert_eq!(culprit.3, caused.3, "{rows:?}");
}

/// Issue 71: the report and the table agree on recovery whatever the grid's shape — a
/// faults axis (each point's own fault windows; the base has none), a case axis over
/// fixed faults, and both. A point whose `recovered_ratio` is 1 has its marker, at its
/// own last fault's end plus its mean recovery, and is never listed as "never recovered".
#[test]
fn report_and_table_agree_on_recovery_with_faults_and_cases_as_axes() {
    let base = "name = \"axes\"\nmodel = \"graph\"\n[run]\nhorizon_s = 12.0\nwarmup_s = 1.0\nreplicas = 2\n\
                [services.api]\nworkers = 8\n[services.api.endpoints.get]\nwork = { dist = \"exponential\", \
                mean_s = 0.004 }\n[[workload]]\nentry = \"api.get\"\nrate_per_s = 200.0\n";
    let fault = |start: f64| {
        format!("{{ target = \"api\", kind = \"slowdown\", factor = 3.0, start_s = {start}, duration_s = 2.0 }}")
    };
    let faults_axis = format!("[grid]\nfaults = [[{}], [{}]]\n", fault(3.0), fault(6.0));
    let fixed = format!("faults = [{}]\n", fault(3.0));
    let cases = "[[grid.case]]\nlabel = \"small\"\nservices = { api = { workers = 8 } }\n\
                 [[grid.case]]\nlabel = \"big\"\nservices = { api = { workers = 12 } }\n";
    for (shape, text) in [
        ("a faults axis", format!("{base}{faults_axis}")),
        ("a case axis", format!("{fixed}{base}{cases}")),
        ("both", format!("{base}{cases}{faults_axis}")),
    ] {
        let out = tempfile::tempdir().unwrap();
        let scenario = Scenario::resolve(text.parse().unwrap(), &Overrides::default()).unwrap();
        let report = execute(&scenario, out.path(), 2, &|| {}).unwrap();
        let folder = Folder::read(&report.output_dir).unwrap();
        let ctx = context(&folder);
        let section = sections::time_series(&ctx).unwrap();
        let queue = figures(&section.blocks).into_iter().find(|f| f.title.starts_with("queue depth")).unwrap();
        let recovered = folder.summary.numbers("recovered_ratio_mean").unwrap();
        let recovery = folder.summary.numbers("recovery_s_mean").unwrap();
        assert!(recovered.iter().all(|&r| r == 1.0), "{shape}: every point recovers: {recovered:?}");
        assert!(!queue.note.contains("Never recovered"), "{shape}: {}", queue.note);
        for point in &ctx.points {
            let label = format!("{}: recovered {} s", point.label, chart::short(recovery[point.index as usize]));
            assert!(queue.svg.contains(&label), "{shape}: marker for point {}: {label}", point.index);
        }
    }
}
