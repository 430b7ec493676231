//! The stability map `stampede map` writes: per grid point of the scenario, a picture
//! over the two mapped fields — the region on each side of the level, the boundary
//! where the metric crosses it with its band, and every evaluation the bisection ran —
//! as a standalone SVG (`map.svg`, the docs' picture) and in a self-contained page
//! (`map.html`). It takes plain data (this crate sits below `optimize`, which maps).

use crate::blocks::escape;
use crate::chart::short;

/// One row of a panel: a value of y and where x crosses the level there.
#[derive(Clone, Debug)]
pub struct MapRow {
    pub y: f64,
    /// (boundary x, band low, band high), or `None` where the row never crosses.
    pub boundary: Option<(f64, f64, f64)>,
    /// The side at x's low end: above the level (true) or below.
    pub low_end_above: bool,
    /// The metric is undefined at an end of the row.
    pub undefined: bool,
}

/// One evaluation drawn as a dot.
#[derive(Clone, Copy, Debug)]
pub struct MapDot {
    pub x: f64,
    pub y: f64,
    pub above: bool,
    /// Its 95% interval lies wholly on its side of the level.
    pub sure: bool,
    /// The model refused it as overloaded (no steady state): not run, beyond the
    /// level; drawn as a cross.
    pub refused: bool,
}

/// One grid point of the scenario.
#[derive(Clone, Debug)]
pub struct MapPanel {
    pub label: String,
    pub rows: Vec<MapRow>,
    pub dots: Vec<MapDot>,
    /// The sentence under it (where the boundary runs, or that there is none).
    pub summary: String,
}

/// What the page shows.
#[derive(Clone, Debug)]
pub struct MapPage {
    pub scenario: String,
    pub x_label: String,
    pub y_label: String,
    pub x_range: (f64, f64),
    pub y_range: (f64, f64),
    pub x_log: bool,
    pub y_log: bool,
    /// How each side is named (`recovered_ratio ≥ 0.5 (better)`).
    pub above_name: String,
    pub below_name: String,
    /// Whether above the level is better (green), worse (red) or neither (`None`).
    pub above_better: Option<bool>,
    pub panels: Vec<MapPanel>,
    /// The command's lines: what ran, what it cost against the full grid.
    pub notes: Vec<String>,
}

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 360.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 16.0;
const BOTTOM: f64 = 48.0;

/// Colours of the two sides: (above, below).
fn side_colours(above_better: Option<bool>) -> (&'static str, &'static str) {
    match above_better {
        Some(true) => ("#cfe9cf", "#f6d0cc"),
        Some(false) => ("#f6d0cc", "#cfe9cf"),
        None => ("#d4e2f4", "#f7e0c4"),
    }
}

/// A position on an axis from 0 to 1.
fn unit(value: f64, (low, high): (f64, f64), log: bool) -> f64 {
    if log {
        (value / low).ln() / (high / low).ln()
    } else {
        (value - low) / (high - low)
    }
}

/// Round values to mark an axis with: 1, 2 and 5 times powers of ten on a log axis
/// (decades only when there are many), a 1-2-5 step giving 4 to 10 marks on a linear one.
fn ticks((low, high): (f64, f64), log: bool) -> Vec<f64> {
    let inside = |v: &f64| *v >= low * (1.0 - 1e-9) && *v <= high * (1.0 + 1e-9);
    if log {
        let (first, last) = (low.log10().floor() as i32, high.log10().ceil() as i32);
        let decades: Vec<f64> = (first..=last).map(|k| 10f64.powi(k)).filter(inside).collect();
        let steps: &[f64] = if last - first > 4 { &[1.0] } else { &[1.0, 2.0, 5.0] };
        let marks: Vec<f64> =
            (first..=last).flat_map(|k| steps.iter().map(move |m| m * 10f64.powi(k))).filter(inside).collect();
        return if marks.len() >= 2 { marks } else { decades.into_iter().chain([low, high]).collect() };
    }
    let span = high - low;
    let magnitude = 10f64.powf(span.log10().floor() - 1.0);
    let step = [1.0, 2.0, 5.0, 10.0, 20.0, 50.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|step| span / step <= 10.0)
        .unwrap_or(span);
    let first = (low / step).ceil() as i64;
    let last = (high / step).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

/// Where a value lands on a panel: the plot's size, and x and y to pixels (clamped
/// to the plot).
struct Frame<'a> {
    page: &'a MapPage,
    plot_w: f64,
    plot_h: f64,
}

impl Frame<'_> {
    fn px(&self, x: f64) -> f64 {
        LEFT + unit(x, self.page.x_range, self.page.x_log).clamp(0.0, 1.0) * self.plot_w
    }

    fn py(&self, y: f64) -> f64 {
        TOP + (1.0 - unit(y, self.page.y_range, self.page.y_log).clamp(0.0, 1.0)) * self.plot_h
    }
}

/// One panel as a standalone SVG.
pub fn svg(page: &MapPage, panel: &MapPanel) -> String {
    let frame = Frame { page, plot_w: WIDTH - LEFT - RIGHT, plot_h: HEIGHT - TOP - BOTTOM };
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" width=\"{WIDTH}\" height=\"{HEIGHT}\" \
         font-family=\"system-ui,sans-serif\" font-size=\"12\" shape-rendering=\"crispEdges\" role=\"img\" aria-label=\"stability map: {}\">",
        escape(&panel.label)
    );
    let mut rows: Vec<&MapRow> = panel.rows.iter().collect();
    rows.sort_by(|a, b| a.y.total_cmp(&b.y));
    row_strips(&mut out, &frame, &rows);
    boundary(&mut out, &frame, &rows);
    dots(&mut out, &frame, panel);
    axes(&mut out, &frame);
    out
}

/// Each row's strip, coloured by side on either side of its boundary; a strip reaches
/// halfway to its neighbours (the ends to the range's). `rows` are sorted by y.
fn row_strips(out: &mut String, frame: &Frame, rows: &[&MapRow]) {
    let (above, below) = side_colours(frame.page.above_better);
    let (plot_w, plot_h) = (frame.plot_w, frame.plot_h);
    let centres: Vec<f64> = rows.iter().map(|r| frame.py(r.y)).collect();
    for (i, row) in rows.iter().enumerate() {
        let top = if i + 1 < rows.len() { (centres[i] + centres[i + 1]) / 2.0 } else { TOP };
        let bottom = if i > 0 { (centres[i] + centres[i - 1]) / 2.0 } else { TOP + plot_h };
        let height = bottom - top;
        let (low_colour, high_colour) = if row.low_end_above { (above, below) } else { (below, above) };
        match (row.undefined, row.boundary) {
            (true, _) => out.push_str(&format!(
                "<rect x=\"{LEFT}\" y=\"{top:.1}\" width=\"{plot_w:.1}\" height=\"{height:.1}\" fill=\"#e4e4e4\"/>"
            )),
            (false, None) => out.push_str(&format!(
                "<rect x=\"{LEFT}\" y=\"{top:.1}\" width=\"{plot_w:.1}\" height=\"{height:.1}\" fill=\"{low_colour}\"/>"
            )),
            (false, Some((x, _, _))) => {
                let split = frame.px(x);
                out.push_str(&format!(
                    "<rect x=\"{LEFT}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{height:.1}\" fill=\"{low_colour}\"/>\
                     <rect x=\"{split:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{height:.1}\" fill=\"{high_colour}\"/>",
                    split - LEFT,
                    LEFT + plot_w - split
                ));
            }
        }
    }
}

/// The boundary's band (where the intervals cannot tell the side), then the boundary
/// through the rows that cross, with a dot per crossing. `rows` are sorted by y.
fn boundary(out: &mut String, frame: &Frame, rows: &[&MapRow]) {
    let (page, px, py) = (frame.page, |x| frame.px(x), |y| frame.py(y));
    let crossing: Vec<(f64, (f64, f64, f64))> = rows.iter().filter_map(|r| Some((r.y, r.boundary?))).collect();
    if !crossing.is_empty() {
        let lows: Vec<String> =
            crossing.iter().map(|(y, (_, lo, _))| format!("{:.1},{:.1}", px(*lo), py(*y))).collect();
        let highs: Vec<String> =
            crossing.iter().rev().map(|(y, (_, _, hi))| format!("{:.1},{:.1}", px(*hi), py(*y))).collect();
        out.push_str(&format!(
            "<polygon points=\"{} {}\" fill=\"#555\" fill-opacity=\"0.18\" stroke=\"none\" shape-rendering=\"geometricPrecision\"><title>the boundary's band: \
             where the replicas' 95% intervals cannot tell the side</title></polygon>",
            lows.join(" "),
            highs.join(" ")
        ));
        let line: Vec<String> = crossing.iter().map(|(y, (x, _, _))| format!("{:.1},{:.1}", px(*x), py(*y))).collect();
        out.push_str(&format!(
            "<polyline points=\"{}\" fill=\"none\" stroke=\"#222\" stroke-width=\"2\" shape-rendering=\"geometricPrecision\"/>",
            line.join(" ")
        ));
        for (y, (x, lo, hi)) in &crossing {
            out.push_str(&format!(
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.5\" fill=\"#222\"><title>{} = {}: boundary at {} = {} [{}, {}]</title></circle>",
                px(*x),
                py(*y),
                escape(&page.y_label),
                short(*y),
                escape(&page.x_label),
                short(*x),
                short(*lo),
                short(*hi)
            ));
        }
    }
}

/// The replicas' verdicts: a dot per point run (filled where its side is sure), a
/// cross where the point was refused as overloaded.
fn dots(out: &mut String, frame: &Frame, panel: &MapPanel) {
    let (page, px, py) = (frame.page, |x| frame.px(x), |y| frame.py(y));
    for dot in &panel.dots {
        let colour = if dot.above == (page.above_better != Some(false)) { "#2f7d32" } else { "#b3261e" };
        let colour = if page.above_better.is_none() {
            if dot.above {
                "#2b5da8"
            } else {
                "#b8660b"
            }
        } else {
            colour
        };
        if dot.refused {
            let (x, y) = (px(dot.x), py(dot.y));
            out.push_str(&format!(
                "<path d=\"M{:.1} {:.1}L{:.1} {:.1}M{:.1} {:.1}L{:.1} {:.1}\" stroke=\"{colour}\" stroke-width=\"1.5\"><title>refused \
                 as overloaded (no steady state): beyond the level</title></path>",
                x - 3.0,
                y - 3.0,
                x + 3.0,
                y + 3.0,
                x - 3.0,
                y + 3.0,
                x + 3.0,
                y - 3.0
            ));
            continue;
        }
        let fill = if dot.sure { colour } else { "white" };
        out.push_str(&format!(
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" shape-rendering=\"geometricPrecision\" fill=\"{fill}\" stroke=\"{colour}\" stroke-width=\"1\"/>",
            px(dot.x),
            py(dot.y)
        ));
    }
}

/// The plot's frame, the ticks on both axes and the axes' labels, closing the SVG.
fn axes(out: &mut String, frame: &Frame) {
    let (page, plot_w, plot_h) = (frame.page, frame.plot_w, frame.plot_h);
    let (px, py) = (|x| frame.px(x), |y| frame.py(y));
    out.push_str(&format!(
        "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{plot_w:.1}\" height=\"{plot_h:.1}\" fill=\"none\" stroke=\"#333\"/>"
    ));
    for x in ticks(page.x_range, page.x_log) {
        let p = px(x);
        out.push_str(&format!(
            "<line x1=\"{p:.1}\" y1=\"{:.1}\" x2=\"{p:.1}\" y2=\"{:.1}\" stroke=\"#333\"/><text x=\"{p:.1}\" y=\"{:.1}\" \
             text-anchor=\"middle\">{}</text>",
            TOP + plot_h,
            TOP + plot_h + 5.0,
            TOP + plot_h + 18.0,
            short(x)
        ));
    }
    for y in ticks(page.y_range, page.y_log) {
        let p = py(y);
        out.push_str(&format!(
            "<line x1=\"{:.1}\" y1=\"{p:.1}\" x2=\"{LEFT}\" y2=\"{p:.1}\" stroke=\"#333\"/><text x=\"{:.1}\" y=\"{:.1}\" \
             text-anchor=\"end\">{}</text>",
            LEFT - 5.0,
            LEFT - 8.0,
            p + 4.0,
            short(y)
        ));
    }
    out.push_str(&format!(
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}{}</text>",
        LEFT + plot_w / 2.0,
        HEIGHT - 8.0,
        escape(&page.x_label),
        if page.x_log { " (log scale)" } else { "" }
    ));
    out.push_str(&format!(
        "<text transform=\"translate(16 {:.1}) rotate(-90)\" text-anchor=\"middle\">{}{}</text></svg>",
        TOP + plot_h / 2.0,
        escape(&page.y_label),
        if page.y_log { " (log scale)" } else { "" }
    ));
}

/// The legend under the pictures.
fn legend(page: &MapPage) -> String {
    let (above, below) = side_colours(page.above_better);
    format!(
        "<p class=\"legend\"><span class=\"key\" style=\"background:{above}\"></span>{} \
         <span class=\"key\" style=\"background:{below}\"></span>{} \
         <span class=\"key\" style=\"background:#222;height:2px\"></span>the boundary (where the mean crosses the level), \
         shaded: its band (the replicas' 95% intervals cannot tell the side there); dots: every evaluation run, \
         filled where its interval lies wholly on its side</p>",
        escape(&page.above_name),
        escape(&page.below_name)
    )
}

/// The page's HTML.
pub fn render(page: &MapPage) -> String {
    let panels: String = page
        .panels
        .iter()
        .map(|panel| {
            format!(
                "<section class=\"panel\"><h2>{}</h2>{}<p>{}</p></section>\n",
                escape(&panel.label),
                svg(page, panel),
                escape(&panel.summary)
            )
        })
        .collect();
    let notes: String = page.notes.iter().map(|n| format!("<li>{}</li>", escape(n))).collect();
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n\
         <meta name=\"generator\" content=\"stampede {}\">\n<title>stampede map {}</title><style>body{{font:15px/1.45 system-ui,sans-serif;\
         max-width:960px;margin:2em auto;padding:0 1em}}.key{{display:inline-block;width:1.6em;height:.8em;vertical-align:middle;\
         margin:0 .3em 0 .8em}}.legend{{color:#333;font-size:13px}}svg{{max-width:100%;height:auto}}</style></head>\n\
         <body><h1>stampede map: {}</h1><ul>{notes}</ul>{}{panels}</body></html>\n",
        env!("CARGO_PKG_VERSION"),
        escape(&page.scenario),
        escape(&page.scenario),
        legend(page),
    )
}

#[cfg(test)]
mod tests {
    use super::ticks;

    #[test]
    fn ticks_are_round_values_inside_the_range() {
        assert_eq!(ticks((0.01, 0.5), true), vec![0.01, 0.02, 0.05, 0.1, 0.2, 0.5]);
        let linear = ticks((1.2, 3.0), false);
        assert_eq!(linear.len(), 10);
        assert!(linear.iter().enumerate().all(|(k, v)| (v - (1.2 + 0.2 * k as f64)).abs() < 1e-12), "{linear:?}");
        assert_eq!(ticks((85.0, 115.0), false), vec![85.0, 90.0, 95.0, 100.0, 105.0, 110.0, 115.0]);
        assert_eq!(ticks((1.0, 1e6), true), vec![1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6]);
    }
}
