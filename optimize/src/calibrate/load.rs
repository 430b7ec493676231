//! The observed load as the run's load: an observed column of arrivals per second
//! becomes the `[load]` rate schedule (a step per interval), so that simulation and
//! production see the same traffic.
//!
//! The load columns: `offered_rps` for a model with one open-loop stream (cluster,
//! dependency, gateway — turns per second —, mmc, mg1), and `ENTRY.offered_rps` for a
//! graph workload entering at `ENTRY` (`web.page.offered_rps`). A scenario whose
//! stream already has a `[load]` rate or trace keeps it (the column is then not used,
//! and the caller says so); otherwise its constant rate field is removed and `load =
//! { rate = [[t, r], …], interpolate = "step" }` takes its place (a graph workload's
//! `arrivals = "even"` moves into the load, where the graph wants it; a `[load]` that
//! only shaped the constant rate loses its `bursts` and `scale`, which production's
//! rate already holds).
//!
//! The first observed rate holds from time 0, so a run whose observed rows start later
//! warms up on production's load.
//!
//! Invariant: a load column is never compared as a metric — it is what drives the run.

use stampede_scenario::base::error::{Error, Result};

/// Where one load column goes.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadSlot {
    /// The observed column.
    pub column: String,
    /// The graph workload's index, or `None` for the model's one stream (at the top).
    pub workload: Option<usize>,
    /// The constant rate's field, dotted from the table the load goes in.
    pub rate_field: &'static str,
}

/// The load columns a scenario of `model` (its source `source`) takes.
pub fn slots(model: &str, source: &toml::Table) -> Vec<LoadSlot> {
    let one = |rate_field| vec![LoadSlot { column: "offered_rps".into(), workload: None, rate_field }];
    match model {
        "graph" => source
            .get("workload")
            .and_then(toml::Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
            .filter_map(|(i, workload)| {
                let entry = workload.get("entry")?.as_str()?;
                // A closed-loop workload's arrivals follow its users.
                (workload.get("users").is_none()).then(|| LoadSlot {
                    column: format!("{entry}.offered_rps"),
                    workload: Some(i),
                    rate_field: "rate_per_s",
                })
            })
            .collect(),
        "cluster" => one("clients.arrival_rate_per_s"),
        "dependency" => one("service.arrival_rate_per_s"),
        "gateway" => one("workload.turns_per_s"),
        "mmc" | "mg1" => one("queue.arrival_rate_per_s"),
        _ => Vec::new(),
    }
}

/// Whether `load` (a `[load]` table) already sets the arrivals' rate or trace.
fn sets_rate(load: Option<&toml::Value>) -> bool {
    load.and_then(toml::Value::as_table).is_some_and(|l| {
        l.contains_key("rate") || l.contains_key("rate_file") || l.get("arrivals").is_some_and(toml::Value::is_table)
    })
}

/// Puts the schedule `rates` (from each `starts_s`, arrivals per second) into
/// `source` at `slot`. Returns false (changing nothing) when the scenario's own
/// `[load]` already sets the rate there.
pub fn apply(source: &mut toml::Table, slot: &LoadSlot, starts_s: &[f64], rates: &[Option<f64>]) -> Result<bool> {
    let table = match slot.workload {
        Some(i) => source
            .get_mut("workload")
            .and_then(toml::Value::as_array_mut)
            .and_then(|list| list.get_mut(i))
            .and_then(toml::Value::as_table_mut)
            .expect("a slot names a workload of the source"),
        None => source,
    };
    if sets_rate(table.get("load")) {
        return Ok(false);
    }
    let mut schedule = Vec::with_capacity(rates.len());
    let mut last = None;
    for (&start, &rate) in starts_s.iter().zip(rates) {
        let rate = rate.or(last).ok_or_else(|| {
            Error::bad_input(format!(
                "--observed: {}: no value at the first interval ({start} s); the load must start measured",
                slot.column
            ))
        })?;
        if !(rate.is_finite() && rate >= 0.0) {
            return Err(Error::bad_input(format!(
                "--observed: {} = {rate} at {start} s: arrivals per second must be 0 or more",
                slot.column
            )));
        }
        if last != Some(rate) {
            // The first rate holds from the start: the run warms up on production's load.
            let from = if schedule.is_empty() { 0.0 } else { start };
            schedule.push(toml::Value::Array(vec![toml::Value::Float(from), toml::Value::Float(rate)]));
        }
        last = Some(rate);
    }
    // The constant rate gives way to the schedule (a model refuses both).
    let mut parts: Vec<&str> = slot.rate_field.split('.').collect();
    let leaf = parts.pop().expect("a field");
    let mut holder = Some(&mut *table);
    for part in parts {
        holder = holder.and_then(|t| t.get_mut(part)).and_then(toml::Value::as_table_mut);
    }
    if let Some(holder) = holder {
        holder.remove(leaf);
    }
    let mut load = table.get("load").and_then(toml::Value::as_table).cloned().unwrap_or_default();
    if let Some(arrivals) = table.remove("arrivals").filter(|_| slot.workload.is_some()) {
        load.insert("arrivals".into(), arrivals);
    }
    // Production's rate already holds its surges and shares: no burst or scale on top.
    load.remove("bursts");
    load.remove("scale");
    load.insert("rate".into(), toml::Value::Array(schedule));
    load.insert("interpolate".into(), toml::Value::String("step".into()));
    table.insert("load".into(), toml::Value::Table(load));
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_graph_workload_takes_its_entrys_column_and_keeps_its_spacing() {
        let mut source: toml::Table = toml::from_str(
            "model = \"graph\"\n[[workload]]\nentry = \"web.page\"\nrate_per_s = 5.0\narrivals = \"even\"\n\
             [[workload]]\nentry = \"web.admin\"\nusers = 3\n",
        )
        .unwrap();
        let slots = slots("graph", &source);
        assert_eq!(slots.len(), 1, "a closed-loop workload takes no load column");
        assert_eq!(slots[0].column, "web.page.offered_rps");
        assert!(apply(&mut source, &slots[0], &[0.0, 10.0, 20.0], &[Some(100.0), None, Some(300.0)]).unwrap());
        let workload = source["workload"][0].as_table().unwrap();
        assert!(!workload.contains_key("rate_per_s") && !workload.contains_key("arrivals"));
        let load = workload["load"].as_table().unwrap();
        assert_eq!(load["arrivals"].as_str(), Some("even"));
        assert_eq!(load["interpolate"].as_str(), Some("step"));
        // A missing value keeps the last rate; equal steps are merged.
        assert_eq!(load["rate"].to_string(), "[[0.0, 100.0], [20.0, 300.0]]");
    }

    #[test]
    fn a_scenario_with_its_own_schedule_keeps_it_and_a_bad_rate_is_refused() {
        let mut source: toml::Table =
            toml::from_str("[load]\nrate = [[0, 5]]\n[service]\narrival_rate_per_s = 3.0\n").unwrap();
        let slot = &slots("dependency", &source)[0];
        assert!(!apply(&mut source, slot, &[0.0], &[Some(9.0)]).unwrap());
        assert_eq!(source["load"]["rate"].to_string(), "[[0, 5]]");
        let mut source: toml::Table = toml::from_str(
            "[service]\narrival_rate_per_s = 3.0\n[load]\nbursts = [{ at_s = 1, duration_s = 1, factor = 5 }]\n",
        )
        .unwrap();
        assert!(apply(&mut source, slot, &[5.0, 10.0], &[Some(9.0), Some(7.0)]).unwrap());
        assert!(!source["service"].as_table().unwrap().contains_key("arrival_rate_per_s"));
        // Observed from 5 s on: the first rate holds from the start.
        assert_eq!(source["load"]["rate"].to_string(), "[[0.0, 9.0], [10.0, 7.0]]");
        // The observed rate holds the surge already.
        assert!(!source["load"].as_table().unwrap().contains_key("bursts"));
        for (rates, says) in [(vec![None], "no value at the first interval"), (vec![Some(-1.0)], "must be 0 or more")] {
            let mut source = toml::Table::new();
            let error = apply(&mut source, slot, &[0.0], &rates).unwrap_err().to_string();
            assert!(error.contains("offered_rps") && error.contains(says), "{error}");
        }
    }
}
