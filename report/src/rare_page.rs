//! The page `stampede rare` writes beside its tables (`report.html`) and `stampede
//! report` renders again from `rare.json`: the question, each grid point's estimate
//! with its 95% interval (and per period), what it cost against plain replicas, the
//! warnings, and the ladder — the probability of reaching each level, on a log axis,
//! which shows where the way to the event narrows. Self-contained and offline.

use serde_json::Value;

use crate::blocks::escape;
use crate::chart::{series_colour, short, Axis, Line, LinePlot, Point, Scale};

/// `1.234e-5`, or `0`.
fn scientific(value: Option<f64>) -> String {
    match value {
        Some(0.0) => "0".into(),
        Some(v) if v.is_finite() => format!("{v:.3e}"),
        _ => "–".into(),
    }
}

fn number(value: &Value, key: &str) -> Option<f64> {
    value.get(key).and_then(Value::as_f64)
}

/// A grid point's row: its probability with the 95% interval (and per period, with
/// `per`), relative error, runs, levels, hits, and the events it cost against plain
/// replicas'.
fn estimate_row(point: &Value, per: bool) -> String {
    let period = &point["per_period"];
    let per_cells = match per {
        true => format!(
            "<td>{} [{}, {}]</td>",
            scientific(number(period, "probability")),
            scientific(number(period, "ci_lo")),
            scientific(number(period, "ci_hi"))
        ),
        false => String::new(),
    };
    let needed = number(point, "plain_events_needed");
    let events = number(point, "events").unwrap_or(0.0);
    let cost = match needed {
        Some(needed) if events > 0.0 && needed >= 2.0 * events => {
            format!("{} ({:.0}× fewer than plain replicas)", short(events), needed / events)
        }
        Some(needed) => format!("{} (plain replicas: {})", short(events), short(needed)),
        _ => short(events),
    };
    format!(
        "<tr><td>{}</td><td><b>{}</b> [{}, {}]</td>{per_cells}<td>{:.1}%</td><td>{}</td><td>{}</td><td>{}</td><td>{cost}</td></tr>",
        escape(point["label"].as_str().unwrap_or("")),
        scientific(number(point, "probability")),
        scientific(number(point, "ci_lo")),
        scientific(number(point, "ci_hi")),
        number(point, "relative_error").map_or(f64::NAN, |r| r * 100.0),
        point["runs"].as_u64().unwrap_or(0),
        point["levels"].as_array().map_or(0, Vec::len),
        point["hits"].as_u64().unwrap_or(0),
    )
}

/// When to doubt the estimates: every point's warnings, or that there are none.
fn warnings(points: &[Value]) -> String {
    let items: String = points
        .iter()
        .flat_map(|point| {
            let label = point["label"].as_str().unwrap_or("").to_string();
            point["warnings"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |text| format!("<li>{}: {}</li>", escape(&label), escape(text.as_str().unwrap_or(""))))
        })
        .collect();
    if items.is_empty() {
        "<p>None: every level was crossed and no run carries most of the estimate.</p>".to_string()
    } else {
        format!("<ul class=\"warnings\">{items}</ul>")
    }
}

/// The ladder: each point's probability of reaching each level (log scale).
fn ladder(points: &[Value]) -> LinePlot {
    let n = points.len().max(1);
    let lines: Vec<Line> = points
        .iter()
        .enumerate()
        .map(|(i, point)| {
            let ladder = point["ladder"].as_array().cloned().unwrap_or_default();
            let points = ladder
                .iter()
                .filter_map(|step| {
                    let (x, y) = (number(step, "level")?, number(step, "reach_probability")?);
                    (y > 0.0).then_some(Point { x, y, interval: None })
                })
                .collect();
            Line {
                label: point["label"].as_str().unwrap_or("").to_string(),
                colour: series_colour(i, n),
                points,
                whiskers: false,
            }
        })
        .collect();
    LinePlot {
        title: "The ladder: the probability of reaching each level".into(),
        x: Axis::linear("level of the score"),
        y: Axis { label: "probability of reaching it (log)".into(), scale: Scale::Log },
        lines,
        windows: Vec::new(),
        markers: Vec::new(),
        bands: Vec::new(),
        size: (900, 420),
    }
}

/// The page for `rare.json`'s `document`.
pub fn render(document: &Value) -> String {
    let points = document["points"].as_array().cloned().unwrap_or_default();
    let per = document["per"].as_str();
    let rows: String = points.iter().map(|point| estimate_row(point, per.is_some())).collect();
    let warnings = warnings(&points);
    let figure = ladder(&points).render("ladder", String::new(), String::new());
    let legend = crate::blocks::legend_html(&figure);
    let per_head = per.map(|text| format!("<th>per {}</th>", escape(text))).unwrap_or_default();
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n\
         <meta name=\"generator\" content=\"stampede {}\">\n<title>stampede rare: {}</title><style>body{{font:15px/1.45 system-ui,sans-serif;max-width:960px;margin:2em auto;padding:0 1em}}\
         table{{border-collapse:collapse}}td,th{{border-bottom:1px solid #ddd;padding:.3em .6em;text-align:left}}.warnings li{{color:#8a4b00}}</style></head>\n\
         <body><h1>{}: how likely is it?</h1><p><b>{}</b>, by importance splitting ({} trajectories a stage, runs until {:.0}% relative error; seed {}).</p>\
         <h2>Estimates</h2><p>95% intervals over independent splitting runs; the cost counts every event handled, replays included.</p>\
         <table><tr><th>grid point</th><th>probability [95%]</th>{per_head}<th>relative error</th><th>runs</th><th>levels</th><th>hits</th><th>events</th></tr>{rows}</table>\
         <h2>When to doubt it</h2>{warnings}\
         <h2>The ladder</h2><p>Each level's probability of being reached before the end, averaged over runs: where it falls steeply, the way to the event narrows. {legend}</p>{}\
         </body></html>\n",
        env!("CARGO_PKG_VERSION"),
        escape(document["scenario"].as_str().unwrap_or("")),
        escape(document["scenario"].as_str().unwrap_or("")),
        escape(document["question"].as_str().unwrap_or("")),
        document["trajectories"].as_u64().unwrap_or(0),
        document["target_relative_error"].as_f64().unwrap_or(0.0) * 100.0,
        escape(document["seed"].as_str().unwrap_or("")),
        figure.svg
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_shows_each_estimate_its_period_warnings_and_ladder() {
        let document = serde_json::json!({
            "scenario": "storm", "question": "P(api.queue_depth >= 150 within 60 s)", "seed": "1",
            "trajectories": 100, "target_relative_error": 0.1, "per": "1d",
            "points": [{
                "label": "case = \"naive\"", "probability": 1.733e-4, "ci_lo": 1.428e-4, "ci_hi": 2.047e-4,
                "relative_error": 0.089, "runs": 49, "levels": [21.0, 40.0], "hits": 3807, "events": 1.99e8,
                "plain_events_needed": 4.8e9, "warnings": ["one run carries 60% of the estimate"],
                "per_period": {"probability": 0.2209, "ci_lo": 0.1859, "ci_hi": 0.2553, "windows": 1440.0},
                "ladder": [{"level": 21.0, "reach_probability": 0.03}, {"level": 40.0, "reach_probability": 1e-3}],
            }],
        });
        let page = render(&document);
        assert!(page.contains("<b>1.733e-4</b> [1.428e-4, 2.047e-4]"), "{page}");
        assert!(page.contains("<th>per 1d</th>") && page.contains("2.209e-1 [1.859e-1, 2.553e-1]"));
        assert!(page.contains("one run carries 60% of the estimate"));
        assert!(page.contains("24× fewer than plain replicas"), "{page}");
        assert!(page.contains("<svg") && page.contains("ladder"));
        assert!(!page.contains("<script"), "offline and inert");
    }
}
