//! `stampede map`: the stability map of a scenario over two numeric fields, printed
//! and written as `OUT/NAME-map/` (map.parquet, evaluations.parquet, map.json, one
//! SVG per grid point and map.html).

use std::path::{Path, PathBuf};

use clap::Args;
use stampede_optimize::map::{map, Crossing, MapRequest, Side, StabilityMap};
use stampede_optimize::space::Dimension;
use stampede_output::table::{ColumnSpec, ColumnType, ColumnValues, TableWriter};
use stampede_output::{Replace, StagedFile, StagedSet};
use stampede_report::map_page::{MapDot, MapPage, MapPanel, MapRow};
use stampede_scenario::{Error, Result};

use super::run::{progress_bar, threads};
use super::{resolve, warn, ScenarioArgs};

#[derive(Args)]
pub(super) struct MapArgs {
    /// A built-in scenario name or a path to a .toml file.
    pub(super) scenario: String,
    #[command(flatten)]
    pub(super) scenario_args: ScenarioArgs,
    /// The field searched for the boundary: PATH=LO..HI, optionally :log or :int
    /// (`faults.0.duration_s=0.01..0.5:log`).
    #[arg(long, value_name = "PATH=LO..HI[:log|:int]")]
    pub(super) x: String,
    /// The field the map's rows step through: PATH=LO..HI, optionally :log or :int.
    #[arg(long, value_name = "PATH=LO..HI[:log|:int]")]
    pub(super) y: String,
    /// The metric whose crossing of --level is the boundary.
    #[arg(long, value_name = "NAME", default_value = "recovered_ratio")]
    pub(super) metric: String,
    /// The level the metric's mean crosses (0.5 of recovered_ratio: half the replicas recover).
    #[arg(long, value_name = "V", default_value_t = 0.5, allow_hyphen_values = true)]
    pub(super) level: f64,
    /// Rows: values of y, evenly spread over its range on its scale, ends included.
    #[arg(long, value_name = "N", default_value_t = 6)]
    pub(super) ys: u32,
    /// Bisection stops when the bracket is at most this share of x's range (on its scale).
    #[arg(long, value_name = "SHARE", default_value_t = 1.0 / 64.0)]
    pub(super) tolerance: f64,
    /// Worker threads (default: all cores).
    #[arg(long, value_name = "T")]
    pub(super) threads: Option<usize>,
    /// Output root; the map goes to OUT/<scenario name>-map/.
    #[arg(long, value_name = "DIR", default_value = "out")]
    pub(super) out: PathBuf,
    /// Replace OUT/<scenario name>-map/ even if it holds files stampede did not write.
    #[arg(long)]
    pub(super) force: bool,
    /// Print the map as one JSON document on stdout (map.json).
    #[arg(long)]
    pub(super) json: bool,
    /// No progress and no table.
    #[arg(long)]
    pub(super) quiet: bool,
}

/// `--x`/`--y` as a dimension, its errors named by the flag.
fn dimension(flag: &str, text: &str) -> Result<Dimension> {
    Dimension::parse(text).map_err(|e| Error::bad_input(e.to_string().replacen("--range", flag, 1)))
}

pub(super) fn map_command(args: MapArgs) -> Result<()> {
    let scenario = resolve(&args.scenario, &args.scenario_args)?;
    warn(&scenario);
    let request = MapRequest {
        x: dimension("--x", &args.x)?,
        y: dimension("--y", &args.y)?,
        ys: args.ys,
        metric: args.metric.clone(),
        level: args.level,
        tolerance: args.tolerance,
        replicas: scenario.run.replicas,
    };
    request.check(&scenario)?;
    let threads = threads(args.threads)?;
    super::cost::check(
        "map",
        &scenario,
        super::cost::Planned::AtMost(request.planned_replicas(&scenario)),
        "--ys, --tolerance, the grid's points and run.replicas",
        threads,
        &args.out,
        args.quiet || args.json,
    )?;
    let name = format!("{}-map", scenario.name);
    let replace = stampede_run::pipeline::Writing { force: args.force, ..Default::default() }.replace();
    // Refused before anything runs: a destination that is not stampede's.
    stampede_output::folder::check_replaceable(&args.out.join(&name), replace)?;
    let bar = progress_bar(0, args.quiet || args.json);
    let started = std::time::Instant::now();
    let mut round_starts = |_round: u32, asked: usize| bar.inc_length(asked as u64 * u64::from(request.replicas));
    let drawn = map(&scenario, &request, threads, &|| bar.inc(1), &mut round_starts)?;
    bar.finish_and_clear();
    let lines = describe(&drawn, &scenario.name, started.elapsed().as_secs_f64());
    let dir = write_folder(&args.out, &name, &drawn, &scenario.name, &lines, replace)?;
    if args.json {
        super::print_json(&drawn.to_json());
    } else if !args.quiet {
        for line in &lines {
            println!("{line}");
        }
        println!("wrote {} (map.html, map.parquet)", dir.display());
    }
    Ok(())
}

/// `faults.0.duration_s = 0.31 [0.27, 0.36]`.
fn boundary_text(drawn: &StabilityMap, x: f64, band: (f64, f64)) -> String {
    use stampede_report::chart::short;
    format!("{} = {} [{}, {}]", drawn.request.x.path, short(x), short(band.0), short(band.1))
}

/// What a row says: its boundary with the side below it, or the side it stays on.
fn row_text(drawn: &StabilityMap, crossing: &Crossing) -> String {
    match crossing {
        Crossing::Boundary { x, band, low_side } => {
            format!("boundary {}; below it {}", boundary_text(drawn, *x, *band), drawn.side_name(*low_side))
        }
        Crossing::Never { side } => format!("no crossing in range: {} everywhere", drawn.side_name(*side)),
        Crossing::Undefined => {
            format!("{} undefined at an end of the range (no replica gave a value)", drawn.request.metric)
        }
    }
}

/// The terminal's lines (also the page's notes).
fn describe(drawn: &StabilityMap, scenario: &str, seconds: f64) -> Vec<String> {
    use stampede_report::chart::short;
    let r = &drawn.request;
    let scale = |d: &Dimension| match d.scale {
        stampede_optimize::space::Scale::Log => ", log",
        stampede_optimize::space::Scale::Integer => ", integers",
        stampede_optimize::space::Scale::Linear => "",
    };
    let mut lines = vec![format!(
        "{scenario}: where {} crosses {} over {} ({}..{}{}) × {} ({}..{}{}), {} replicas an evaluation (the same seeds for every one)",
        r.metric,
        r.level,
        r.x.path,
        short(r.x.low),
        short(r.x.high),
        scale(&r.x),
        r.y.path,
        short(r.y.low),
        short(r.y.high),
        scale(&r.y),
        r.replicas
    )];
    for (grid, label) in drawn.labels.iter().enumerate() {
        if drawn.labels.len() > 1 {
            lines.push(format!("#{grid} {label}"));
        }
        lines.extend(boundary_lines(drawn, grid as u32));
    }
    if !drawn.rows.iter().any(|row| matches!(row.crossing, Crossing::Boundary { .. })) {
        lines.push(format!(
            "the level {} is never crossed in this range: widen --x or --y, or choose another --level",
            r.level
        ));
    }
    let refused: Vec<_> = drawn.refused().collect();
    if let Some(first) = refused.first() {
        lines.push(format!(
            "{} of {} evaluations refused as overloaded and counted beyond the level (×), e.g. {} = {}, {} = {}: {}",
            refused.len(),
            drawn.evaluations.len(),
            r.x.path,
            short(first.x),
            r.y.path,
            short(first.y),
            first.refused.as_deref().unwrap_or_default()
        ));
    }
    let run = drawn.evaluations.len() as u64 - refused.len() as u64;
    let full = drawn.full_grid_evaluations();
    lines.push(format!(
        "cost: {run} evaluations × {} replicas in {} round{}, {seconds:.1} s; the full grid at this resolution would be {full} \
         evaluations ({:.1}× more)",
        r.replicas,
        drawn.rounds,
        if drawn.rounds == 1 { "" } else { "s" },
        full as f64 / run as f64
    ));
    lines
}

/// Grid point `grid`'s boundary, a line per y: where x crosses the level (flagged
/// when not monotone in x), or one line when no row has a boundary and all fall on
/// the same side.
fn boundary_lines(drawn: &StabilityMap, grid: u32) -> Vec<String> {
    use stampede_report::chart::short;
    let y_path = &drawn.request.y.path;
    let rows: Vec<_> = drawn.rows.iter().filter(|row| row.grid == grid).collect();
    let sides: Vec<Option<Side>> =
        rows.iter().map(|row| if let Crossing::Never { side } = row.crossing { Some(side) } else { None }).collect();
    if let Some(Some(side)) = sides.first().filter(|_| sides.iter().all(|s| *s == sides[0])) {
        return vec![format!("  no boundary in range: {} at every {y_path}", drawn.side_name(*side))];
    }
    rows.iter()
        .map(|row| {
            let flag = if row.monotone { "" } else { "; not monotone in x: the boundary may be one of several" };
            format!("  {y_path} = {:<8} {}{flag}", short(row.y), row_text(drawn, &row.crossing))
        })
        .collect()
}

/// The picture's data for grid point `grid`.
fn panel(drawn: &StabilityMap, grid: u32) -> MapPanel {
    let level = drawn.request.level;
    let rows: Vec<MapRow> = drawn
        .rows
        .iter()
        .filter(|row| row.grid == grid)
        .map(|row| match &row.crossing {
            Crossing::Boundary { x, band, low_side } => MapRow {
                y: row.y,
                boundary: Some((*x, band.0, band.1)),
                low_end_above: *low_side == Side::Above,
                undefined: false,
            },
            Crossing::Never { side } => {
                MapRow { y: row.y, boundary: None, low_end_above: *side == Side::Above, undefined: false }
            }
            Crossing::Undefined => MapRow { y: row.y, boundary: None, low_end_above: false, undefined: true },
        })
        .collect();
    let dots = drawn
        .evaluations
        .iter()
        .filter(|e| e.grid == grid && !e.mean.is_nan())
        .map(|e| {
            let above = e.mean >= level;
            let sure = if above { e.ci_lo >= level } else { e.ci_hi < level };
            MapDot { x: e.x, y: e.y, above, sure, refused: e.refused.is_some() }
        })
        .collect();
    let crossed =
        drawn.rows.iter().filter(|r| r.grid == grid && matches!(r.crossing, Crossing::Boundary { .. })).count();
    let summary = if crossed == 0 {
        format!("No boundary in range: the level {level} is not crossed at any {}.", drawn.request.y.path)
    } else {
        format!(
            "The boundary crosses {crossed} of its rows; the evaluations: {}.",
            drawn.evaluations.iter().filter(|e| e.grid == grid).count()
        )
    };
    let wavering: Vec<String> = drawn
        .rows
        .iter()
        .filter(|r| r.grid == grid && !r.monotone)
        .map(|r| stampede_report::chart::short(r.y))
        .collect();
    let summary = if wavering.is_empty() {
        summary
    } else {
        format!(
            "{summary} Not monotone in x at {} = {}: the boundary may be one of several.",
            drawn.request.y.path,
            wavering.join(", ")
        )
    };
    MapPanel { label: drawn.labels[grid as usize].clone(), rows, dots, summary }
}

/// The page's data.
pub(super) fn page(drawn: &StabilityMap, scenario: &str, notes: &[String]) -> MapPage {
    use stampede_optimize::space::Scale;
    MapPage {
        scenario: scenario.to_string(),
        x_label: drawn.request.x.path.clone(),
        y_label: drawn.request.y.path.clone(),
        x_range: (drawn.request.x.low, drawn.request.x.high),
        y_range: (drawn.request.y.low, drawn.request.y.high),
        x_log: drawn.request.x.scale == Scale::Log,
        y_log: drawn.request.y.scale == Scale::Log,
        above_name: drawn.side_name(Side::Above),
        below_name: drawn.side_name(Side::Below),
        above_better: drawn.good_side().map(|s| s == Side::Above),
        panels: (0..drawn.labels.len() as u32).map(|g| panel(drawn, g)).collect(),
        notes: notes.to_vec(),
    }
}

/// `map.parquet`: one row per (grid point, y): the boundary and its band, or the side.
fn write_rows(dir: &Path, drawn: &StabilityMap) -> Result<StagedFile> {
    let columns = [
        ColumnSpec::new("grid_point", ColumnType::U32),
        ColumnSpec::new("label", ColumnType::Utf8),
        ColumnSpec::new("y", ColumnType::F64),
        ColumnSpec::new("crossed", ColumnType::Bool),
        ColumnSpec::new("boundary_x", ColumnType::F64),
        ColumnSpec::new("band_lo", ColumnType::F64),
        ColumnSpec::new("band_hi", ColumnType::F64),
        ColumnSpec::new("below_boundary", ColumnType::Utf8),
        ColumnSpec::new("evaluations", ColumnType::U32),
        ColumnSpec::new("monotone", ColumnType::Bool),
    ];
    let mut table = TableWriter::create(dir, "map.parquet", &columns)?;
    let rows = &drawn.rows;
    let field = |f: &dyn Fn(&Crossing) -> f64| rows.iter().map(|r| f(&r.crossing)).collect::<Vec<f64>>();
    table.write(vec![
        ColumnValues::U32(rows.iter().map(|r| r.grid).collect()),
        ColumnValues::Utf8(rows.iter().map(|r| drawn.labels[r.grid as usize].clone()).collect()),
        ColumnValues::F64(rows.iter().map(|r| r.y).collect()),
        ColumnValues::Bool(rows.iter().map(|r| Some(matches!(r.crossing, Crossing::Boundary { .. }))).collect()),
        ColumnValues::F64(field(&|c| if let Crossing::Boundary { x, .. } = c { *x } else { f64::NAN })),
        ColumnValues::F64(field(&|c| if let Crossing::Boundary { band, .. } = c { band.0 } else { f64::NAN })),
        ColumnValues::F64(field(&|c| if let Crossing::Boundary { band, .. } = c { band.1 } else { f64::NAN })),
        ColumnValues::Utf8(
            rows.iter()
                .map(|r| match &r.crossing {
                    Crossing::Boundary { low_side, .. } => low_side.word().to_string(),
                    Crossing::Never { side } => side.word().to_string(),
                    Crossing::Undefined => "undefined".to_string(),
                })
                .collect(),
        ),
        ColumnValues::U32(rows.iter().map(|r| r.evaluations).collect()),
        ColumnValues::Bool(rows.iter().map(|r| Some(r.monotone)).collect()),
    ])?;
    Ok(table.finish()?)
}

/// `evaluations.parquet`: every simulated (grid point, y, x).
fn write_evaluations(dir: &Path, drawn: &StabilityMap) -> Result<StagedFile> {
    let columns = [
        ColumnSpec::new("grid_point", ColumnType::U32),
        ColumnSpec::new("round", ColumnType::U32),
        ColumnSpec::new("y", ColumnType::F64),
        ColumnSpec::new("x", ColumnType::F64),
        ColumnSpec::new("replicas", ColumnType::U32),
        ColumnSpec::new("mean", ColumnType::F64),
        ColumnSpec::new("ci_lo", ColumnType::F64),
        ColumnSpec::new("ci_hi", ColumnType::F64),
        ColumnSpec::nullable("refused", ColumnType::Utf8),
    ];
    let mut table = TableWriter::create(dir, "evaluations.parquet", &columns)?;
    let e = &drawn.evaluations;
    table.write(vec![
        ColumnValues::U32(e.iter().map(|e| e.grid).collect()),
        ColumnValues::U32(e.iter().map(|e| e.round).collect()),
        ColumnValues::F64(e.iter().map(|e| e.y).collect()),
        ColumnValues::F64(e.iter().map(|e| e.x).collect()),
        // A point refused as overloaded ran no replica.
        ColumnValues::U32(e.iter().map(|e| if e.refused.is_some() { 0 } else { drawn.request.replicas }).collect()),
        ColumnValues::F64(e.iter().map(|e| e.mean).collect()),
        ColumnValues::F64(e.iter().map(|e| e.ci_lo).collect()),
        ColumnValues::F64(e.iter().map(|e| e.ci_hi).collect()),
        ColumnValues::NullableUtf8(e.iter().map(|e| e.refused.clone()).collect()),
    ])?;
    Ok(table.finish()?)
}

/// Writes `out/name/` atomically: the tables, map.json, the SVGs, map.html and a
/// manifest listing them (so the next map may replace the folder).
fn write_folder(
    out: &Path,
    name: &str,
    drawn: &StabilityMap,
    scenario: &str,
    notes: &[String],
    replace: Replace,
) -> Result<PathBuf> {
    let folder = stampede_run::pipeline::begin_folder(out, name, replace)?;
    let dir = folder.path().to_path_buf();
    let page = page(drawn, scenario, notes);
    let mut staged = StagedSet::default();
    staged.push(write_rows(&dir, drawn)?);
    staged.push(write_evaluations(&dir, drawn)?);
    let json = serde_json::to_vec_pretty(&drawn.to_json()).expect("JSON serialises");
    staged.push(StagedFile::with_contents(&dir, "map.json", &json)?);
    let mut files = vec!["map.parquet".to_string(), "evaluations.parquet".to_string(), "map.json".to_string()];
    for (grid, panel) in page.panels.iter().enumerate() {
        let file = format!("map-{grid}.svg");
        staged.push(StagedFile::with_contents(&dir, &file, stampede_report::map_page::svg(&page, panel).as_bytes())?);
        files.push(file);
    }
    staged.push(StagedFile::with_contents(&dir, "map.html", stampede_report::map_page::render(&page).as_bytes())?);
    files.push("map.html".to_string());
    let manifest = serde_json::json!({
        "tool": "stampede",
        "kind": "map",
        "version": stampede_scenario::base::provenance::VERSION,
        "scenario": scenario,
        "command_line": stampede_scenario::base::provenance::command_line(),
        "files": files,
    });
    let manifest = serde_json::to_vec_pretty(&manifest).expect("JSON serialises");
    staged.push(StagedFile::with_contents(&dir, "manifest.json", &manifest)?);
    staged.commit()?;
    Ok(folder.commit()?)
}
