//! A graph scenario resolved: the engine's parameters with every name turned into an
//! index, and the names in index order, which the metrics, the report and the engine
//! share. Built once per grid point by `build.rs`.

use stampede_engine::models::graph::GraphParams;

/// The graph with its names: what the metrics, the report and the engine read.
#[derive(Clone, Debug)]
pub struct Topology {
    /// Everything but the run's times (filled in per replica).
    pub params: GraphParams,
    pub services: Vec<String>,
    /// `service.endpoint`, by endpoint index.
    pub endpoints: Vec<String>,
    /// `caller->callee`, by edge index.
    pub edges: Vec<String>,
    /// Each workload's entry, `service.endpoint`.
    pub entries: Vec<String>,
    /// Each call site, in the call sites' order: `caller.endpoint->callee.endpoint`,
    /// with `#2`, `#3`… for the same pair's later sites in one endpoint's steps.
    pub sites: Vec<String>,
}

impl PartialEq for Topology {
    fn eq(&self, other: &Self) -> bool {
        // Built from the sections, which are compared themselves.
        self.services == other.services && self.edges == other.edges && self.entries == other.entries
    }
}
