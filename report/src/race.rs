//! The report's race section, for a folder `stampede optimize` wrote: each
//! candidate's objective interval against the replicas spent so far, its line ending
//! where it left the race, and the final standings as a table.

use std::collections::BTreeMap;

use stampede_output::Table;

use crate::blocks::{csv, escape, Block, Context, Section};
use crate::chart::{series_colour, short, Axis, Line, LinePlot, Point, WIDE};

/// The row of one candidate in one round of `optimize.parquet`.
struct Standing {
    round: u32,
    spent: f64,
    replicas: f64,
    mean: f64,
    lo: f64,
    hi: f64,
    state: String,
    reason: String,
}

/// Per candidate (its grid point), its label and its standings round by round.
type ByCandidate = BTreeMap<u32, (String, Vec<Standing>)>;

/// Each candidate's label and standings round by round, with the rows of the
/// figure's CSV; `None` when a column is missing.
fn standings(table: &Table) -> Option<(ByCandidate, Vec<Vec<String>>)> {
    let numbers = |name: &str| table.numbers(name).ok();
    let (rounds, spent, points, replicas) =
        (numbers("round")?, numbers("replicas_spent")?, numbers("grid_point")?, numbers("replicas")?);
    let (means, los, his) = (numbers("objective_mean")?, numbers("objective_ci_lo")?, numbers("objective_ci_hi")?);
    let (labels, states, reasons) =
        (table.strings("candidate").ok()?, table.strings("state").ok()?, table.strings("reason").ok()?);
    let mut by_candidate = ByCandidate::new();
    let mut rows = Vec::new();
    for i in 0..table.rows() {
        let candidate = points[i] as u32;
        let entry = by_candidate.entry(candidate).or_insert_with(|| (labels[i].clone(), Vec::new()));
        entry.1.push(Standing {
            round: rounds[i] as u32,
            spent: spent[i],
            replicas: replicas[i],
            mean: means[i],
            lo: los[i],
            hi: his[i],
            state: states[i].clone(),
            reason: reasons[i].clone(),
        });
        rows.push(vec![
            format!("{}", rounds[i]),
            format!("{}", spent[i]),
            candidate.to_string(),
            format!("{}", replicas[i]),
            format!("{}", means[i]),
            format!("{}", los[i]),
            format!("{}", his[i]),
            states[i].clone(),
        ]);
    }
    Some((by_candidate, rows))
}

/// Candidate `candidate`'s line (the `k`th of `n`): drawn while alive, and at the
/// round it left the race (its last point).
fn candidate_line(k: usize, n: usize, candidate: u32, standings: &[Standing]) -> Line {
    let mut shown: Vec<&Standing> = Vec::new();
    for standing in standings {
        shown.push(standing);
        if standing.state != "alive" {
            break;
        }
    }
    let last = standings.last().expect("a candidate has rows");
    let out = shown.last().filter(|s| s.state != "alive" && s.state != "chosen");
    let suffix = match out {
        Some(s) => format!(" — {} in round {}", s.state, s.round),
        None if last.state == "chosen" => " — chosen".to_string(),
        None => String::new(),
    };
    Line {
        label: format!("#{candidate}{suffix}"),
        colour: series_colour(k, n),
        points: shown
            .iter()
            .filter(|s| s.mean.is_finite())
            .map(|s| Point { x: s.spent, y: s.mean, interval: (s.lo.is_finite()).then_some((s.lo, s.hi)) })
            .collect(),
        whiskers: true,
    }
}

/// The objective's metric and why the search chose as it did (`optimize.json`).
fn objective(ctx: &Context) -> (String, String) {
    let objective = std::fs::read_to_string(ctx.folder.dir.join("optimize.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
    let metric = objective
        .as_ref()
        .and_then(|o| o.pointer("/objective/metric"))
        .and_then(|m| m.as_str())
        .unwrap_or("objective")
        .to_string();
    let why = objective.as_ref().and_then(|o| o.get("why")).and_then(|w| w.as_str()).unwrap_or_default().to_string();
    (metric, why)
}

/// The race section, when the folder has `optimize.parquet`.
pub fn race(ctx: &Context) -> Option<Section> {
    let (_, table) = ctx.folder.extra.iter().find(|(name, _)| name == "optimize.parquet")?;
    let (by_candidate, rows) = standings(table)?;
    let n = by_candidate.len();
    let mut lines = Vec::new();
    let mut table_rows = String::new();
    for (k, (candidate, (label, standings))) in by_candidate.iter().enumerate() {
        lines.push(candidate_line(k, n, *candidate, standings));
        let last = standings.last().expect("a candidate has rows");
        let emphasis = if last.state == "chosen" { " class=\"best\"" } else { "" };
        table_rows.push_str(&format!(
            "<tr{emphasis}><td>#{candidate}</td><td>{}</td><td>{}</td><td>{} [{}, {}]</td><td>{}</td><td>{}</td></tr>",
            escape(label),
            last.replicas,
            short(last.mean),
            short(last.lo),
            short(last.hi),
            escape(&last.state),
            escape(&last.reason)
        ));
    }
    let (metric, why) = objective(ctx);
    let plot = LinePlot {
        title: format!("The race: {metric} per candidate against replicas spent"),
        x: Axis::linear("replicas spent in all"),
        y: Axis::linear(metric.clone()),
        lines,
        windows: Vec::new(),
        markers: Vec::new(),
        bands: Vec::new(),
        size: WIDE,
    };
    let figure = plot.render(
        "race",
        csv(&["round", "replicas_spent", "grid_point", "replicas", "mean", "ci_lo", "ci_hi", "state"], rows),
        "Each candidate's mean and interval after every round it took part in; a line ends where the candidate \
         was eliminated (or found infeasible)."
            .into(),
    );
    let standings = format!(
        "<table><thead><tr><th>#</th><th>candidate</th><th>replicas</th><th>{} [interval]</th><th>state</th>\
         <th>why</th></tr></thead><tbody>{table_rows}</tbody></table>",
        escape(&metric)
    );
    Some(Section {
        id: "race".into(),
        title: "Optimization race".into(),
        intro: format!(
            "How `stampede optimize` spent its replicas: candidates raced on common random numbers, the dominated \
             and the infeasible eliminated as soon as the data said so. {}",
            escape(&why)
        ),
        blocks: vec![Block::Figure(figure), Block::Html(standings)],
    })
}
