//! What a gateway scenario works out once when it is loaded ([`Resolved`]): the fixture
//! with the scenario's overrides applied, the default bulkhead pools, the load, and
//! what is named from the fixture — the engine's classes, the metric table and the
//! latency histograms. Data only: `build` fills it, everything else reads it.

use std::collections::BTreeMap;
use std::sync::Arc;

use stampede_engine::models::gateway::GatewayResults;

use super::fixture::{Fixture, Gateway as GatewayKnobs};
use crate::models::metrics::Metric;

/// The fixture with the scenario's overrides applied, each class's p99 pool (calls in flight at the sustainable rate)
/// (the default bulkhead size), and what is named from the fixture: the engine's
/// classes, the metric table and the latency histograms.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Resolved {
    pub(super) fixture: Fixture,
    pub(super) knobs: GatewayKnobs,
    pub(super) pools: BTreeMap<String, super::capacity::Pool>,
    /// `[load]`'s turns, read once.
    pub(super) load: Option<stampede_engine::components::arrivals::ArrivalProcess>,
    /// Calls replayed by class (a trace with a class column), in the fixture's class order.
    pub(super) call_loads: Vec<(String, stampede_engine::components::arrivals::ArrivalProcess)>,
    /// The engine's classes, in its order.
    pub(super) classes: Vec<EngineClass>,
    pub(super) table: Arc<MetricTable>,
    pub(super) latencies: &'static [&'static str],
}

/// One of the engine's classes: a fixture class, or the re-sent copy of one.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct EngineClass {
    pub(super) name: &'static str,
    /// The fixture class it is (or copies).
    pub(super) source: String,
    pub(super) resent: bool,
}

/// The metric table, built once per scenario.
#[derive(Clone)]
pub(super) struct MetricTable(pub(super) Vec<Metric<GatewayResults>>);

impl std::fmt::Debug for MetricTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.iter().map(|m| m.def.name)).finish()
    }
}

/// Derived from the classes, which are compared in their own right.
impl PartialEq for MetricTable {
    fn eq(&self, other: &Self) -> bool {
        self.0.iter().map(|m| m.def.name).eq(other.0.iter().map(|m| m.def.name))
    }
}

impl Resolved {
    pub(super) fn class_names(&self) -> Vec<&'static str> {
        self.classes.iter().map(|c| c.name).collect()
    }

    pub(super) fn class_index(&self, name: &str) -> usize {
        self.classes.iter().position(|c| c.name == name && !c.resent).expect("a validated class")
    }
}
