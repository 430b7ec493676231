//! The report's three kinds of chart — lines with bands, bars with whiskers (grouped
//! or stacked), heatmaps — drawn to SVG strings with `plotters`.
//!
//! A chart is plain data ([`LinePlot`], [`BarPlot`], [`Heatmap`]) built by the
//! sections and rendered here, so what a plot shows is testable without parsing SVG.
//! Every rendered chart gets hover targets: transparent circles (or the bars
//! themselves) carrying an SVG `<title>`, which every browser shows on hover with no
//! script. Colours come from the Okabe–Ito palette (safe for the common colour-vision
//! deficiencies); more than eight series use a sequential cividis-like ramp.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Pixel size of a full-width chart.
pub const WIDE: (u32, u32) = (880, 380);
/// Pixel size of a chart in a grid of small multiples.
pub const SMALL: (u32, u32) = (430, 300);

/// Okabe & Ito (2008), ordered so the first colours contrast most on white.
const OKABE_ITO: [RGBColor; 8] = [
    RGBColor(0x00, 0x72, 0xB2), // blue
    RGBColor(0xD5, 0x5E, 0x00), // vermillion
    RGBColor(0x00, 0x9E, 0x73), // bluish green
    RGBColor(0xE6, 0x9F, 0x00), // orange
    RGBColor(0xCC, 0x79, 0xA7), // reddish purple
    RGBColor(0x56, 0xB4, 0xE9), // sky blue
    RGBColor(0x00, 0x00, 0x00), // black
    RGBColor(0xF0, 0xE4, 0x42), // yellow (last: low contrast on white)
];

/// Anchors of a cividis-like ramp (dark blue → grey → yellow): monotone in lightness,
/// readable with any common colour-vision deficiency.
const RAMP: [RGBColor; 5] = [
    RGBColor(0x00, 0x22, 0x4E),
    RGBColor(0x35, 0x45, 0x6C),
    RGBColor(0x7C, 0x7B, 0x78),
    RGBColor(0xBC, 0xAF, 0x6F),
    RGBColor(0xFE, 0xE8, 0x38),
];

/// The colour of series `i` of `n`.
pub fn series_colour(i: usize, n: usize) -> RGBColor {
    if n <= OKABE_ITO.len() {
        OKABE_ITO[i % OKABE_ITO.len()]
    } else {
        ramp(i as f64 / (n - 1) as f64 * 0.85)
    }
}

/// The ramp at `t` in [0, 1].
pub fn ramp(t: f64) -> RGBColor {
    let t = if t.is_finite() { t.clamp(0.0, 1.0) } else { 0.0 };
    let scaled = t * (RAMP.len() - 1) as f64;
    let i = (scaled.floor() as usize).min(RAMP.len() - 2);
    let f = scaled - i as f64;
    let mix = |a: u8, b: u8| (a as f64 + (b as f64 - a as f64) * f).round() as u8;
    let (a, b) = (RAMP[i], RAMP[i + 1]);
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// `#rrggbb`.
pub fn hex(colour: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", colour.0, colour.1, colour.2)
}

/// A rendered chart: its SVG, the data behind it as CSV, and its legend.
#[derive(Clone, Debug)]
pub struct Figure {
    /// What kind of plot (`timeseries`, `percentiles`, `cdf`, `grid-line`, `heatmap`,
    /// `bars`, `outcomes`, `funnel`, `counts`): the browser test looks plots up by it.
    pub kind: &'static str,
    pub title: String,
    pub svg: String,
    /// The data drawn, one row per point, with a header row.
    pub csv: String,
    /// How many data points are drawn (0 means an empty plot).
    pub points: usize,
    pub legend: Vec<(String, RGBColor)>,
    /// A sentence under the plot (what the marks mean).
    pub note: String,
}

/// How an axis maps values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    Linear,
    Log,
    /// `x = 1/(1−q)` on a log axis, labelled as percentiles (p90, p99, …).
    Percentile,
}

#[derive(Clone, Debug)]
pub struct Axis {
    pub label: String,
    pub scale: Scale,
}

impl Axis {
    pub fn linear(label: impl Into<String>) -> Axis {
        Axis { label: label.into(), scale: Scale::Linear }
    }
}

/// One point of a line; `lo`/`hi` are its 95% interval (a band, or a whisker).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub x: f64,
    pub y: f64,
    pub interval: Option<(f64, f64)>,
}

#[derive(Clone, Debug)]
pub struct Line {
    pub label: String,
    pub colour: RGBColor,
    pub points: Vec<Point>,
    /// Intervals drawn as whiskers at each point (grids) instead of a band (time).
    pub whiskers: bool,
}

/// A shaded stretch of x (a fault window).
#[derive(Clone, Debug)]
pub struct Window {
    pub label: String,
    pub from: f64,
    pub to: f64,
}

/// A vertical line at `x` (a recovery instant), with an optional interval on x.
#[derive(Clone, Debug)]
pub struct Marker {
    pub label: String,
    pub colour: RGBColor,
    pub x: f64,
    pub interval: Option<(f64, f64)>,
}

/// A shaded stretch of y (the recovery band).
#[derive(Clone, Debug)]
pub struct Band {
    pub label: String,
    pub colour: RGBColor,
    pub from: f64,
    pub to: f64,
}

#[derive(Clone, Debug)]
pub struct LinePlot {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub lines: Vec<Line>,
    pub windows: Vec<Window>,
    pub markers: Vec<Marker>,
    pub bands: Vec<Band>,
    pub size: (u32, u32),
}

/// Hover targets drawn after the chart: pixel position and the text shown.
type Hovers = Vec<(i32, i32, String)>;

/// A number in at most four significant digits, without exponent noise for the
/// usual magnitudes.
pub fn short(value: f64) -> String {
    if !value.is_finite() {
        return if value.is_nan() { "–".into() } else { format!("{value}") };
    }
    let magnitude = value.abs();
    if magnitude == 0.0 {
        "0".into()
    } else if !(1e-4..1e6).contains(&magnitude) {
        stampede_scenario::base::numbers::scientific(value, 3)
    } else {
        let decimals = (3 - magnitude.log10().floor() as i32).clamp(0, 6) as usize;
        let text = format!("{value:.decimals$}");
        if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            text
        }
    }
}

/// `x = 1/(1−q)` as a percentile label: 10 → "p90", 1000 → "p99.9".
pub fn percentile_label(x: f64) -> String {
    if x <= 1.0 {
        return "p0".into();
    }
    let q = 100.0 * (1.0 - 1.0 / x);
    format!("p{}", short((q * 1000.0).round() / 1000.0))
}

fn tick(scale: Scale) -> fn(&f64) -> String {
    match scale {
        Scale::Percentile => |v| percentile_label(*v),
        Scale::Linear => |v| short(*v),
        Scale::Log => log_tick,
    }
}

/// A log axis labels only 1, 2 and 5 times a power of ten: plotters puts a tick at
/// every integer multiple, whose labels crowd the top of each decade (60, 70, 80, 90,
/// 100) and can print one value twice.
fn log_tick(value: &f64) -> String {
    if !(value.is_finite() && *value > 0.0) {
        return String::new();
    }
    let mantissa = value / 10f64.powf(value.log10().floor());
    let round = [1.0, 2.0, 5.0, 10.0].iter().any(|m| (mantissa - m).abs() < 1e-6 * m);
    if round {
        short(*value)
    } else {
        String::new()
    }
}

/// `[lo, hi]` widened so that a constant or empty series still has a visible range;
/// on a log axis, strictly positive.
fn range(values: impl Iterator<Item = f64>, log: bool, from_zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        return if log { (0.1, 1.0) } else { (0.0, 1.0) };
    }
    if log {
        if hi / lo < 1.5 {
            return (lo / 1.25, hi * 1.25);
        }
        return (lo / 1.1, hi * 1.1);
    }
    if from_zero && lo >= 0.0 {
        lo = 0.0;
    }
    if hi - lo < 1e-12 * hi.abs().max(1.0) {
        let pad = hi.abs().max(1.0) * 0.1;
        return (lo - pad, hi + pad);
    }
    let pad = (hi - lo) * 0.05;
    (if from_zero && lo == 0.0 { 0.0 } else { lo - pad }, hi + pad)
}

fn svg_escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Adds the hover targets before the SVG's closing tag and makes the SVG scale with
/// the page (a viewBox with a relative width).
fn finish_svg(mut svg: String, hovers: Hovers, radius: u32) -> String {
    let mut targets = String::new();
    for (x, y, text) in hovers {
        targets.push_str(&format!(
            "<circle class=\"hover\" cx=\"{x}\" cy=\"{y}\" r=\"{radius}\"><title>{}</title></circle>\n",
            svg_escape(&text)
        ));
    }
    if let Some(end) = svg.rfind("</svg>") {
        svg.insert_str(end, &targets);
    }
    // plotters writes width/height in pixels; the page scales the SVG to its column.
    if let Some(start) = svg.find("<svg width=\"") {
        if let Some(view) = svg[start..].find(" viewBox") {
            let head = svg[start..start + view].to_string();
            svg = svg.replacen(&head, "<svg class=\"chart\"", 1);
        }
    }
    svg
}

type Drawn = Result<Hovers, String>;

/// A bar chart's plotting area: categories at 0, 1, … on x, values on y.
type BarChart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// An interval in pixels: a line from `from` to `to` with 8-pixel caps across both ends
/// (vertical whiskers on points and bars, horizontal on a recovery marker).
fn whisker(
    root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    from: (i32, i32),
    to: (i32, i32),
    style: ShapeStyle,
) -> Result<(), String> {
    let cap = |(x, y): (i32, i32)| {
        if from.0 == to.0 {
            vec![(x - 4, y), (x + 4, y)]
        } else {
            vec![(x, y - 4), (x, y + 4)]
        }
    };
    root.draw(&PathElement::new(vec![from, to], style)).map_err(err)?;
    root.draw(&PathElement::new(cap(from), style)).map_err(err)?;
    root.draw(&PathElement::new(cap(to), style)).map_err(err)
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Draws `plot` on coordinates `$x` × `$y` (linear or log ranges): the same body for
/// every combination of scales, since plotters types each one differently.
macro_rules! draw_lines {
    ($plot:expr, $svg:expr, $x:expr, $y:expr, $xr:expr, $yr:expr) => {{
        let plot: &LinePlot = $plot;
        let root = SVGBackend::with_string($svg, plot.size).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        // Fault windows are labelled in a strip above the plot, one row each, never over the data.
        let mut chart = ChartBuilder::on(&root)
            .margin(14)
            .margin_top(14 + 14 * plot.windows.len() as u32)
            .x_label_area_size(42)
            .y_label_area_size(66)
            .build_cartesian_2d($x, $y)
            .map_err(err)?;
        let x_tick = tick(plot.x.scale);
        let y_tick = tick(plot.y.scale);
        // On a log axis plotters can put two ticks at one value (99.99999 and 100): each
        // label is printed once.
        let (x_seen, y_seen) = (std::cell::RefCell::new(Vec::new()), std::cell::RefCell::new(Vec::new()));
        let once = |seen: &std::cell::RefCell<Vec<String>>, text: String| {
            if text.is_empty() || seen.borrow().contains(&text) {
                return String::new();
            }
            seen.borrow_mut().push(text.clone());
            text
        };
        let x_axis_label = |v: &f64| once(&x_seen, x_tick(v));
        let y_axis_label = |v: &f64| once(&y_seen, y_tick(v));
        chart
            .configure_mesh()
            .x_desc(plot.x.label.as_str())
            .y_desc(plot.y.label.as_str())
            .x_label_formatter(&x_axis_label)
            .y_label_formatter(&y_axis_label)
            .axis_desc_style(("sans-serif", 13))
            .label_style(("sans-serif", 11))
            .max_light_lines(1)
            .light_line_style(RGBColor(0xf2, 0xf2, 0xf2))
            .bold_line_style(RGBColor(0xdd, 0xdd, 0xdd))
            .draw()
            .map_err(err)?;
        let (x0, x1): (f64, f64) = $xr;
        let (y0, y1): (f64, f64) = $yr;
        let clamp_x = |x: f64| x.clamp(x0, x1);
        let clamp_y = |y: f64| y.clamp(y0, y1);
        let label_style = TextStyle::from(("sans-serif", 11).into_font()).color(&RGBColor(0x44, 0x44, 0x44));
        for band in &plot.bands {
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x0, clamp_y(band.from)), (x1, clamp_y(band.to))],
                    band.colour.mix(0.10).filled(),
                )))
                .map_err(err)?;
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(x0, clamp_y(band.to)), (x1, clamp_y(band.to))],
                    band.colour.mix(0.6).stroke_width(1),
                )))
                .map_err(err)?;
            // Right-aligned just above its line, clear of the axis and the windows' labels.
            let (px, py) = chart.backend_coord(&(x1, clamp_y(band.to)));
            let style = label_style.clone().pos(Pos::new(HPos::Right, VPos::Bottom));
            root.draw(&Text::new(band.label.clone(), (px - 4, py - 2), style)).map_err(err)?;
        }
        for (i, window) in plot.windows.iter().enumerate() {
            let (from, to) = (clamp_x(window.from), clamp_x(window.to));
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(from, y0), (to, y1)],
                    RGBColor(0x99, 0x99, 0x99).mix(0.16).filled(),
                )))
                .map_err(err)?;
            // Above the plot, a row per window (the first on top), so that windows
            // starting together stay legible and no label covers a curve.
            let (px, py) = chart.backend_coord(&(from, y1));
            let rows_below = (plot.windows.len() - 1 - i) as i32;
            let style = label_style.clone().pos(Pos::new(HPos::Left, VPos::Bottom));
            root.draw(&Text::new(window.label.clone(), (px + 1, py - 3 - 14 * rows_below), style)).map_err(err)?;
        }
        let mut hovers: Hovers = Vec::new();
        for line in &plot.lines {
            let points: Vec<&Point> = line.points.iter().filter(|p| p.x.is_finite() && p.y.is_finite()).collect();
            if !line.whiskers {
                let upper: Vec<(f64, f64)> = points
                    .iter()
                    .filter_map(|p| {
                        p.interval.filter(|(lo, hi)| lo.is_finite() && hi.is_finite()).map(|(_, hi)| (p.x, clamp_y(hi)))
                    })
                    .collect();
                let lower: Vec<(f64, f64)> = points
                    .iter()
                    .rev()
                    .filter_map(|p| {
                        p.interval.filter(|(lo, hi)| lo.is_finite() && hi.is_finite()).map(|(lo, _)| (p.x, clamp_y(lo)))
                    })
                    .collect();
                if upper.len() > 1 {
                    let polygon: Vec<(f64, f64)> = upper.into_iter().chain(lower).collect();
                    chart
                        .draw_series(std::iter::once(Polygon::new(polygon, line.colour.mix(0.2).filled())))
                        .map_err(err)?;
                }
            }
            let path: Vec<(f64, f64)> = points.iter().map(|p| (p.x, clamp_y(p.y))).collect();
            chart.draw_series(std::iter::once(PathElement::new(path, line.colour.stroke_width(2)))).map_err(err)?;
            if line.whiskers {
                for p in &points {
                    chart
                        .draw_series(std::iter::once(Circle::new((p.x, clamp_y(p.y)), 3, line.colour.filled())))
                        .map_err(err)?;
                    if let Some((lo, hi)) = p.interval.filter(|(lo, hi)| lo.is_finite() && hi.is_finite()) {
                        let (px, _) = chart.backend_coord(&(p.x, p.y));
                        let (_, plo) = chart.backend_coord(&(p.x, clamp_y(lo)));
                        let (_, phi) = chart.backend_coord(&(p.x, clamp_y(hi)));
                        whisker(&root, (px, plo), (px, phi), line.colour.stroke_width(1))?;
                    }
                }
            }
            // About 320 hover targets per chart keep the file small.
            let per_line = (320 / plot.lines.len().max(1)).clamp(8, 120);
            let step = points.len().div_ceil(per_line).max(1);
            for p in points.iter().step_by(step) {
                let (px, py) = chart.backend_coord(&(p.x, clamp_y(p.y)));
                let x_text = x_tick(&p.x);
                let interval =
                    p.interval.map(|(lo, hi)| format!(" [{}, {}]", short(lo), short(hi))).unwrap_or_default();
                hovers.push((
                    px,
                    py,
                    format!(
                        "{}: {} = {}, {} = {}{interval}",
                        line.label,
                        plot.x.label,
                        x_text,
                        plot.y.label,
                        short(p.y)
                    ),
                ));
            }
        }
        for marker in &plot.markers {
            let x = clamp_x(marker.x);
            let (px, ptop) = chart.backend_coord(&(x, y1));
            let (_, pbottom) = chart.backend_coord(&(x, y0));
            let style = marker.colour.stroke_width(2);
            root.draw(&PathElement::new(vec![(px, ptop), (px, pbottom)], style)).map_err(err)?;
            if let Some((lo, hi)) = marker.interval.filter(|(lo, hi)| lo.is_finite() && hi.is_finite()) {
                let (plo, _) = chart.backend_coord(&(clamp_x(lo), y1));
                let (phi, _) = chart.backend_coord(&(clamp_x(hi), y1));
                whisker(&root, (plo, ptop + 6), (phi, ptop + 6), style)?;
            }
            hovers.push((px, ptop + 6, marker.label.clone()));
        }
        root.present().map_err(err)?;
        drop(chart);
        drop(root);
        Ok(hovers)
    }};
}

impl LinePlot {
    /// Draws the plot; `kind`, `csv` and `note` go with it into the figure.
    pub fn render(&self, kind: &'static str, csv: String, note: String) -> Figure {
        let log_x = self.x.scale != Scale::Linear;
        let log_y = self.y.scale != Scale::Linear;
        let xs = self
            .lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.x))
            .chain(self.markers.iter().map(|m| m.x))
            .chain(self.windows.iter().flat_map(|w| [w.from, w.to]));
        let (x0, x1) = range(xs, log_x, false);
        let ys = self
            .lines
            .iter()
            .flat_map(|l| {
                l.points.iter().flat_map(|p| {
                    let (lo, hi) = p.interval.unwrap_or((p.y, p.y));
                    [p.y, lo, hi]
                })
            })
            .chain(self.bands.iter().map(|b| b.to));
        let (y0, y1) = range(ys, log_y, true);
        let mut svg = String::new();
        let drawn: Drawn = (|| match (log_x, log_y) {
            (false, false) => draw_lines!(self, &mut svg, x0..x1, y0..y1, (x0, x1), (y0, y1)),
            (false, true) => draw_lines!(self, &mut svg, x0..x1, (y0..y1).log_scale(), (x0, x1), (y0, y1)),
            (true, false) => draw_lines!(self, &mut svg, (x0..x1).log_scale(), y0..y1, (x0, x1), (y0, y1)),
            (true, true) => draw_lines!(self, &mut svg, (x0..x1).log_scale(), (y0..y1).log_scale(), (x0, x1), (y0, y1)),
        })();
        let hovers = drawn.unwrap_or_else(|e| vec![(10, 20, format!("drawing failed: {e}"))]);
        let points = self.lines.iter().map(|l| l.points.iter().filter(|p| p.y.is_finite()).count()).sum();
        Figure {
            kind,
            title: self.title.clone(),
            svg: finish_svg(svg, hovers, 4),
            csv,
            points,
            legend: self.lines.iter().map(|l| (l.label.clone(), l.colour)).collect(),
            note,
        }
    }
}

/// One bar's value and, where known, its 95% interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BarValue {
    pub value: f64,
    pub interval: Option<(f64, f64)>,
    /// (defined, replicas) when the value is a mean over only the replicas where the
    /// metric is defined; `None` when it covers all.
    pub covered: Option<(u64, u64)>,
}

/// A series of bars, one per category (`None`: nothing to draw there).
#[derive(Clone, Debug)]
pub struct BarSeries {
    pub label: String,
    pub colour: RGBColor,
    pub values: Vec<Option<BarValue>>,
}

#[derive(Clone, Debug)]
pub struct BarPlot {
    pub title: String,
    pub y_label: String,
    pub categories: Vec<String>,
    pub series: Vec<BarSeries>,
    /// Series stack on each other instead of standing side by side.
    pub stacked: bool,
    /// A colour per category overriding the series colour (one series of grid points).
    pub category_colours: Vec<RGBColor>,
    /// Short names for the categories (`#3` for grid point 3), drawn under the bars
    /// when the full names do not fit in three lines each; empty: `a`, `b`, ….
    pub keys: Vec<String>,
    pub size: (u32, u32),
}

/// Under-bar labels: each category's lines, or its key when some name does not fit.
#[derive(Clone, Debug, PartialEq)]
enum CategoryLabels {
    Wrapped(Vec<Vec<String>>),
    Keyed(Vec<String>),
}

/// About how wide an 11 px sans-serif character is, in pixels.
const CHAR_PX: f64 = 6.4;
/// The most lines a category name may take under its bar.
const LABEL_LINES: usize = 3;

/// `text` broken at spaces into lines of at most `width` characters, or `None` if a
/// word is longer than that or more than [`LABEL_LINES`] lines are needed.
fn wrap_label(text: &str, width: usize) -> Option<Vec<String>> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        if word.chars().count() > width {
            return None;
        }
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    (lines.len() <= LABEL_LINES).then_some(lines)
}

impl BarPlot {
    pub fn render(&self, kind: &'static str, csv: String, note: String) -> Figure {
        let mut svg = String::new();
        let drawn = self.draw(&mut svg);
        let note = match self.category_labels() {
            CategoryLabels::Keyed(keys) => {
                // A name that starts with its key says it once ("#0 today", not "#0: #0 today").
                let named: Vec<String> = keys
                    .iter()
                    .zip(&self.categories)
                    .map(|(key, name)| match name.strip_prefix(key.as_str()) {
                        Some(rest) if rest.is_empty() || rest.starts_with(' ') => name.clone(),
                        _ => format!("{key}: {name}"),
                    })
                    .collect();
                format!("{note} Bars: {}.", named.join(" · "))
            }
            CategoryLabels::Wrapped(_) => note,
        };
        let hovers = drawn.unwrap_or_else(|e| vec![(10, 20, format!("drawing failed: {e}"))]);
        let points =
            self.series.iter().map(|s| s.values.iter().flatten().filter(|v| v.value.is_finite()).count()).sum();
        Figure {
            kind,
            title: self.title.clone(),
            svg: finish_svg(svg, hovers, 5),
            csv,
            points,
            legend: self.series.iter().map(|s| (s.label.clone(), s.colour)).collect(),
            note,
        }
    }

    fn top(&self) -> f64 {
        let n = self.categories.len();
        if self.stacked {
            (0..n)
                .map(|c| {
                    self.series
                        .iter()
                        .filter_map(|s| s.values[c])
                        .map(|v| v.value.max(0.0))
                        .filter(|v| v.is_finite())
                        .sum::<f64>()
                })
                .fold(0.0, f64::max)
        } else {
            self.series
                .iter()
                .flat_map(|s| s.values.iter().flatten())
                .map(|v| v.interval.map_or(v.value, |(_, hi)| hi.max(v.value)))
                .filter(|v| v.is_finite())
                .fold(0.0, f64::max)
        }
    }

    /// How the categories are named under their bars: wrapped names if every one fits
    /// its slot in at most three lines, else keys (spelt out in the note).
    fn category_labels(&self) -> CategoryLabels {
        let n = self.categories.len().max(1);
        let slot = (self.size.0 as f64 - 100.0) / n as f64;
        let width = ((slot - 6.0) / CHAR_PX).floor().max(1.0) as usize;
        let wrapped: Option<Vec<Vec<String>>> = self.categories.iter().map(|c| wrap_label(c, width)).collect();
        match wrapped {
            Some(lines) => CategoryLabels::Wrapped(lines),
            None => CategoryLabels::Keyed(
                (0..self.categories.len())
                    .map(|c| {
                        self.keys.get(c).cloned().unwrap_or_else(|| {
                            char::from_u32('a' as u32 + (c % 26) as u32).map_or(format!("{c}"), |k| k.to_string())
                        })
                    })
                    .collect(),
            ),
        }
    }

    fn draw(&self, svg: &mut String) -> Drawn {
        let n = self.categories.len().max(1);
        let top = self.top();
        let top = if top > 0.0 { top * 1.08 } else { 1.0 };
        let root = SVGBackend::with_string(svg, self.size).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let labels = self.category_labels();
        let lines = match &labels {
            CategoryLabels::Wrapped(lines) => lines.iter().map(Vec::len).max().unwrap_or(1).max(1),
            CategoryLabels::Keyed(_) => 1,
        };
        let mut chart = ChartBuilder::on(&root)
            .margin(14)
            .x_label_area_size(22 + 14 * lines as u32)
            .y_label_area_size(66)
            .build_cartesian_2d(-0.5..(n as f64 - 0.5), 0.0..top)
            .map_err(err)?;
        let y_tick = |v: &f64| short(*v);
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc(self.y_label.as_str())
            .y_label_formatter(&y_tick)
            .axis_desc_style(("sans-serif", 13))
            .label_style(("sans-serif", 11))
            .max_light_lines(1)
            .light_line_style(RGBColor(0xf2, 0xf2, 0xf2))
            .bold_line_style(RGBColor(0xdd, 0xdd, 0xdd))
            .draw()
            .map_err(err)?;
        let label_font = ("sans-serif", 11).into_font().color(&BLACK);
        let style = label_font.clone().pos(Pos::new(HPos::Center, VPos::Top));
        for c in 0..self.categories.len() {
            let (px, py) = chart.backend_coord(&(c as f64, 0.0));
            let lines = match &labels {
                CategoryLabels::Wrapped(lines) => lines[c].clone(),
                CategoryLabels::Keyed(keys) => vec![keys[c].clone()],
            };
            for (l, line) in lines.into_iter().enumerate() {
                root.draw(&Text::new(line, (px, py + 6 + 14 * l as i32), style.clone())).map_err(err)?;
            }
        }
        let hovers = self.draw_bars(&root, &mut chart, top)?;
        root.present().map_err(err)?;
        drop(chart);
        drop(root);
        Ok(hovers)
    }

    /// The bars (side by side, or stacked), each with its 95% whisker when not
    /// stacked; returns each bar's hover text at its centre.
    fn draw_bars(
        &self,
        root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
        chart: &mut BarChart<'_, '_>,
        top: f64,
    ) -> Drawn {
        let mut hovers = Vec::new();
        let groups = self.series.len().max(1);
        let width = 0.8 / if self.stacked { 1.0 } else { groups as f64 };
        for c in 0..self.categories.len() {
            let mut base = 0.0;
            for (s, series) in self.series.iter().enumerate() {
                let Some(value) = series.values[c].filter(|v| v.value.is_finite()) else { continue };
                let left = if self.stacked { c as f64 - 0.4 } else { c as f64 - 0.4 + s as f64 * width };
                let (bottom, height) = if self.stacked { (base, value.value.max(0.0)) } else { (0.0, value.value) };
                let colour = self.category_colours.get(c).copied().unwrap_or(series.colour);
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(left, bottom), (left + width * 0.92, bottom + height)],
                        colour.filled(),
                    )))
                    .map_err(err)?;
                let centre = left + width * 0.46;
                if let Some((lo, hi)) =
                    value.interval.filter(|(lo, hi)| lo.is_finite() && hi.is_finite() && !self.stacked)
                {
                    let (px, plo) = chart.backend_coord(&(centre, lo.clamp(0.0, top)));
                    let (_, phi) = chart.backend_coord(&(centre, hi.clamp(0.0, top)));
                    whisker(root, (px, plo), (px, phi), BLACK.stroke_width(1))?;
                }
                let (px, py) = chart.backend_coord(&(centre, bottom + height / 2.0));
                let interval =
                    value.interval.map(|(lo, hi)| format!(" [{}, {}]", short(lo), short(hi))).unwrap_or_default();
                hovers.push((
                    px,
                    py,
                    format!("{} · {}: {}{interval}", self.categories[c], series.label, short(value.value)),
                ));
                base += height;
            }
        }
        Ok(hovers)
    }
}

/// A value per cell of a two-axis grid, coloured on the ramp, with the value written in.
#[derive(Clone, Debug)]
pub struct Heatmap {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_values: Vec<String>,
    pub y_values: Vec<String>,
    /// `cells[y][x]`.
    pub cells: Vec<Vec<Option<BarValue>>>,
    /// Marks the best cell: `Some(true)` higher is better, `Some(false)` lower.
    pub higher_is_better: Option<bool>,
    /// The values at the ends of the colour ramp; shared by small multiples so that
    /// one colour means one value in all of them. `None`: this map's own range.
    pub range: Option<(f64, f64)>,
    pub size: (u32, u32),
}

impl Heatmap {
    pub fn render(&self, kind: &'static str, csv: String, note: String) -> Figure {
        let mut svg = String::new();
        let drawn = self.draw(&mut svg);
        let hovers = drawn.unwrap_or_else(|e| vec![(10, 20, format!("drawing failed: {e}"))]);
        let points = self.cells.iter().flatten().flatten().filter(|v| v.value.is_finite()).count();
        let (lo, hi) = self.value_range();
        Figure {
            kind,
            title: self.title.clone(),
            svg: finish_svg(svg, hovers, 6),
            csv,
            points,
            legend: vec![(format!("lowest {}", short(lo)), ramp(0.0)), (format!("highest {}", short(hi)), ramp(1.0))],
            note,
        }
    }

    fn value_range(&self) -> (f64, f64) {
        if let Some(range) = self.range {
            return range;
        }
        let values = self.cells.iter().flatten().flatten().map(|v| v.value).filter(|v| v.is_finite());
        values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)))
    }

    /// The best cell (x, y, value), when higher or lower is better.
    fn best_cell(&self) -> Option<(usize, usize, f64)> {
        let higher = self.higher_is_better?;
        let cells =
            self.cells.iter().enumerate().flat_map(|(y, row)| row.iter().enumerate().map(move |(x, v)| (x, y, *v)));
        let valued = cells.filter_map(|(x, y, v)| v.filter(|v| v.value.is_finite()).map(|v| (x, y, v.value)));
        if higher {
            valued.max_by(|a, b| a.2.total_cmp(&b.2))
        } else {
            valued.min_by(|a, b| a.2.total_cmp(&b.2))
        }
    }

    /// What hovering over cell (x, y) says: both axes' values, the cell's and its interval.
    fn hover(&self, x: usize, y: usize, cell: &BarValue) -> String {
        let interval = cell.interval.map(|(lo, hi)| format!(" [{}, {}]", short(lo), short(hi))).unwrap_or_default();
        format!(
            "{} = {}, {} = {}: {}{interval}",
            self.x_label,
            self.x_values[x],
            self.y_label,
            self.y_values[y],
            short(cell.value)
        )
    }

    fn draw(&self, svg: &mut String) -> Drawn {
        let (nx, ny) = (self.x_values.len().max(1), self.y_values.len().max(1));
        let (lo, hi) = self.value_range();
        let best = self.best_cell();
        let root = SVGBackend::with_string(svg, self.size).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(72)
            .build_cartesian_2d(-0.5..(nx as f64 - 0.5), -0.5..(ny as f64 - 0.5))
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(0)
            .y_labels(0)
            .x_desc(self.x_label.as_str())
            .y_desc(self.y_label.as_str())
            .axis_desc_style(("sans-serif", 13))
            .draw()
            .map_err(err)?;
        let mut hovers = Vec::new();
        for (y, row) in self.cells.iter().enumerate() {
            for (x, cell) in row.iter().enumerate() {
                let Some(cell) = cell.filter(|c| c.value.is_finite()) else { continue };
                let t = if hi > lo { (cell.value - lo) / (hi - lo) } else { 0.5 };
                let fill = ramp(t);
                let (xf, yf) = (x as f64, y as f64);
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(xf - 0.48, yf - 0.48), (xf + 0.48, yf + 0.48)],
                        fill.filled(),
                    )))
                    .map_err(err)?;
                if best.is_some_and(|(bx, by, _)| bx == x && by == y) {
                    chart
                        .draw_series(std::iter::once(Rectangle::new(
                            [(xf - 0.46, yf - 0.46), (xf + 0.46, yf + 0.46)],
                            RGBColor(0xD5, 0x5E, 0x00).stroke_width(3),
                        )))
                        .map_err(err)?;
                }
                let ink = if t > 0.6 { BLACK } else { WHITE };
                let (px, py) = chart.backend_coord(&(xf, yf));
                let style = TextStyle::from(("sans-serif", 12).into_font())
                    .color(&ink)
                    .pos(Pos::new(HPos::Center, VPos::Center));
                let is_best = best.is_some_and(|(bx, by, _)| bx == x && by == y);
                let text = if is_best { format!("★ {}", short(cell.value)) } else { short(cell.value) };
                root.draw(&Text::new(text, (px, py), style)).map_err(err)?;
                hovers.push((px, py, self.hover(x, y, &cell)));
            }
        }
        for (x, label) in self.x_values.iter().enumerate() {
            let (px, py) = chart.backend_coord(&(x as f64, -0.5));
            let style = TextStyle::from(("sans-serif", 11).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
            root.draw(&Text::new(label.clone(), (px, py + 4), style)).map_err(err)?;
        }
        for (y, label) in self.y_values.iter().enumerate() {
            let (px, py) = chart.backend_coord(&(-0.5, y as f64));
            let style = TextStyle::from(("sans-serif", 11).into_font()).pos(Pos::new(HPos::Right, VPos::Center));
            root.draw(&Text::new(label.clone(), (px - 4, py), style)).map_err(err)?;
        }
        root.present().map_err(err)?;
        drop(chart);
        drop(root);
        Ok(hovers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_short_and_percentiles_are_named() {
        assert_eq!(short(0.0), "0");
        assert_eq!(short(1234.5678), "1235");
        assert_eq!(short(0.012345), "0.01235");
        assert_eq!(short(2.5), "2.5");
        assert_eq!(short(f64::NAN), "–");
        assert_eq!(percentile_label(10.0), "p90");
        assert_eq!(percentile_label(100.0), "p99");
        assert_eq!(percentile_label(10_000.0), "p99.99");
        assert_eq!(percentile_label(1.0), "p0");
    }

    #[test]
    fn the_ramp_runs_from_its_first_to_its_last_anchor() {
        assert_eq!(ramp(0.0), RAMP[0]);
        assert_eq!(ramp(1.0), RAMP[4]);
        assert_eq!(series_colour(0, 3), OKABE_ITO[0]);
        assert_ne!(series_colour(0, 20), series_colour(19, 20));
    }

    #[test]
    fn a_line_plot_draws_its_lines_bands_and_hover_targets() {
        let plot = LinePlot {
            title: "t".into(),
            x: Axis::linear("time (s)"),
            y: Axis { label: "depth".into(), scale: Scale::Log },
            lines: vec![Line {
                label: "a <b>".into(),
                colour: series_colour(0, 1),
                points: (1..=10)
                    .map(|i| Point { x: i as f64, y: i as f64, interval: Some((i as f64 * 0.9, i as f64 * 1.1)) })
                    .collect(),
                whiskers: false,
            }],
            windows: vec![Window { label: "surge".into(), from: 3.0, to: 4.0 }],
            markers: vec![Marker { label: "recovered".into(), colour: BLACK, x: 5.0, interval: Some((4.5, 5.5)) }],
            bands: vec![],
            size: WIDE,
        };
        let figure = plot.render("timeseries", String::new(), String::new());
        assert_eq!(figure.points, 10);
        assert!(figure.svg.starts_with("<svg class=\"chart\" viewBox"), "{}", &figure.svg[..80]);
        assert!(figure.svg.contains("<polygon"), "the band");
        assert!(figure.svg.contains("a &lt;b&gt;: time (s) = 1"), "escaped hover text");
        assert!(figure.svg.contains(">surge<") || figure.svg.contains("surge\n"), "the window's label");
        assert_eq!(figure.svg.matches("class=\"hover\"").count(), 11);
    }

    /// Names under bars wrap at spaces into at most three lines; one that cannot makes
    /// every bar take its key, and the note spells the keys out.
    #[test]
    fn bar_names_wrap_or_become_keys_never_cut() {
        assert_eq!(
            wrap_label("brownout, breaker, answer", 10),
            Some(vec!["brownout,".into(), "breaker,".into(), "answer".into()])
        );
        assert_eq!(wrap_label("a b c d", 1), None, "four lines");
        assert_eq!(wrap_label("unbreakable_word", 5), None);
        let bars = |categories: Vec<String>| BarPlot {
            title: "b".into(),
            y_label: "y".into(),
            categories,
            series: vec![BarSeries { label: "s".into(), colour: BLACK, values: vec![None; 7] }],
            stacked: false,
            category_colours: vec![],
            keys: (0..7).map(|i| format!("#{i}")).collect(),
            size: SMALL,
        };
        let short = bars((0..7).map(|i| format!("c{i}")).collect());
        assert!(matches!(short.category_labels(), CategoryLabels::Wrapped(_)));
        let long = bars((0..7).map(|i| format!("rate-limited, 429 excluded {i}")).collect());
        assert_eq!(long.category_labels(), CategoryLabels::Keyed((0..7).map(|i| format!("#{i}")).collect()));
        let figure = long.render("bars", String::new(), "Note.".into());
        assert!(figure.note.ends_with("Bars: #0: rate-limited, 429 excluded 0 · #1: rate-limited, 429 excluded 1 · #2: rate-limited, 429 excluded 2 · #3: rate-limited, 429 excluded 3 · #4: rate-limited, 429 excluded 4 · #5: rate-limited, 429 excluded 5 · #6: rate-limited, 429 excluded 6."), "{}", figure.note);
        assert!(!figure.svg.contains('…'), "nothing is cut");
        // A name that starts with its key says it once (issue 71: "#0: #0 today").
        let keyed = bars((0..7).map(|i| format!("#{i} today under the payments slowdown, {i}")).collect());
        let figure = keyed.render("bars", String::new(), "Note.".into());
        assert!(figure.note.contains("Bars: #0 today under the payments slowdown, 0 · #1 today"), "{}", figure.note);
        assert!(!figure.note.contains("#0: #0"), "{}", figure.note);
    }

    /// A log axis labels 1, 2 and 5 times powers of ten, nothing between.
    #[test]
    fn log_axes_label_round_values_only() {
        let labels: Vec<String> =
            [10.0, 20.0, 30.0, 50.0, 60.0, 90.0, 99.99999999, 100.0, 0.002].iter().map(log_tick).collect();
        assert_eq!(labels, ["10", "20", "", "50", "", "", "100", "100", "0.002"]);
    }

    #[test]
    fn bars_and_heatmaps_count_what_they_draw() {
        let value = |v: f64| Some(BarValue { value: v, interval: Some((v - 1.0, v + 1.0)), covered: None });
        let bars = BarPlot {
            title: "b".into(),
            y_label: "y".into(),
            categories: vec!["a".into(), "b".into()],
            series: vec![BarSeries { label: "s".into(), colour: BLACK, values: vec![value(2.0), None] }],
            stacked: false,
            category_colours: vec![],
            keys: vec![],
            size: SMALL,
        };
        assert_eq!(bars.render("bars", String::new(), String::new()).points, 1);
        let heatmap = Heatmap {
            title: "h".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            x_values: vec!["1".into(), "2".into()],
            y_values: vec!["a".into()],
            cells: vec![vec![value(1.0), value(3.0)]],
            higher_is_better: Some(true),
            range: None,
            size: SMALL,
        };
        let figure = heatmap.render("heatmap", String::new(), String::new());
        assert_eq!(figure.points, 2);
        assert!(figure.svg.contains("★ 3"), "the best cell is starred");
    }
}
