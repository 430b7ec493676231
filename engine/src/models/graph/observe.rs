//! What importance splitting (`stampede rare`) reads and does to a graph replica:
//! its state quantities by small index, and the forking of every random stream.
//!
//! Quantities, by index: for service `s`, `3s` its jobs queued for a worker, `3s + 1`
//! its busy workers, `3s + 2` its jobs present (queued, in service or waiting on
//! calls); then, after every service's three, the attempts in flight in the whole
//! graph and the jobs in it. Reading one is an array index, no search.

use super::model::Graph;
use crate::kernel::splitting::Forkable;

/// Quantities per service, in index order.
pub const SERVICE_QUANTITIES: [&str; 3] = ["queue_depth", "busy", "in_system"];
/// Quantities of the whole graph, after every service's.
pub const GRAPH_QUANTITIES: [&str; 2] = ["attempts_in_flight", "jobs_in_flight"];

impl Graph<'_> {
    /// Quantity `index` of the state now (module docs); `NaN` past the last.
    pub fn quantity(&self, index: usize) -> f64 {
        let per_service = SERVICE_QUANTITIES.len();
        match self.services.get(index / per_service) {
            Some(service) => match index % per_service {
                0 => service.queued as f64,
                1 => service.busy as f64,
                _ => service.present as f64,
            },
            None => match index - self.services.len() * per_service {
                0 => self.attempts.len() as f64,
                1 => self.jobs.len() as f64,
                _ => f64::NAN,
            },
        }
    }
}

impl Forkable for Graph<'_> {
    fn fork_streams(&mut self, salt: u64) {
        // Each stream's salt differs, so that two streams that happen to be in one
        // position still fork apart.
        let mut next = salt;
        let mut fork = |stream: &mut crate::kernel::rng::RngStream| {
            next = crate::kernel::rng::mix64(next.wrapping_add(0x9e37_79b9_7f4a_7c15));
            stream.fork(next);
        };
        for service in &mut self.services {
            fork(&mut service.work_rng);
            fork(&mut service.error_rng);
            fork(&mut service.limit_rng);
            if let Some(scaler) = &mut service.scaler {
                fork(&mut scaler.provision_rng);
            }
        }
        for edge in &mut self.edges {
            fork(&mut edge.network_rng);
            fork(&mut edge.client_rng);
            fork(&mut edge.routing_rng);
        }
        for workload in &mut self.workloads {
            fork(&mut workload.arrival_rng);
            fork(&mut workload.mix_rng);
        }
        self.site_rng.iter_mut().chain(&mut self.branch_rng).for_each(fork);
    }
}
