//! What `stampede rare` asks of a model's state: a [`Probe`] (the event, the score
//! that rises toward it, an optional stop condition), parsed from the command line
//! against the model's state quantities, and [`Observed`], the one [`Trajectory`]
//! every model's splitting uses (its simulation, its probe and how to read a
//! quantity).
//!
//! A condition is `QUANTITY OP NUMBER` (`api.queue_depth >= 200`, `in_system == 0`)
//! with OP one of `>=`, `>`, `<=`, `<`, `==`, `!=`; a score is a quantity's name.
//! Quantities are indexed by their place in the model's list, so a probe reads them
//! with no string work per event.

use stampede_engine::kernel::sim::{Model, Simulation};
use stampede_engine::kernel::splitting::{self, Forkable, LegEnd, Observation, Record, Trajectory};
use stampede_engine::kernel::time::Nanos;

use crate::base::error::{Error, Result};

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
        let (at, symbol, comparison) = Comparison::ALL
            .iter()
            .filter_map(|&(symbol, comparison)| text.find(symbol).map(|at| (at, symbol, comparison)))
            .min_by_key(|&(at, symbol, _)| (at, std::cmp::Reverse(symbol.len())))
            .ok_or_else(|| {
                Error::bad_input(format!(
                    "{flag} '{text}': expected QUANTITY OP NUMBER, OP one of >= > <= < == != (e.g. '{} >= 100')",
                    names.first().map_or("queue_depth", String::as_str)
                ))
            })?;
        let quantity = quantity(flag, text[..at].trim(), names)?;
        let number = text[at + symbol.len()..].trim();
        let value = number.parse::<f64>().ok().filter(|v| v.is_finite()).ok_or_else(|| {
            Error::bad_input(format!("{flag} '{text}': '{number}' is not a number (the right side is a finite number)"))
        })?;
        Ok(Condition { quantity, comparison, value })
    }

    fn holds(&self, values: &impl Fn(usize) -> f64) -> bool {
        self.comparison.holds(values(self.quantity), self.value)
    }
}

/// A quantity's index by name, or an error listing the names there are.
pub(crate) fn quantity(flag: &str, name: &str, names: &[String]) -> Result<usize> {
    names.iter().position(|known| known == name).ok_or_else(|| {
        let shown: Vec<&str> = names.iter().take(12).map(String::as_str).collect();
        let more =
            if names.len() > shown.len() { format!(" and {} more", names.len() - shown.len()) } else { String::new() };
        Error::bad_input(format!(
            "{flag}: '{name}' is not a state quantity of this model; it has {}{more}",
            shown.join(", ")
        ))
    })
}

/// The event, the score and the stop condition of a `rare` estimate.
#[derive(Clone, Debug, PartialEq)]
pub struct Probe {
    event: Condition,
    /// The score's quantity.
    score: usize,
    /// A trajectory stops (a miss) when this holds.
    until: Option<Condition>,
}

impl Probe {
    /// Parses `--event`, `--score` and `--until` against `names`. Without `--score`,
    /// the score is the event's quantity when the event is a rise past a value (`>=`,
    /// `>`), else an error asking for one.
    pub fn parse(names: &[String], event: &str, score: Option<&str>, until: Option<&str>) -> Result<Probe> {
        if names.is_empty() {
            return Err(Error::bad_input("this model has no state quantities `rare` can observe yet"));
        }
        let event = Condition::parse("--event", event, names)?;
        let score = match score {
            Some(name) => quantity("--score", name.trim(), names)?,
            None if matches!(event.comparison, Comparison::AtLeast | Comparison::Above) => event.quantity,
            None => {
                return Err(Error::bad_input(format!(
                    "--event compares {} with {:?}: name the score that rises toward it with --score",
                    names[event.quantity], event.comparison
                )))
            }
        };
        let until = until.map(|text| Condition::parse("--until", text, names)).transpose()?;
        Ok(Probe { event, score, until })
    }

    /// The observation of a state whose quantities `values` reads.
    #[inline]
    pub fn observe(&self, values: impl Fn(usize) -> f64) -> Observation {
        Observation {
            score: values(self.score),
            event: self.event.holds(&values),
            stopped: self.until.as_ref().is_some_and(|until| until.holds(&values)),
        }
    }
}

/// A model's trajectory for splitting: its simulation, the probe, and `read`, which
/// gives quantity `i` of the model's state.
pub struct Observed<M: Model + Forkable, R: Fn(&M, usize) -> f64> {
    pub simulation: Simulation<M>,
    pub probe: Probe,
    pub read: R,
}

impl<M: Model + Forkable, R: Fn(&M, usize) -> f64> Trajectory for Observed<M, R> {
    fn leg(&mut self, horizon: Nanos, level: f64, records: Option<&mut Vec<Record>>) -> LegEnd {
        let (probe, read) = (&self.probe, &self.read);
        splitting::leg(&mut self.simulation, horizon, level, records, |model| probe.observe(|i| read(model, i)))
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
}
