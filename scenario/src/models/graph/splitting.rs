//! A graph point set up for `stampede rare`: its state quantities by name
//! (`api.queue_depth`, `api.busy`, `api.in_system` for every service, then
//! `attempts_in_flight` and `jobs_in_flight`) and its trajectories, which finish as
//! a replica does (its metrics and latencies over time) for an event judged at the end.

use std::sync::Arc;

use stampede_engine::kernel::splitting::{Splittable, Trajectory};
use stampede_engine::models::graph::observe::{GRAPH_QUANTITIES, SERVICE_QUANTITIES};
use stampede_engine::models::graph::{Graph as GraphModel, GraphParams};
use stampede_engine::LatencyHistogram;

use super::schema::GraphConfig;
use super::topology::Topology;
use crate::models::rare::{Observed, Probe};

/// The names of a graph's quantities, in the engine's index order.
pub(crate) fn quantities(topology: &Topology) -> Vec<String> {
    let services = topology.services.iter().flat_map(|s| SERVICE_QUANTITIES.map(|q| format!("{s}.{q}")));
    services.chain(GRAPH_QUANTITIES.map(String::from)).collect()
}

/// A graph point's configuration and parameters, the histograms a replica records
/// into, the seed and the probe.
pub(crate) struct GraphSplitting {
    pub config: Arc<GraphConfig>,
    pub params: GraphParams,
    pub histograms: usize,
    pub master_seed: u64,
    pub probe: Probe,
}

impl Splittable for GraphSplitting {
    fn scratch(&self) -> Vec<LatencyHistogram> {
        (0..self.histograms).map(|_| LatencyHistogram::new()).collect()
    }

    fn start<'a>(&self, scratch: &'a mut [LatencyHistogram], origin: u64) -> Box<dyn Trajectory + 'a> {
        let mut model = GraphModel::new(self.params.clone(), self.master_seed, origin, scratch);
        if let Some(window) = self.probe.latency_window() {
            model = model.with_latency_windows(window);
        }
        let read = |model: &GraphModel<'_>, quantity: usize| model.quantity(quantity);
        let config = Arc::clone(&self.config);
        let finish = move |model: &mut GraphModel<'_>, now, events| {
            let (results, series) = model.finish(now, events);
            super::output(&config, &results, series)
        };
        Box::new(Observed { simulation: model.into_simulation(), probe: self.probe.clone(), read, finish })
    }
}
