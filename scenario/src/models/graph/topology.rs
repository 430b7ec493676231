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

impl Topology {
    /// The services a request of workload `w` can reach, in index order: its entry's
    /// service and every service its calls can lead to (through every step, taken or
    /// not). Only these can be the cause of its failures, so only these get its
    /// `failed_by`/`degraded_by` columns — a graph of 1,000 one-service entries has
    /// 1,000 such columns per reason, not a million. A walk over endpoints with an
    /// explicit stack: no recursion on the graph's depth.
    pub fn reachable_services(&self, w: usize) -> Vec<u32> {
        use stampede_engine::models::graph::params::Step;
        let p = &self.params;
        let mut seen_endpoint = vec![false; p.endpoints.len()];
        let mut seen_service = vec![false; p.services.len()];
        let start = p.workloads[w].endpoint as usize;
        let mut stack = vec![start];
        seen_endpoint[start] = true;
        while let Some(e) = stack.pop() {
            let endpoint = &p.endpoints[e];
            seen_service[endpoint.service as usize] = true;
            let steps = endpoint.first_step as usize..(endpoint.first_step + endpoint.step_count) as usize;
            for step in &p.steps[steps] {
                if let Step::Calls { first_call, calls, .. } = *step {
                    for site in &p.call_sites[first_call as usize..(first_call + calls) as usize] {
                        let callee = site.endpoint as usize;
                        if !seen_endpoint[callee] {
                            seen_endpoint[callee] = true;
                            stack.push(callee);
                        }
                    }
                }
            }
        }
        (0..p.services.len() as u32).filter(|&s| seen_service[s as usize]).collect()
    }

    /// The services that can cause workload `w`'s failures or slow answers: those its
    /// requests reach, and every service those call along any edge, whatever endpoint
    /// calls it (a request waits behind workers that wait on another endpoint's calls:
    /// the causal walk follows a service's edges, not one request's). In index order.
    pub fn culprit_services(&self, w: usize) -> Vec<u32> {
        let p = &self.params;
        let mut callees = vec![Vec::new(); p.services.len()];
        for edge in &p.edges {
            if let Some(from) = edge.from {
                callees[from as usize].push(edge.to);
            }
        }
        let mut seen = vec![false; p.services.len()];
        let mut stack = self.reachable_services(w);
        for &s in &stack {
            seen[s as usize] = true;
        }
        while let Some(s) = stack.pop() {
            for &to in &callees[s as usize] {
                if !seen[to as usize] {
                    seen[to as usize] = true;
                    stack.push(to);
                }
            }
        }
        (0..p.services.len() as u32).filter(|&s| seen[s as usize]).collect()
    }
}
