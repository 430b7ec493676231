//! A graph point set up for `stampede rare`: its state quantities by name
//! (`api.queue_depth`, `api.busy`, `api.in_system` for every service, then
//! `attempts_in_flight` and `jobs_in_flight`) and its trajectories.

use stampede_engine::kernel::splitting::{Splittable, Trajectory};
use stampede_engine::models::graph::observe::{GRAPH_QUANTITIES, SERVICE_QUANTITIES};
use stampede_engine::models::graph::{Graph as GraphModel, GraphParams};
use stampede_engine::LatencyHistogram;

use super::topology::Topology;
use crate::models::rare::{Observed, Probe};

/// The names of a graph's quantities, in the engine's index order.
pub(crate) fn quantities(topology: &Topology) -> Vec<String> {
    let services = topology.services.iter().flat_map(|s| SERVICE_QUANTITIES.map(|q| format!("{s}.{q}")));
    services.chain(GRAPH_QUANTITIES.map(String::from)).collect()
}

/// A graph point's parameters, the histograms a replica records into, the seed and
/// the probe.
pub(crate) struct GraphSplitting {
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
        let model = GraphModel::new(self.params.clone(), self.master_seed, origin, scratch);
        let read = |model: &GraphModel<'_>, quantity: usize| model.quantity(quantity);
        Box::new(Observed { simulation: model.into_simulation(), probe: self.probe.clone(), read })
    }
}
