//! What `stampede rare` asks of a model: a [`Probe`] (the event, the score that
//! rises toward it, an optional stop condition), parsed from the command line
//! against the model's state quantities and metrics, and [`Observed`], the one
//! [`Trajectory`] every model's splitting uses (its simulation, its probe, how to
//! read a quantity and how to finish the run).
//!
//! An event is one of:
//! - `QUANTITY OP NUMBER` over the state (`api.queue_depth >= 200`, `in_system == 0`),
//!   checked after every event: the first time it holds is a hit;
//! - `METRIC OP NUMBER` over a metric of the finished run (`recovered == false`), or
//!   `window(W, STAT) OP NUMBER` over its latencies in windows, judged once at the
//!   horizon ([`at_end`]).
//!
//! OP is one of `>=`, `>`, `<=`, `<`, `==`, `!=`, NUMBER a finite number or `true`/
//! `false` (1/0); a score is a quantity's name. Quantities and metrics are indexed by
//! their place in the model's lists, so a probe reads them with no string work per
//! event.

mod at_end;

use stampede_engine::kernel::sim::{Model, Simulation};
use stampede_engine::kernel::splitting::{self, Forkable, LegEnd, Observation, Record, Trajectory};
use stampede_engine::kernel::time::Nanos;

use crate::base::error::{Error, Result};
use crate::models::expression::MetricExpr;
use crate::models::metrics::ReplicaOutput;
use at_end::AtEnd;

/// A comparison in a condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Comparison {
    AtLeast,
    Above,
    AtMost,
    Below,
    Equal,
    NotEqual,
}

impl Comparison {
    const ALL: [(&'static str, Comparison); 6] = [
        (">=", Comparison::AtLeast),
        ("<=", Comparison::AtMost),
        ("==", Comparison::Equal),
        ("!=", Comparison::NotEqual),
        (">", Comparison::Above),
        ("<", Comparison::Below),
    ];

    fn holds(self, left: f64, right: f64) -> bool {
        match self {
            Comparison::AtLeast => left >= right,
            Comparison::Above => left > right,
            Comparison::AtMost => left <= right,
            Comparison::Below => left < right,
            Comparison::Equal => left == right,
            Comparison::NotEqual => left != right,
        }
    }
}

/// `QUANTITY OP NUMBER`, the quantity by its index in the model's list.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Condition {
    quantity: usize,
    comparison: Comparison,
    value: f64,
}

impl Condition {
    /// Parses `text` (given as `flag`) against the model's quantity `names`.
    pub(crate) fn parse(flag: &str, text: &str, names: &[String]) -> Result<Condition> {
        let (name, comparison, value) = split(flag, text, |name| names.iter().any(|known| known == name), names)?;
        Ok(Condition { quantity: quantity(flag, name, names)?, comparison, value })
    }

    fn holds(&self, values: &impl Fn(usize) -> f64) -> bool {
        self.comparison.holds(values(self.quantity), self.value)
    }
}

/// `NAME OP NUMBER` split at the operator whose left side `known` accepts (a
/// metric's name may hold `>`: a graph edge's `api->db.retries`), else at the first
/// operator, so the error names what is wrong. NUMBER may be `true` (1) or `false` (0).
fn split<'t>(
    flag: &str,
    text: &'t str,
    known: impl Fn(&str) -> bool,
    names: &[String],
) -> Result<(&'t str, Comparison, f64)> {
    let mut candidates: Vec<(usize, &str, Comparison)> = Comparison::ALL
        .iter()
        .flat_map(|&(symbol, comparison)| text.match_indices(symbol).map(move |(at, _)| (at, symbol, comparison)))
        .collect();
    candidates.sort_by_key(|&(at, symbol, _)| (at, std::cmp::Reverse(symbol.len())));
    let parts = |&(at, symbol, comparison): &(usize, &str, Comparison)| {
        (text[..at].trim(), comparison, text[at + symbol.len()..].trim())
    };
    let chosen = candidates
        .iter()
        .map(parts)
        .find(|(name, _, number)| known(name) && number_of(number).is_some())
        .or_else(|| candidates.first().map(parts))
        .ok_or_else(|| {
            Error::bad_input(format!(
                "{flag} '{text}': expected QUANTITY OP NUMBER, OP one of >= > <= < == != (e.g. '{} >= 100')",
                names.first().map_or("queue_depth", String::as_str)
            ))
        })?;
    let (name, comparison, number) = chosen;
    let value = number_of(number).ok_or_else(|| {
        Error::bad_input(format!(
            "{flag} '{text}': '{number}' is not a number (the right side is a finite number, true or false)"
        ))
    })?;
    Ok((name, comparison, value))
}

/// A condition's right side: a finite number, `true` (1) or `false` (0).
fn number_of(text: &str) -> Option<f64> {
    match text {
        "true" => Some(1.0),
        "false" => Some(0.0),
        _ => text.parse::<f64>().ok().filter(|v| v.is_finite()),
    }
}

/// A quantity's index by name, or an error listing the names there are.
pub(crate) fn quantity(flag: &str, name: &str, names: &[String]) -> Result<usize> {
    names.iter().position(|known| known == name).ok_or_else(|| {
        Error::bad_input(format!("{flag}: '{name}' is not a state quantity of this model; it has {}", listed(names)))
    })
}

/// The first dozen of `names`, and how many more.
fn listed(names: &[String]) -> String {
    let shown: Vec<&str> = names.iter().take(12).map(String::as_str).collect();
    let more =
        if names.len() > shown.len() { format!(" and {} more", names.len() - shown.len()) } else { String::new() };
    format!("{}{more}", shown.join(", "))
}

/// What a model offers a probe: its state quantities, its metrics (the model's, then
/// the derived ones with the expressions that compute them), the request kinds it
/// keeps over time, the score of an event judged at the end when none is named, and
/// the horizon its trajectories run to.
pub(crate) struct Offered<'a> {
    pub(crate) quantities: &'a [String],
    pub(crate) metrics: &'a [String],
    pub(crate) derived: &'a [MetricExpr],
    pub(crate) timed: &'a [String],
    pub(crate) end_score: Option<&'a str>,
    pub(crate) horizon: Nanos,
}

/// The event of a probe.
#[derive(Clone, Debug, PartialEq)]
enum Event {
    /// Checked on the state after every event.
    State(Condition),
    /// Judged once, on the finished run.
    AtEnd(AtEnd),
}

/// The event, the score and the stop condition of a `rare` estimate.
#[derive(Clone, Debug, PartialEq)]
pub struct Probe {
    event: Event,
    /// The score's quantity.
    score: usize,
    /// A trajectory stops (a miss) when this holds.
    until: Option<Condition>,
    /// The derived metrics' expressions, past the model's own metrics.
    derived: Vec<MetricExpr>,
}

impl Probe {
    /// Parses `--event`, `--score` and `--until` against state quantities `names`
    /// alone (see [`Probe::parse_offered`]).
    pub fn parse(names: &[String], event: &str, score: Option<&str>, until: Option<&str>) -> Result<Probe> {
        let offered =
            Offered { quantities: names, metrics: &[], derived: &[], timed: &[], end_score: None, horizon: 0 };
        Probe::parse_offered(&offered, event, score, until)
    }

    /// Parses `--event`, `--score` and `--until` against what a model `offered`. An
    /// event names a state quantity first, else a metric or `window(…)` (judged at
    /// the end). Without `--score`, the score is the event's quantity when the event
    /// is a rise past a value (`>=`, `>`), the model's end score for an event judged
    /// at the end, else an error asking for one.
    pub(crate) fn parse_offered(
        offered: &Offered<'_>,
        event: &str,
        score: Option<&str>,
        until: Option<&str>,
    ) -> Result<Probe> {
        let names = offered.quantities;
        if names.is_empty() {
            return Err(Error::bad_input("this model has no state quantities `rare` can observe yet"));
        }
        let event = parse_event(event.trim(), offered)?;
        let score = match (score, &event) {
            (Some(name), _) => quantity("--score", name.trim(), names)?,
            (None, Event::State(condition))
                if matches!(condition.comparison, Comparison::AtLeast | Comparison::Above) =>
            {
                condition.quantity
            }
            (None, Event::State(condition)) => {
                return Err(Error::bad_input(format!(
                    "--event compares {} with {:?}: name the score that rises toward it with --score",
                    names[condition.quantity], condition.comparison
                )))
            }
            (None, Event::AtEnd(_)) => match offered.end_score {
                Some(name) => quantity("--score", name, names)?,
                None => {
                    return Err(Error::bad_input(format!(
                        "--event is judged at the end of the run: name the state quantity that rises toward it with                          --score (this model's: {})",
                        listed(names)
                    )))
                }
            },
        };
        if until.is_some() && matches!(event, Event::AtEnd(_)) {
            return Err(Error::bad_input(
                "--until: an event judged at the end of the run (a metric, window(…)) runs every trajectory to the                  horizon; --until stops only at events of the state",
            ));
        }
        let until = until.map(|text| Condition::parse("--until", text, names)).transpose()?;
        Ok(Probe { event, score, until, derived: offered.derived.to_vec() })
    }

    /// The observation of a state whose quantities `values` reads.
    #[inline]
    pub fn observe(&self, values: impl Fn(usize) -> f64) -> Observation {
        Observation {
            score: values(self.score),
            event: match &self.event {
                Event::State(condition) => condition.holds(&values),
                Event::AtEnd(_) => false,
            },
            stopped: self.until.as_ref().is_some_and(|until| until.holds(&values)),
        }
    }

    /// The width of the windows a trajectory must keep its latencies in (for a
    /// `window(…)` event), else `None`.
    pub(crate) fn latency_window(&self) -> Option<Nanos> {
        match &self.event {
            Event::AtEnd(end) => end.latency_step(),
            Event::State(_) => None,
        }
    }

    /// At the end of a run at `horizon`: whether an event judged there held, the
    /// run's output made by `finish` only if one is asked.
    fn judge_at_end(&self, horizon: Nanos, finish: impl FnOnce() -> ReplicaOutput) -> bool {
        match &self.event {
            Event::AtEnd(end) => end.holds(&finish(), &self.derived, horizon),
            Event::State(_) => false,
        }
    }
}

/// An event's text as a state condition, a metric judged at the end or `window(…)`.
fn parse_event(text: &str, offered: &Offered<'_>) -> Result<Event> {
    if let Some(after) = text.strip_prefix("window(") {
        let close = after.find(')').ok_or_else(|| {
            Error::bad_input(format!("--event '{text}': window( has no ')': expected window(SECONDS, STAT) OP NUMBER"))
        })?;
        let (inside, rest) = (&after[..close], &after[close + 1..]);
        let (_, comparison, value) = split("--event", &format!("window {rest}"), |name| name == "window", &[])?;
        return Ok(Event::AtEnd(AtEnd::window(inside, comparison, value, offered.timed, offered.horizon)?));
    }
    let is_name = |name: &str| offered.quantities.iter().chain(offered.metrics).any(|known| known == name);
    let (name, comparison, value) = split("--event", text, is_name, offered.quantities)?;
    if let Some(quantity) = offered.quantities.iter().position(|known| known == name) {
        return Ok(Event::State(Condition { quantity, comparison, value }));
    }
    if let Some(metric) = offered.metrics.iter().position(|known| known == name) {
        return Ok(Event::AtEnd(AtEnd::Metric { metric, comparison, value }));
    }
    let metrics = if offered.metrics.is_empty() {
        String::new()
    } else {
        format!(", nor a metric of the run ({}), nor window(SECONDS, STAT)", listed(offered.metrics))
    };
    Err(Error::bad_input(format!(
        "--event: '{name}' is not a state quantity of this model ({}){metrics}",
        listed(offered.quantities)
    )))
}

/// A model's trajectory for splitting: its simulation, the probe, `read`, which
/// gives quantity `i` of the model's state, and `finish`, which ends the run at an
/// instant (its events handled so far given) and writes its output as a replica's.
pub struct Observed<M: Model + Forkable, R: Fn(&M, usize) -> f64, F: FnMut(&mut M, Nanos, u64) -> ReplicaOutput> {
    pub simulation: Simulation<M>,
    pub probe: Probe,
    pub read: R,
    pub finish: F,
}

/// The `finish` of a model with no metrics of its run (its probes observe state only).
pub fn no_output<M>(_: &mut M, _: Nanos, _: u64) -> ReplicaOutput {
    ReplicaOutput::default()
}

impl<M, R, F> Trajectory for Observed<M, R, F>
where
    M: Model + Forkable,
    R: Fn(&M, usize) -> f64,
    F: FnMut(&mut M, Nanos, u64) -> ReplicaOutput,
{
    fn leg(&mut self, horizon: Nanos, level: f64, records: Option<&mut Vec<Record>>) -> LegEnd {
        let (probe, read, finish) = (&self.probe, &self.read, &mut self.finish);
        splitting::leg(
            &mut self.simulation,
            horizon,
            level,
            records,
            |model| probe.observe(|i| read(model, i)),
            |simulation| {
                probe.judge_at_end(horizon, || {
                    let events = simulation.events_handled();
                    finish(&mut simulation.model, horizon, events)
                })
            },
        )
    }
    fn replay(&mut self, events: u64) {
        splitting::replay(&mut self.simulation, events);
    }
    fn fork(&mut self, salt: u64) {
        self.simulation.model.fork_streams(salt);
    }
    fn events(&self) -> u64 {
        self.simulation.events_handled()
    }
    fn observe(&self) -> Observation {
        self.probe.observe(|i| (self.read)(&self.simulation.model, i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        ["in_system", "queue_depth", "api.queue_depth"].map(String::from).to_vec()
    }

    #[test]
    fn conditions_parse_with_the_longest_operator_and_name_what_is_wrong() {
        let c = Condition::parse("--event", "api.queue_depth >= 200", &names()).unwrap();
        assert_eq!((c.quantity, c.comparison, c.value), (2, Comparison::AtLeast, 200.0));
        let c = Condition::parse("--until", "in_system==0", &names()).unwrap();
        assert_eq!((c.quantity, c.comparison, c.value), (0, Comparison::Equal, 0.0));
        let c = Condition::parse("--event", "queue_depth > 3", &names()).unwrap();
        assert_eq!(c.comparison, Comparison::Above);
        let wrong = Condition::parse("--event", "depth >= 3", &names()).unwrap_err().to_string();
        assert!(
            wrong.contains("'depth' is not a state quantity") && wrong.contains("in_system, queue_depth"),
            "{wrong}"
        );
        let wrong = Condition::parse("--event", "in_system >= lots", &names()).unwrap_err().to_string();
        assert!(wrong.contains("'lots' is not a number"), "{wrong}");
        let wrong = Condition::parse("--event", "in_system", &names()).unwrap_err().to_string();
        assert!(wrong.contains("QUANTITY OP NUMBER"), "{wrong}");
    }

    #[test]
    fn the_score_defaults_to_a_rising_events_quantity_and_is_asked_for_otherwise() {
        let probe = Probe::parse(&names(), "queue_depth >= 9", None, Some("in_system == 0")).unwrap();
        assert_eq!(probe.score, 1);
        let seen = probe.observe(|i| [0.0, 9.0, 1.0][i]);
        assert_eq!(seen, Observation { score: 9.0, event: true, stopped: true });
        let wrong = Probe::parse(&names(), "in_system == 0", None, None).unwrap_err().to_string();
        assert!(wrong.contains("--score"), "{wrong}");
        assert_eq!(Probe::parse(&names(), "in_system == 0", Some("queue_depth"), None).unwrap().score, 1);
    }

    fn offered<'a>(quantities: &'a [String], metrics: &'a [String], timed: &'a [String]) -> Offered<'a> {
        Offered { quantities, metrics, derived: &[], timed, end_score: Some("in_system"), horizon: 60_000_000_000 }
    }

    #[test]
    fn a_metric_of_the_run_is_judged_at_the_end_with_the_models_end_score() {
        let (names, timed) = (names(), vec!["api.get".to_string()]);
        let metrics: Vec<String> = ["recovered", "api->db.retries", "in_system"].map(String::from).to_vec();
        let probe = Probe::parse_offered(&offered(&names, &metrics, &timed), "recovered == false", None, None).unwrap();
        assert_eq!(probe.event, Event::AtEnd(AtEnd::Metric { metric: 0, comparison: Comparison::Equal, value: 0.0 }));
        assert_eq!(probe.score, 0, "the end score");
        assert!(probe.latency_window().is_none());
        // A name holding '>' splits at the operator after it.
        let probe =
            Probe::parse_offered(&offered(&names, &metrics, &timed), "api->db.retries > 30", None, None).unwrap();
        assert_eq!(probe.event, Event::AtEnd(AtEnd::Metric { metric: 1, comparison: Comparison::Above, value: 30.0 }));
        // A state quantity wins over a metric of the same name.
        let probe = Probe::parse_offered(&offered(&names, &metrics, &timed), "in_system >= 3", None, None).unwrap();
        assert!(matches!(probe.event, Event::State(_)));
        let wrong = Probe::parse_offered(
            &offered(&names, &metrics, &timed),
            "recovered == false",
            None,
            Some("in_system == 0"),
        )
        .unwrap_err()
        .to_string();
        assert!(wrong.contains("--until") && wrong.contains("at the end"), "{wrong}");
        let wrong =
            Probe::parse_offered(&offered(&names, &metrics, &timed), "nope > 1", None, None).unwrap_err().to_string();
        assert!(wrong.contains("'nope'") && wrong.contains("nor a metric of the run (recovered"), "{wrong}");
        let no_end_score = Offered { end_score: None, ..offered(&names, &metrics, &timed) };
        let wrong = Probe::parse_offered(&no_end_score, "recovered == false", None, None).unwrap_err().to_string();
        assert!(wrong.contains("--score"), "{wrong}");
    }

    #[test]
    fn a_window_event_keeps_latencies_in_sixths_of_its_width_and_names_what_is_wrong() {
        let (names, timed) = (names(), vec!["api.get".to_string()]);
        let offered = offered(&names, &[], &timed);
        let probe = Probe::parse_offered(&offered, "window(60, p99_all_s) > 2", None, None).unwrap();
        assert_eq!(probe.latency_window(), Some(10_000_000_000));
        let probe = Probe::parse_offered(&offered, "window(1s, api.get.failed_share) >= 0.5", None, None).unwrap();
        assert_eq!(probe.latency_window(), Some(200_000_000), "1 s is not a multiple of 6 ns: fifths");
        for (event, says) in [
            ("window(90, p99_all_s) > 2", "does not fit in the 60 s"),
            ("window(10, p99) > 2", "is not KIND.STAT"),
            ("window(10 p99_all_s) > 2", "expected window(SECONDS, STAT)"),
            ("window(soon, p99_all_s) > 2", "'soon' is not a duration"),
            ("window(10, p99_all_s > 2", "has no ')'"),
            ("window(10, p99_all_s) > lots", "'lots' is not a number"),
        ] {
            let wrong = Probe::parse_offered(&offered, event, None, None).unwrap_err().to_string();
            assert!(wrong.contains(says), "{event}: {wrong}");
        }
        let none_timed = Offered { timed: &[], ..offered };
        let wrong = Probe::parse_offered(&none_timed, "window(10, p99_all_s) > 2", None, None).unwrap_err().to_string();
        assert!(wrong.contains("keeps no latencies over time"), "{wrong}");
    }
}
