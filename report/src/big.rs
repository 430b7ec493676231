//! What the report of a big graph shows: past [`BIG_PARTS`] services, a page of every
//! service's charts would be tens of megabytes (116 MB for 1,000 services) and take
//! minutes, so the report ranks the services and the entry points and draws the ones
//! that matter in full — the [`SHOWN`] services that caused the most failures, the
//! [`SHOWN`] busiest and the [`SHOWN`] holding the most requests in flight (by Little's
//! law, the most request time), and the [`SHOWN`] entry points that answered the most
//! requests less than in full — with every service in one collapsible table. The rest
//! stays in the folder's tables (`attribution.parquet`, `summary.parquet`).
//!
//! Ranks take each service's highest value over the grid points, so a service that
//! matters at any point is shown. Ties break by name, so the page never depends on
//! hash order.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use stampede_scenario::models::metrics::Attribution;
use stampede_scenario::models::presentation::{Presentation, Section as ModelSection};

use crate::data::SummaryIndex;

/// More services than this make a graph big.
pub const BIG_PARTS: usize = 24;

/// Services (per ranking) and entry points drawn in full.
pub const SHOWN: usize = 10;

/// The services and entry points a big graph's report draws in full, with the
/// figures it ranked every service by.
#[derive(Clone, Debug, Default)]
pub struct Focus {
    /// Services drawn in full.
    pub parts: BTreeSet<String>,
    /// Entry points drawn over time, most requests not answered in full first.
    pub entries: Vec<String>,
    /// Every service with its ranking figures, most failures caused first.
    pub services: Vec<ServiceFigures>,
}

/// One service's ranking figures: the highest over the grid points.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServiceFigures {
    pub name: String,
    /// Failed requests at every entry point that it caused (`*.caused_by.NAME`).
    pub failures_caused: f64,
    /// Busy workers ÷ workers.
    pub utilisation: f64,
    /// Requests in it on average (Little's L: its share of all request time).
    pub in_flight: f64,
}

impl Focus {
    /// The focus of a report whose model presents `presentation` and attributes
    /// failures by `attribution` (the schema's), ranked on `summary` over `points`;
    /// `None` for a model of at most [`BIG_PARTS`] parts.
    pub fn of(
        presentation: &Presentation,
        attribution: &[(usize, Attribution)],
        summary: &SummaryIndex,
        points: &[u32],
    ) -> Option<Focus> {
        let parts: Vec<&str> = presentation
            .sections
            .iter()
            .filter_map(|s| match s {
                ModelSection::Part { name, .. } => Some(name.as_str()),
                _ => None,
            })
            .collect();
        if parts.len() <= BIG_PARTS {
            return None;
        }
        let highest = |metric: &str| {
            points.iter().filter_map(|&p| summary.interval(p, metric)).map(|v| v.value).fold(f64::NAN, f64::max)
        };
        let or_zero = |v: f64| if v.is_nan() { 0.0 } else { v };
        let caused = failures_caused(attribution, summary, points);
        let mut services: Vec<ServiceFigures> = parts
            .iter()
            .map(|&name| ServiceFigures {
                name: name.to_string(),
                failures_caused: caused.get(name).copied().unwrap_or(0.0),
                utilisation: or_zero(highest(&format!("{name}.utilisation"))),
                in_flight: or_zero(highest(&format!("{name}.in_flight_mean"))),
            })
            .collect();
        let mut shown = BTreeSet::new();
        let top =
            |services: &mut Vec<ServiceFigures>, key: fn(&ServiceFigures) -> f64, shown: &mut BTreeSet<String>| {
                services.sort_by(|a, b| key(b).total_cmp(&key(a)).then_with(|| a.name.cmp(&b.name)));
                shown.extend(services.iter().take(SHOWN).filter(|s| key(s) > 0.0).map(|s| s.name.clone()));
            };
        top(&mut services, |s| s.in_flight, &mut shown);
        top(&mut services, |s| s.utilisation, &mut shown);
        top(&mut services, |s| s.failures_caused, &mut shown);
        let entries = entry_ranking(presentation, summary, points);
        Some(Focus { parts: shown, entries, services })
    }

    /// Whether a series or time-series column named `name` belongs to what is drawn:
    /// a whole-model series (no dot), or one of `wanted` followed by `_` or `.`.
    pub fn wants(wanted: &HashSet<String>, name: &str) -> bool {
        if !name.contains('.') {
            return true;
        }
        name.char_indices().filter(|(_, c)| *c == '.' || *c == '_').any(|(i, _)| wanted.contains(&name[..i]))
            || wanted.contains(name)
    }

    /// The series and request kinds the page draws from `presentation`'s: those of
    /// the parts shown and the entry points shown.
    pub fn wanted(&self, presentation: &Presentation) -> HashSet<String> {
        let mut wanted: HashSet<String> = self.entries.iter().cloned().collect();
        for section in &presentation.sections {
            if let ModelSection::Part { name, series, .. } = section {
                if self.parts.contains(name) {
                    wanted.extend(series.iter().cloned());
                }
            }
        }
        wanted
    }
}

/// Per service, the failures it caused: the sum over entry points of the failed
/// requests it caused (`ENTRY.caused_by.SERVICE`, wherever they failed), the highest
/// over `points`.
fn failures_caused(
    attribution: &[(usize, Attribution)],
    summary: &SummaryIndex,
    points: &[u32],
) -> BTreeMap<String, f64> {
    let mut caused: BTreeMap<String, f64> = BTreeMap::new();
    for &point in points {
        let mut at_point: BTreeMap<&str, f64> = BTreeMap::new();
        for (_, cause) in attribution.iter().filter(|(_, a)| a.reason == "caused") {
            let service = cause.service;
            let value = summary.interval(point, cause.metric).map_or(0.0, |v| v.value);
            if value.is_finite() {
                *at_point.entry(service).or_default() += value;
            }
        }
        for (service, value) in at_point {
            let total = caused.entry(service.to_string()).or_default();
            *total = total.max(value);
        }
    }
    caused
}

/// The entry points of `presentation`'s topology, the [`SHOWN`] with the most
/// requests not answered in full (offered × (1 − success ratio), the highest over
/// `points`) first, then by requests offered.
fn entry_ranking(presentation: &Presentation, summary: &SummaryIndex, points: &[u32]) -> Vec<String> {
    let entries: Vec<String> = presentation
        .sections
        .iter()
        .flat_map(|s| match s {
            ModelSection::Topology { entries, .. } => {
                entries.iter().filter_map(|e| e.strip_suffix(".offered")).map(str::to_string).collect()
            }
            _ => Vec::new(),
        })
        .collect();
    let value = |point: u32, metric: String| summary.interval(point, &metric).map_or(0.0, |v| v.value);
    let mut ranked: Vec<(f64, f64, String)> = entries
        .into_iter()
        .map(|e| {
            let (mut missed, mut offered) = (0.0f64, 0.0f64);
            for &p in points {
                let o = value(p, format!("{e}.offered"));
                let success = value(p, format!("{e}.success_ratio"));
                if o.is_finite() && success.is_finite() {
                    missed = missed.max(o * (1.0 - success));
                }
                offered = offered.max(if o.is_finite() { o } else { 0.0 });
            }
            (missed, offered, e)
        })
        .collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.total_cmp(&a.1)).then_with(|| a.2.cmp(&b.2)));
    ranked.into_iter().take(SHOWN).map(|(.., e)| e).collect()
}
