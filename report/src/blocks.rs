//! The report's building blocks, shared by every part that draws: a [`Section`] of
//! [`Block`]s, the grid points as the report names and colours them ([`PointInfo`],
//! [`points`]), the [`Context`] every section builder reads, and the two encoders
//! every block uses ([`escape`] for HTML, [`csv`] for the data beside a plot).
//!
//! It imports nothing from the sections that use it (`sections`, `race`, `topology`,
//! `page`), so the report's modules form layers: `folder`/`data` → `chart` →
//! `blocks` → `race`, `topology` → `sections` → `page`.

use plotters::style::RGBColor;
use stampede_run::summary::point_heading;
use stampede_scenario::models::metrics::Direction;
use stampede_scenario::models::presentation::Presentation;
use stampede_scenario::models::MetricDef;

use crate::chart::{series_colour, BarValue, Figure};
use crate::data;
use crate::folder::Folder;

/// A piece of a section.
pub enum Block {
    Figure(Figure),
    /// Small multiples side by side.
    Multiples(Vec<Figure>),
    /// Trusted HTML built here (every value escaped).
    Html(String),
    /// One of several groups shown at a time, chosen in the page (a heatmap's metric).
    Choice {
        label: String,
        options: Vec<(String, Vec<Figure>)>,
    },
    /// Folded away until opened.
    Details {
        summary: String,
        blocks: Vec<Block>,
    },
}

pub struct Section {
    pub id: String,
    pub title: String,
    pub intro: String,
    pub blocks: Vec<Block>,
}

/// One grid point as the report names it.
pub struct PointInfo {
    pub index: u32,
    /// Short: a case label, `servers=3`, or `#2`.
    pub label: String,
    /// The axis values in full, when the label is only `#index`.
    pub legend: Option<String>,
    pub params: Vec<(String, toml::Value)>,
    pub colour: RGBColor,
    /// Drawn in plots that overlay grid points (see [`OVERLAID`]).
    pub overlaid: bool,
    /// Its own fault windows, when a grid axis sets faults (`None`: the scenario's,
    /// in the presentation).
    pub windows: Option<Vec<stampede_scenario::models::presentation::Window>>,
}

/// Grid points whose own fault windows are read (each needs its model's presentation).
const POINT_WINDOWS_UP_TO: u32 = 64;

impl PointInfo {
    /// The label with its legend line, for legends and tables.
    pub fn long(&self) -> String {
        self.legend.clone().unwrap_or_else(|| self.label.clone())
    }
}

/// What every section builder reads.
pub struct Context<'a> {
    pub folder: &'a Folder,
    pub defs: Vec<MetricDef>,
    pub points: Vec<PointInfo>,
    /// Set when only some points are overlaid: says which.
    pub overlay_note: Option<String>,
    pub presentation: Presentation,
    /// The summary's columns and rows, looked up by name.
    pub summary: data::SummaryIndex<'a>,
    /// What a big graph's page draws in full (`None`: everything).
    pub focus: Option<crate::big::Focus>,
}

pub use stampede_output::markup::escape_html as escape;

/// CSV with a header row; fields holding a comma, quote or newline are quoted.
pub fn csv(header: &[&str], rows: impl IntoIterator<Item = Vec<String>>) -> String {
    let field = |f: &str| {
        if f.contains([',', '"', '\n']) {
            format!("\"{}\"", f.replace('"', "\"\""))
        } else {
            f.to_string()
        }
    };
    let mut out = header.iter().map(|h| field(h)).collect::<Vec<_>>().join(",");
    out.push('\n');
    for row in rows {
        out.push_str(&row.iter().map(|f| field(f)).collect::<Vec<_>>().join(","));
        out.push('\n');
    }
    out
}

/// A CSV value: six significant digits (the plots' data, not the archive — that is
/// the Parquet beside the page), empty when undefined.
pub(crate) fn num(v: f64) -> String {
    if v.is_finite() {
        let rounded: f64 = format!("{v:.5e}").parse().expect("a formatted float parses");
        format!("{rounded}")
    } else {
        String::new()
    }
}

/// At most this many grid points are overlaid in one plot (the palette's size).
pub const OVERLAID: usize = 8;

/// The points of the folder, labelled and coloured. A grid of more than
/// [`OVERLAID`] points overlays only its best and worst half-dozen by the first
/// headline metric (as the terminal summary does); the rest are grey in the tables
/// and absent from overlays. Returns the points and, then, a sentence saying so.
pub fn points(folder: &Folder, defs: &[MetricDef], summary: &data::SummaryIndex) -> (Vec<PointInfo>, Option<String>) {
    let n = folder.manifest.grid_points;
    let mut points: Vec<PointInfo> = (0..n)
        .map(|index| {
            let point = folder.scenario.as_ref().ok().and_then(|scenario| scenario.grid_point(index).ok());
            // A grid point's faults may be its own (a faults axis): its windows, then.
            let windows = point
                .as_ref()
                .filter(|p| !p.params.is_empty() && n <= POINT_WINDOWS_UP_TO)
                .map(|p| p.model.presentation(&p.run).windows);
            let params = point.map(|p| p.params).unwrap_or_default();
            let case = params.iter().find_map(|(path, value)| {
                (path == "case").then(|| value.get("label").and_then(|l| l.as_str()).map(str::to_string)).flatten()
            });
            let (label, legend) = match case {
                Some(case) if params.len() == 1 => (case, None),
                _ if params.is_empty() && n > 1 => (format!("#{index}"), None),
                _ => point_heading(index, &params),
            };
            PointInfo {
                index,
                label,
                legend,
                params,
                colour: series_colour(index as usize, n as usize),
                overlaid: true,
                windows,
            }
        })
        .collect();
    if points.len() <= OVERLAID {
        return (points, None);
    }
    let rank = defs.iter().find(|d| d.headline && d.direction != Direction::Neither);
    let mut order: Vec<usize> = (0..points.len()).collect();
    if let Some(rank) = rank {
        let value = |p: usize| summary.interval(p as u32, rank.name).map_or(f64::NAN, |v| v.value);
        // Best first; undefined values last.
        order.sort_by(|&a, &b| {
            let (va, vb) = (value(a), value(b));
            match (va.is_nan(), vb.is_nan()) {
                (true, true) => a.cmp(&b),
                (true, false) => std::cmp::Ordering::Greater,
                (false, true) => std::cmp::Ordering::Less,
                _ if rank.direction == Direction::Higher => vb.total_cmp(&va).then(a.cmp(&b)),
                _ => va.total_cmp(&vb).then(a.cmp(&b)),
            }
        });
    }
    let half = OVERLAID / 2;
    let mut chosen: Vec<usize> = order[..half].iter().chain(&order[order.len() - half..]).copied().collect();
    chosen.sort_unstable();
    for point in &mut points {
        point.overlaid = false;
        point.colour = RGBColor(0xa0, 0xa0, 0xa0);
    }
    for (i, &p) in chosen.iter().enumerate() {
        points[p].overlaid = true;
        points[p].colour = series_colour(i, chosen.len());
    }
    let by = rank.map_or_else(|| "their order in the grid".to_string(), |r| r.name.to_string());
    let note = format!(
        "{} grid points: plots that overlay points show the best {half} and the worst {half} by {by} (in colour); \
         tables and grid plots show all.",
        points.len()
    );
    (points, Some(note))
}

impl Context<'_> {
    /// The points drawn in plots that overlay points.
    pub(crate) fn overlaid(&self) -> impl Iterator<Item = &PointInfo> {
        self.points.iter().filter(|p| p.overlaid)
    }

    /// A section's introduction, with the overlay note when some points are left out.
    pub(crate) fn intro(&self, text: &str) -> String {
        match &self.overlay_note {
            Some(note) => format!("{text} {note}"),
            None => text.to_string(),
        }
    }

    pub(crate) fn headlines(&self) -> Vec<&MetricDef> {
        let headlines: Vec<&MetricDef> = self.defs.iter().filter(|d| d.headline).collect();
        if headlines.is_empty() {
            self.defs.iter().filter(|d| d.name != "events").take(6).collect()
        } else {
            headlines
        }
    }

    /// The headline metrics with a value at some grid point (a recovery time where no
    /// replica of any point recovered has none: a chart of it would be empty), and the
    /// names of those without.
    pub(crate) fn drawable_headlines(&self) -> (Vec<&MetricDef>, Vec<&'static str>) {
        let (drawn, empty): (Vec<&MetricDef>, Vec<&MetricDef>) = self.headlines().into_iter().partition(|def| {
            self.points.iter().any(|p| self.value(p.index, def.name).is_some_and(|v| v.value.is_finite()))
        });
        (drawn, empty.into_iter().map(|d| d.name).collect())
    }

    pub(crate) fn value(&self, point: u32, metric: &str) -> Option<BarValue> {
        self.summary.interval(point, metric)
    }
}

/// A figure's legend as inline HTML for a standalone page (fit, rare): a coloured line
/// and the label, one after another.
pub fn legend_html(figure: &crate::chart::Figure) -> String {
    figure
        .legend
        .iter()
        .map(|(label, colour)| {
            format!(
                "<span style=\"margin-right:1.2em\"><span style=\"display:inline-block;width:1.6em;height:.35em;\
                 vertical-align:middle;background:{}\"></span> {}</span>",
                crate::chart::hex(*colour),
                escape(label)
            )
        })
        .collect()
}
