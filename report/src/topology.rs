//! The service graph drawn as SVG (a `Topology` section): services as boxes coloured
//! by utilisation, faulted ones outlined in red, calls as arrows labelled with attempts
//! per entry request and the share of calls that failed. Laid out in columns by call
//! depth from the clients (breadth first, so a cycle still places every service); one
//! drawing per grid point. Hand-written SVG: plotters draws axes, not graphs.

use std::collections::{BTreeMap, VecDeque};

use plotters::style::RGBColor;
use stampede_scenario::models::presentation::{TopologyEdge, TopologyService};

use crate::blocks::escape;
use crate::chart::Figure;

const BOX_HEIGHT: f64 = 58.0;
const ROW_PITCH: f64 = 92.0;
const MARGIN: f64 = 16.0;
const WIDTH: f64 = 880.0;
const CLIENTS: &str = "clients";

/// One grid point's values: each service's colour metric, each edge's attempts per
/// entry request and failed share (NaN when unknown).
pub struct Values {
    pub colour: Vec<f64>,
    pub per_request: Vec<f64>,
    pub failed: Vec<f64>,
}

/// Light green at 0 through amber to red at 1.
fn heat(share: f64) -> String {
    if !share.is_finite() {
        return "#eeeeee".into();
    }
    let t = share.clamp(0.0, 1.0);
    let stops = [(0.0, (0xd9, 0xf0, 0xd3)), (0.5, (0xfe, 0xe0, 0x8b)), (1.0, (0xf4, 0x6d, 0x43))];
    let (a, b) = if t <= 0.5 { (stops[0], stops[1]) } else { (stops[1], stops[2]) };
    let u = (t - a.0) / (b.0 - a.0);
    let mix = |x: u8, y: u8| (x as f64 + (y as f64 - x as f64) * u).round() as u8;
    format!("#{:02x}{:02x}{:02x}", mix(a.1 .0, b.1 .0), mix(a.1 .1, b.1 .1), mix(a.1 .2, b.1 .2))
}

/// Columns by breadth-first depth from the clients; unreachable services go last.
fn layers(services: &[TopologyService], edges: &[TopologyEdge]) -> Vec<Vec<String>> {
    let mut depth: BTreeMap<&str, usize> = BTreeMap::new();
    let mut queue = VecDeque::new();
    if edges.iter().any(|e| e.from.is_none()) {
        depth.insert(CLIENTS, 0);
        queue.push_back(CLIENTS);
    }
    while let Some(node) = queue.pop_front() {
        let d = depth[node];
        for edge in edges.iter().filter(|e| e.from.as_deref().unwrap_or(CLIENTS) == node) {
            if !depth.contains_key(edge.to.as_str()) {
                depth.insert(edge.to.as_str(), d + 1);
                queue.push_back(edge.to.as_str());
            }
        }
    }
    let last = depth.values().copied().max().unwrap_or(0) + 1;
    let mut columns: Vec<Vec<String>> = vec![Vec::new(); last + 1];
    if depth.contains_key(CLIENTS) {
        columns[0].push(CLIENTS.into());
    }
    for service in services {
        columns[depth.get(service.name.as_str()).copied().unwrap_or(last)].push(service.name.clone());
    }
    columns.retain(|c| !c.is_empty());
    columns
}

/// Where the boxes are: each box's top-left corner by name, and their width.
struct Layout {
    at: BTreeMap<String, (f64, f64)>,
    box_width: f64,
}

/// The drawing for one grid point.
pub fn draw(title: &str, services: &[TopologyService], edges: &[TopologyEdge], values: &Values) -> Figure {
    let columns = layers(services, edges);
    let pitch = WIDTH / columns.len() as f64;
    let box_width = (pitch - 100.0).clamp(90.0, 160.0);
    let rows = columns.iter().map(Vec::len).max().unwrap_or(1) as f64;
    let height = (rows * ROW_PITCH + 2.0 * MARGIN).max(140.0);
    let mut at: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for (c, column) in columns.iter().enumerate() {
        let top = (height - column.len() as f64 * ROW_PITCH) / 2.0 + (ROW_PITCH - BOX_HEIGHT) / 2.0;
        for (r, name) in column.iter().enumerate() {
            at.insert(name.clone(), (c as f64 * pitch + (pitch - box_width) / 2.0, top + r as f64 * ROW_PITCH));
        }
    }
    let layout = Layout { at, box_width };
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" \
         font-family=\"sans-serif\"><defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" \
         markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\" \
         fill=\"#555\"/></marker></defs>"
    );
    let csv_rows = draw_edges(&mut svg, &layout, edges, values);
    draw_services(&mut svg, &layout, services, values);
    svg.push_str("</svg>");
    let mut csv = String::from("from,to,call_site,attempts_per_entry_request,failed_share\n");
    for row in &csv_rows {
        csv.push_str(&row.join(","));
        csv.push('\n');
    }
    Figure {
        kind: "topology",
        title: title.to_string(),
        svg,
        points: csv_rows.len() + services.len(),
        csv,
        legend: vec![
            ("idle".into(), RGBColor(0xd9, 0xf0, 0xd3)),
            ("half busy".into(), RGBColor(0xfe, 0xe0, 0x8b)),
            ("saturated".into(), RGBColor(0xf4, 0x6d, 0x43)),
        ],
        note: "Means over replicas. A box's colour is its utilisation; a red dashed outline or arrow is a fault's \
               target; an arrow's label is the attempts along it per request entering the graph (retries and \
               hedges included) and the share of its calls that failed (fallbacks excluded)."
            .into(),
    }
}

/// Each edge's arrow (an arc below for a call back or within a column) and its label;
/// returns the CSV rows. Edges between the same two boxes (a service edge and call
/// sites' own) share the arrow; their labels stack.
fn draw_edges(svg: &mut String, layout: &Layout, edges: &[TopologyEdge], values: &Values) -> Vec<Vec<String>> {
    let (at, box_width) = (&layout.at, layout.box_width);
    let mut csv_rows = Vec::new();
    let mut labels_at: BTreeMap<(String, String), f64> = BTreeMap::new();
    for (e, edge) in edges.iter().enumerate() {
        let from = edge.from.clone().unwrap_or_else(|| CLIENTS.into());
        let stacked = labels_at.entry((from.clone(), edge.to.clone())).or_insert(0.0);
        let shift = *stacked;
        *stacked += 32.0;
        let (Some(&(fx, fy)), Some(&(tx, ty))) = (at.get(&from), at.get(&edge.to)) else { continue };
        let (x1, y1) = (fx + box_width, fy + BOX_HEIGHT / 2.0);
        let (x2, y2) = (tx, ty + BOX_HEIGHT / 2.0);
        let colour = if edge.faulted { "#d62728" } else { "#555" };
        let path = if x2 > x1 {
            format!("M {x1:.1} {y1:.1} L {x2:.1} {y2:.1}")
        } else {
            // A call back to an earlier column (a cycle) or within one: an arc below.
            let bottom = fy.max(ty) + BOX_HEIGHT + 24.0;
            format!(
                "M {:.1} {:.1} C {:.1} {bottom:.1}, {:.1} {bottom:.1}, {:.1} {:.1}",
                fx + box_width / 2.0,
                fy + BOX_HEIGHT,
                fx,
                tx + box_width,
                tx + box_width / 2.0,
                ty + BOX_HEIGHT
            )
        };
        let dash = if edge.faulted { " stroke-dasharray=\"6 3\"" } else { "" };
        svg.push_str(&format!(
            "<path d=\"{path}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.6\"{dash} marker-end=\"url(#arrow)\"><title>{}</title></path>",
            escape(&format!("{from} → {}", edge.to))
        ));
        let (per_request, failed) = (values.per_request[e], values.failed[e]);
        let (mx, my) = if x2 > x1 {
            ((x1 + x2) / 2.0, (y1 + y2) / 2.0 + shift)
        } else {
            ((fx + tx + box_width) / 2.0, fy.max(ty) + BOX_HEIGHT + 14.0 + shift)
        };
        let first = match (per_request.is_finite(), edge.call_site.is_empty()) {
            (true, true) => format!("×{per_request:.2} per request"),
            (true, false) => format!("{} ×{per_request:.2}", edge.call_site),
            (false, _) => "no requests".into(),
        };
        let label_width = (first.chars().count() as f64 * 6.2).max(96.0);
        let second = if failed.is_finite() { format!("{:.1}% failed", failed * 100.0) } else { String::new() };
        svg.push_str(&format!(
            "<g font-size=\"11\" text-anchor=\"middle\" fill=\"#222\"><rect x=\"{:.1}\" y=\"{:.1}\" width=\"{label_width:.0}\" height=\"28\" fill=\"white\" opacity=\"0.85\"/><text x=\"{mx:.1}\" y=\"{:.1}\">{}</text><text x=\"{mx:.1}\" y=\"{:.1}\">{}</text></g>",
            mx - label_width / 2.0,
            my - 15.0,
            my - 3.0,
            escape(&first),
            my + 10.0,
            escape(&second)
        ));
        csv_rows.push(vec![from, edge.to.clone(), edge.call_site.clone(), fmt(per_request), fmt(failed)]);
    }
    csv_rows
}

/// Each service's box, coloured by how busy it is, and the clients' box.
fn draw_services(svg: &mut String, layout: &Layout, services: &[TopologyService], values: &Values) {
    let (at, box_width) = (&layout.at, layout.box_width);
    for (name, &(x, y)) in at {
        let service = services.iter().enumerate().find(|(_, s)| &s.name == name);
        let (fill, stroke, detail, third) = match service {
            None => ("#ffffff".to_string(), "#555".to_string(), "the workload".to_string(), String::new()),
            Some((s, service)) => {
                let share = values.colour[s];
                let third = if share.is_finite() { format!("{:.0}% busy", share * 100.0) } else { String::new() };
                let stroke = if service.faulted { "#d62728" } else { "#333" };
                (heat(share), stroke.into(), service.detail.clone(), third)
            }
        };
        let faulted = service.is_some_and(|(_, s)| s.faulted);
        let width = if faulted { 2.5 } else { 1.2 };
        let dash = if faulted { " stroke-dasharray=\"5 3\"" } else { "" };
        svg.push_str(&format!(
            "<g><rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{box_width:.1}\" height=\"{BOX_HEIGHT}\" rx=\"6\" fill=\"{fill}\" stroke=\"{stroke}\" stroke-width=\"{width}\"{dash}/>\
             <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"13\" font-weight=\"bold\" text-anchor=\"middle\">{}</text>\
             <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">{}</text>\
             <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">{}</text></g>",
            x + box_width / 2.0,
            y + 17.0,
            escape(&format!("{name}{}", if faulted { " ⚡" } else { "" })),
            x + box_width / 2.0,
            y + 33.0,
            escape(&detail),
            x + box_width / 2.0,
            y + 48.0,
            escape(&third)
        ));
    }
}

fn fmt(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.6}")
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(name: &str, faulted: bool) -> TopologyService {
        TopologyService {
            name: name.into(),
            detail: "1 × 1 workers".into(),
            colour_by: format!("{name}.utilisation"),
            faulted,
        }
    }

    fn edge(from: Option<&str>, to: &str) -> TopologyEdge {
        TopologyEdge {
            call_site: String::new(),
            from: from.map(Into::into),
            to: to.into(),
            attempts: String::new(),
            calls: String::new(),
            failed: String::new(),
            faulted: false,
        }
    }

    #[test]
    fn layers_follow_call_depth_and_a_cycle_still_places_everyone() {
        let services = [service("api", false), service("cache", true), service("db", false), service("orphan", false)];
        let edges = [edge(None, "api"), edge(Some("api"), "cache"), edge(Some("api"), "db"), edge(Some("db"), "api")];
        let columns = layers(&services, &edges);
        assert_eq!(columns, vec![vec!["clients"], vec!["api"], vec!["cache", "db"], vec!["orphan"]]);
        let values = Values {
            colour: vec![0.1, 0.9, f64::NAN, 0.0],
            per_request: vec![1.0, 2.5, 0.1, 0.0],
            failed: vec![0.0, 0.25, 0.0, f64::NAN],
        };
        let figure = draw("t", &services, &edges, &values);
        assert!(figure.svg.contains("×2.50 per request") && figure.svg.contains("25.0% failed"), "{}", figure.svg);
        assert!(figure.svg.contains("cache ⚡") && figure.svg.contains("stroke=\"#d62728\""));
        assert!(figure.svg.contains(" C "), "the call back from db to api is an arc");
        assert_eq!(figure.csv.lines().count(), 5);
        assert_eq!(heat(0.0), "#d9f0d3");
        assert_eq!(heat(1.0), "#f46d43");
    }
}
