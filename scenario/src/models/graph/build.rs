//! From a `graph` scenario's sections to the engine's `GraphParams`: every name
//! resolved to an index once (services and endpoints in name order, edges in name
//! order), every distribution read, and every mistake refused with its field path —
//! unknown services or endpoints, call cycles without a depth bound, zero instances
//! or workers, probabilities outside [0, 1], quorums larger than their group, hedges
//! that can never fire, edges no call uses, faults on unknown targets.

use std::collections::{BTreeMap, BTreeSet};

use stampede_engine::components::arrivals::{ArrivalProcess, RateProfile};
use stampede_engine::components::zipf::Zipf;
use stampede_engine::models::cluster::QueueDiscipline;
use stampede_engine::models::graph::{
    Alternative, Autoscale, Balance, CacheParams, CallSite, EdgeParams, EndpointParams, Failure, FailureSet, FaultKind,
    FaultTarget, GraphFault, GraphParams, ScaleMetric, ServiceParams, Step, Wait, WorkloadArrivals, WorkloadParams,
};
use stampede_engine::policy::adaptive_timeout::AdaptiveTimeoutConfig;
use stampede_engine::policy::autoscale::AutoscaleConfig;
use stampede_engine::policy::codel::CoDelConfig;
use stampede_engine::policy::health::HealthCheckConfig;
use stampede_engine::policy::hedge::{HedgeConfig, HedgeDelay};
use stampede_engine::policy::limiter::{AimdConfig, Gradient2Config, GradientConfig, LimiterKind, VegasConfig};
use stampede_engine::policy::outlier::OutlierConfig;
use stampede_engine::policy::pool::PoolConfig;
use stampede_engine::policy::shedder::ShedMarks;
use stampede_engine::secs_to_nanos;
use stampede_engine::Nanos;

use super::super::cluster::{retry_budget, validate_budget, QueueOrderName};
use super::schema::{
    AlternativeConfig, AutoscaleSection, BalanceName, CacheSection, DeadlineName, EdgeConfig, EndpointConfig,
    FaultConfig, GraphConfig, HealthCheckSection, LimiterName, OutlierSection, PoolSection, QueueConfig,
    ScaleMetricName, ServiceConfig, StepConfig, Threading, TimeoutValue, WorkloadConfig,
};
use super::topology::Topology;
use crate::base::checks::{at_least_one, positive};
use crate::base::error::{Error, Result};

/// The name a workload's clients have as a caller (`client->api`).
pub const CLIENT: &str = "client";

fn bad(message: String) -> Error {
    Error::bad_input(message)
}

fn check_name(path: &str, name: &str) -> Result<()> {
    let valid = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !valid || name.contains("->") || name == CLIENT {
        return Err(bad(format!(
            "{path} {name:?}: a name is letters, digits, `_` and `-` (no `.`, `#` or `->`), and not {CLIENT:?}"
        )));
    }
    Ok(())
}

fn failures(path: &str, names: &[String], allowed: &[Failure]) -> Result<FailureSet> {
    let mut found = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let Some(failure) = allowed.iter().find(|f| f.name() == name) else {
            let list: Vec<&str> = allowed.iter().map(|f| f.name()).collect();
            return Err(bad(format!("{path}[{i}] = {name:?}: not a failure; allowed: {}", list.join(", "))));
        };
        found.push(*failure);
    }
    Ok(FailureSet::of(&found))
}

fn probability(path: &str, value: Option<f64>) -> Result<f64> {
    let p = value.unwrap_or(1.0);
    if !(0.0..=1.0).contains(&p) {
        return Err(bad(format!("{path} = {p}: a probability must be from 0 to 1")));
    }
    Ok(p)
}

/// Resolves the sections into a [`Topology`].
pub fn build(config: &GraphConfig) -> Result<Topology> {
    if config.services.is_empty() {
        return Err(bad("services: the graph needs at least one service".into()));
    }
    let mut builder = Builder {
        call_site_edges: config.edges.keys().filter(|name| is_call_site_edge(name)).cloned().collect(),
        ..Builder::default()
    };
    for (name, service) in &config.services {
        check_name("services", name)?;
        builder.service(name, service)?;
    }
    for (name, service) in &config.services {
        for (ep, endpoint) in &service.endpoints {
            let index = builder.endpoint_index[&format!("{name}.{ep}")];
            for (k, step) in endpoint.steps.iter().enumerate() {
                let path = format!("services.{name}.endpoints.{ep}.steps[{k}]");
                builder.step(index, &path, step, 0)?;
            }
        }
    }
    for (w, workload) in config.workload.iter().enumerate() {
        builder.workload(w, workload).map_err(|e| {
            if e.message.starts_with("workload") {
                e
            } else {
                e.context(format!("workload[{w}]"))
            }
        })?;
    }
    if config.workload.is_empty() {
        return Err(bad("workload: the graph needs at least one [[workload]] (where requests come from)".into()));
    }
    builder.max_depth = check_cycles(&builder, config.graph.max_depth)?;
    builder.edges(config)?;
    builder.faults(config)?;
    Ok(builder.finish())
}

/// A call site before edges have indices: (callee endpoint, edge name, probability).
type PendingSite = (u32, String, f64);

#[derive(Default)]
struct Builder {
    services: Vec<String>,
    service_index: BTreeMap<String, u32>,
    service_params: Vec<ServiceParams>,
    endpoints: Vec<String>,
    endpoint_index: BTreeMap<String, u32>,
    endpoint_params: Vec<EndpointParams>,
    /// Per endpoint, its steps with their call sites (a branch's and a jump's step
    /// numbers, and a branch's first alternative, count from the endpoint's first).
    steps: Vec<Vec<(Step, Vec<PendingSite>)>>,
    /// Per endpoint, its branches' alternatives.
    alternatives: Vec<Vec<Alternative>>,
    /// `[edges]` sections of one call site (`api.checkout->db.read`), which take those
    /// calls off their service edge.
    call_site_edges: BTreeSet<String>,
    /// Edge names in use, with (caller, callee).
    used_edges: BTreeMap<String, (Option<u32>, u32)>,
    workloads: Vec<(WorkloadParams, String)>,
    entries: Vec<String>,
    edge_names: Vec<String>,
    edge_params: Vec<EdgeParams>,
    faults: Vec<GraphFault>,
    max_depth: u32,
}

impl Builder {
    fn service(&mut self, name: &str, s: &ServiceConfig) -> Result<()> {
        let path = format!("services.{name}");
        at_least_one(&format!("{path}.instances"), s.instances)?;
        at_least_one(&format!("{path}.workers"), s.workers)?;
        if s.instances > 10_000 || s.workers > 1_000_000 {
            return Err(bad(format!("{path}: at most 10000 instances and 1000000 workers per instance")));
        }
        if s.endpoints.is_empty() {
            return Err(bad(format!("{path}.endpoints: a service needs at least one endpoint")));
        }
        let discipline = queue_discipline(&path, &s.queue)?;
        let limiter = s.limiter.as_ref().map(|l| limiter(&format!("{path}.limiter"), l)).transpose()?;
        let (shedder, rate_limit) = (shed_marks(&path, s)?, rate_limit(&path, s)?);
        let health_check =
            s.health_check.as_ref().map(|h| health_check(&format!("{path}.health_check"), h)).transpose()?;
        let autoscale =
            s.autoscale.as_ref().map(|a| autoscale(&format!("{path}.autoscale"), a, s.instances)).transpose()?;
        let index = self.services.len() as u32;
        self.services.push(name.to_string());
        self.service_index.insert(name.to_string(), index);
        self.service_params.push(ServiceParams {
            // Autoscaled: room for the most there can be; `initial` serve at first.
            instances: autoscale.as_ref().map_or(s.instances, |a| a.config.max),
            workers: s.workers,
            queue_capacity: s.queue.capacity,
            discipline,
            cancel_abandoned: s.cancel_abandoned,
            blocking: s.threading == Threading::Blocking,
            limiter,
            shedder,
            rate_limit,
            health_check,
            health_check_work: s.health_check.as_ref().map_or(0, |h| secs_to_nanos(h.work_s)),
            autoscale,
        });
        for (ep, endpoint) in &s.endpoints {
            check_name(&format!("{path}.endpoints"), ep)?;
            let work = endpoint.work.as_ref().map(|w| w.resolve(&format!("{path}.endpoints.{ep}.work"))).transpose()?;
            let full = format!("{name}.{ep}");
            self.endpoint_index.insert(full.clone(), self.endpoints.len() as u32);
            self.endpoints.push(full);
            let cache = endpoint
                .cache
                .as_ref()
                .map(|c| cache(&format!("{path}.endpoints.{ep}.cache"), c, endpoint))
                .transpose()?;
            self.endpoint_params.push(EndpointParams { service: index, work, first_step: 0, step_count: 0, cache });
            self.steps.push(Vec::new());
            self.alternatives.push(Vec::new());
        }
        Ok(())
    }

    /// `service.endpoint` → (endpoint index, its service's index).
    fn target(&self, path: &str, call: &str) -> Result<(u32, u32)> {
        if let Some(&endpoint) = self.endpoint_index.get(call) {
            return Ok((endpoint, self.endpoint_params[endpoint as usize].service));
        }
        let (service, _) = call.split_once('.').unwrap_or((call, ""));
        let message = match self.service_index.get(service) {
            None => format!("{path} = {call:?}: no service {service:?}; services: {}", self.services.join(", ")),
            Some(_) => {
                let endpoints: Vec<&str> = self
                    .endpoints
                    .iter()
                    .filter(|e| e.starts_with(&format!("{service}.")))
                    .map(String::as_str)
                    .collect();
                format!("{path} = {call:?}: no such endpoint; {service}'s endpoints: {}", endpoints.join(", "))
            }
        };
        Err(bad(message).with_hint("a call names service.endpoint, e.g. call = \"db.query\""))
    }

    /// Step `step` of `endpoint`, `depth` alternatives deep.
    fn step(&mut self, endpoint: u32, path: &str, step: &StepConfig, depth: u32) -> Result<()> {
        let kinds = [step.call.is_some(), step.parallel.is_some(), step.one_of.is_some(), step.work.is_some()];
        if kinds.iter().filter(|&&k| k).count() != 1 {
            return Err(bad(format!(
                "{path}: a step is one of call = \"service.endpoint\", parallel = [...], one_of = [...], or work = \
                 {{ dist = ... }}"
            )));
        }
        if let Some(alternatives) = &step.one_of {
            return self.one_of(endpoint, path, step, alternatives, depth);
        }
        if let Some(work) = &step.work {
            if step.probability.is_some() || step.wait.is_some() || step.quorum.is_some() {
                return Err(bad(format!("{path}: a work step takes no probability, wait or quorum")));
            }
            let distribution = work.resolve(&format!("{path}.work"))?;
            self.steps[endpoint as usize].push((Step::Work(distribution), Vec::new()));
            return Ok(());
        }
        let calls = step_calls(path, step)?;
        let wait = step_wait(path, step, calls.len())?;
        let mut sites = Vec::new();
        for (i, (call, p, call_path)) in calls.iter().enumerate() {
            let probability_path = if step.parallel.is_some() {
                format!("{path}.parallel[{i}].probability")
            } else {
                format!("{path}.probability")
            };
            let probability = probability(&probability_path, *p)?;
            let (callee, edge) = self.call_site(endpoint, call_path, call)?;
            sites.push((callee, edge, probability));
        }
        let count = sites.len() as u32;
        self.steps[endpoint as usize].push((Step::Calls { first_call: 0, calls: count, wait }, sites));
        Ok(())
    }

    /// `{ one_of = [...] }`: each alternative's probability given (or none, an equal
    /// share each), their sum at most 1. Alternatives that are single calls are one
    /// step that makes one of them; any with steps of its own make a branch.
    fn one_of(
        &mut self,
        endpoint: u32,
        path: &str,
        step: &StepConfig,
        alternatives: &[AlternativeConfig],
        depth: u32,
    ) -> Result<()> {
        let probabilities = one_of_probabilities(path, step, alternatives)?;
        if alternatives.iter().all(|a| a.call.is_some()) {
            let mut sites = Vec::new();
            for (i, (alternative, p)) in alternatives.iter().zip(probabilities).enumerate() {
                let call = alternative.call.as_deref().expect("all calls");
                let site = self.call_site(endpoint, &format!("{path}.one_of[{i}].call"), call)?;
                sites.push((site.0, site.1, p));
            }
            let count = sites.len() as u32;
            self.steps[endpoint as usize].push((Step::Calls { first_call: 0, calls: count, wait: Wait::OneOf }, sites));
            return Ok(());
        }
        if depth >= MAX_ALTERNATIVE_DEPTH {
            return Err(bad(format!(
                "{path}.one_of: alternatives nested {} deep; at most {MAX_ALTERNATIVE_DEPTH} (write the inner choice \
                 as its own endpoint)",
                depth + 1
            )));
        }
        self.branch(endpoint, path, alternatives, probabilities, depth)
    }

    /// A `one_of` some of whose alternatives are steps, compiled to
    /// `[branch] [alternative 0's steps] [jump to end] … [last alternative's steps] end`.
    fn branch(
        &mut self,
        endpoint: u32,
        path: &str,
        alternatives: &[AlternativeConfig],
        probabilities: Vec<f64>,
        depth: u32,
    ) -> Result<()> {
        let e = endpoint as usize;
        let branch = self.steps[e].len();
        let first_alternative = self.alternatives[e].len() as u32;
        self.steps[e].push((Step::Jump { to: 0 }, Vec::new()));
        let mut jumps = Vec::new();
        for (i, (alternative, p)) in alternatives.iter().zip(probabilities).enumerate() {
            let start = self.steps[e].len() as u32;
            self.alternatives[e].push(Alternative { probability: p, start });
            let at = format!("{path}.one_of[{i}]");
            match (&alternative.call, &alternative.steps) {
                (Some(call), _) => {
                    let single = StepConfig { call: Some(call.clone()), ..StepConfig::default() };
                    self.step(endpoint, &at, &single, depth + 1)?;
                }
                (None, Some(steps)) => {
                    if steps.is_empty() {
                        return Err(bad(format!(
                            "{at}.steps = []: give the alternative a step (an alternative that does nothing is the \
                             probability the others leave)"
                        )));
                    }
                    for (k, inner) in steps.iter().enumerate() {
                        self.step(endpoint, &format!("{at}.steps[{k}]"), inner, depth + 1)?;
                    }
                }
                (None, None) => unreachable!("checked by one_of_probabilities"),
            }
            if i + 1 < alternatives.len() {
                jumps.push(self.steps[e].len());
                self.steps[e].push((Step::Jump { to: 0 }, Vec::new()));
            }
        }
        let end = self.steps[e].len() as u32;
        for jump in jumps {
            self.steps[e][jump].0 = Step::Jump { to: end };
        }
        self.steps[e][branch].0 = Step::Branch { first_alternative, alternatives: alternatives.len() as u32, end };
        Ok(())
    }

    /// The call site of `call` from `endpoint`: the callee and the edge it travels (the
    /// call site's own edge where one is written, else the services').
    fn call_site(&mut self, endpoint: u32, call_path: &str, call: &str) -> Result<(u32, String)> {
        let caller = self.services[self.endpoint_params[endpoint as usize].service as usize].clone();
        let caller_endpoint = self.endpoints[endpoint as usize].clone();
        let (callee, callee_service) = self.target(call_path, call)?;
        let call_site = format!("{caller_endpoint}->{call}");
        let edge = if self.call_site_edges.contains(&call_site) {
            call_site
        } else {
            format!("{caller}->{}", self.services[callee_service as usize])
        };
        let from = self.service_index[caller.as_str()];
        self.used_edges.insert(edge.clone(), (Some(from), callee_service));
        Ok((callee, edge))
    }

    fn workload(&mut self, w: usize, workload: &WorkloadConfig) -> Result<()> {
        let path = format!("workload[{w}]");
        let (endpoint, service) = self.target(&format!("{path}.entry"), &workload.entry)?;
        if self.entries.contains(&workload.entry) {
            return Err(bad(format!("{path}.entry = {:?}: another workload enters there already; merge them (their metrics would share a name)", workload.entry)));
        }
        let edge = format!("{CLIENT}->{}", self.services[service as usize]);
        self.used_edges.insert(edge.clone(), (None, service));
        let arrivals = workload_arrivals(&path, workload)?;
        let seconds = |field: &str, value: Option<f64>| -> Result<Option<Nanos>> {
            value
                .map(|s| {
                    positive(&format!("{path}.{field}"), s, "a positive number of seconds").map(|()| secs_to_nanos(s))
                })
                .transpose()
        };
        let deadline = seconds("deadline_s", workload.deadline_s)?;
        let slo = seconds("slo_s", workload.slo_s)?;
        let criticality = criticality_mix(&path, workload.criticality.as_ref())?;
        if workload.keys == 0 {
            return Err(bad(format!("{path}.keys = 0: must be at least 1")));
        }
        let zipf = match workload.zipf_s {
            None => None,
            Some(s) if !(s.is_finite() && s >= 0.0) => {
                return Err(bad(format!("{path}.zipf_s = {s}: an exponent, 0 (uniform) or more")))
            }
            Some(_) if workload.keys > 10_000_000 => {
                return Err(bad(format!(
                    "{path}.keys = {}: at most 10000000 with zipf_s (the popularity table is kept in memory)",
                    workload.keys
                )))
            }
            Some(s) => Some(Zipf::new(workload.keys, s)),
        };
        self.entries.push(workload.entry.clone());
        let params =
            WorkloadParams { endpoint, edge: 0, arrivals, deadline, slo, criticality, keys: workload.keys, zipf };
        self.workloads.push((params, edge));
        Ok(())
    }

    /// Every edge a call or workload uses, in name order, with its `[edges]` section or the defaults.
    fn edges(&mut self, config: &GraphConfig) -> Result<()> {
        for name in config.edges.keys() {
            if !self.used_edges.contains_key(name) {
                let used: Vec<&str> = self.used_edges.keys().map(String::as_str).collect();
                return Err(bad(format!(
                    "edges.\"{name}\": no call goes along it; the graph's edges: {}",
                    used.join(", ")
                ))
                .with_hint(
                    "an edge is named caller->callee by service, e.g. \"api->db\" (a workload's is \"client->api\"), \
                     or by call site, caller endpoint->callee endpoint, e.g. \"api.checkout->db.read\"",
                ));
            }
        }
        let default = EdgeConfig::default();
        for (name, &(from, to)) in &self.used_edges {
            let mut section = config.edges.get(name).unwrap_or(&default).clone();
            if section.network.is_none() && is_call_site_edge(name) {
                // The network is the link's, whichever call crosses it.
                section.network = config.edges.get(&link_of(name)).and_then(|link| link.network.clone());
            }
            let params =
                edge(&format!("edges.\"{name}\""), &section, from, to, self.service_params[to as usize].instances)?;
            self.edge_names.push(name.clone());
            self.edge_params.push(params);
        }
        Ok(())
    }

    fn faults(&mut self, config: &GraphConfig) -> Result<()> {
        for (i, fault) in config.faults.iter().enumerate() {
            let path = format!("faults[{i}]");
            // A fault on a link reaches the call-site edges that cross it too.
            let also: Vec<u32> = (0..self.edge_names.len() as u32)
                .filter(|&e| {
                    let name = &self.edge_names[e as usize];
                    is_call_site_edge(name) && link_of(name) == fault.target
                })
                .collect();
            let target = self.fault_target(&path, fault, &also)?;
            let on_edge = matches!(target, FaultTarget::Edge(_));
            if fault.instances.is_some() && (on_edge || fault.target.contains('#')) {
                return Err(bad(format!("{path}.instances: only for a fault on a whole service (k of its instances)")));
            }
            let kind = fault_kind(&path, fault, on_edge)?;
            if let (FaultKind::Flush, FaultTarget::Instances { service, .. }) = (kind, target) {
                if !self.endpoint_params.iter().any(|e| e.service == service && e.cache.is_some()) {
                    return Err(bad(format!(
                        "{path}.kind = \"flush\": empties caches, and {} has no endpoint with a cache",
                        self.services[service as usize]
                    )));
                }
            }
            if fault.mode.is_some() && !matches!(kind, FaultKind::Partition { .. }) {
                return Err(bad(format!("{path}.mode: only a partition has a mode")));
            }
            let (start, duration) = (secs_to_nanos(fault.start_s), secs_to_nanos(fault.duration_s));
            self.faults.push(GraphFault { target, kind, start, duration });
            for &e in also.iter().filter(|&&e| FaultTarget::Edge(e) != target) {
                self.faults.push(GraphFault { target: FaultTarget::Edge(e), kind, start, duration });
            }
        }
        Ok(())
    }

    /// What fault `path` hits: an edge (by name, or the first call-site edge `also`
    /// across its link), one instance (`service#k`), or k instances of a service.
    fn fault_target(&self, path: &str, fault: &FaultConfig, also: &[u32]) -> Result<FaultTarget> {
        if let Some(index) = self.edge_names.iter().position(|e| *e == fault.target) {
            return Ok(FaultTarget::Edge(index as u32));
        }
        if let Some(&first) = also.first() {
            return Ok(FaultTarget::Edge(first));
        }
        let (service, instance) = match fault.target.split_once('#') {
            Some((service, k)) => (service, Some(k)),
            None => (fault.target.as_str(), None),
        };
        let Some(&s) = self.service_index.get(service) else {
            return Err(bad(format!(
                "{path}.target = {:?}: not a service, an instance (service#k) or an edge; services: {}; edges: {}",
                fault.target,
                self.services.join(", "),
                self.edge_names.join(", ")
            )));
        };
        let instances = self.service_params[s as usize].instances;
        match instance {
            Some(k) => {
                let k: u32 = k.parse().ok().filter(|&k| k < instances).ok_or_else(|| {
                    bad(format!("{path}.target = {:?}: {service} has instances #0 to #{}", fault.target, instances - 1))
                })?;
                Ok(FaultTarget::Instances { service: s, first: k, count: 1 })
            }
            None => {
                let count = fault.instances.unwrap_or(instances);
                if count == 0 || count > instances {
                    return Err(bad(format!("{path}.instances = {count}: {service} has {instances} instances")));
                }
                Ok(FaultTarget::Instances { service: s, first: 0, count })
            }
        }
    }

    fn finish(self) -> Topology {
        let mut params = GraphParams {
            services: self.service_params,
            endpoints: self.endpoint_params,
            steps: Vec::new(),
            call_sites: Vec::new(),
            alternatives: Vec::new(),
            edges: self.edge_params,
            workloads: Vec::new(),
            faults: self.faults,
            max_depth: self.max_depth,
            warmup: 0,
            horizon: 0,
            bucket: 1,
            recovery_hold: 0,
        };
        let mut site_names = Vec::new();
        for (e, (steps, alternatives)) in self.steps.into_iter().zip(self.alternatives).enumerate() {
            let (first_step, first_alternative) = (params.steps.len() as u32, params.alternatives.len() as u32);
            params.endpoints[e].first_step = first_step;
            params.endpoints[e].step_count = steps.len() as u32;
            params
                .alternatives
                .extend(alternatives.into_iter().map(|a| Alternative { start: a.start + first_step, ..a }));
            let mut seen: Vec<String> = Vec::new();
            for (mut step, sites) in steps {
                match &mut step {
                    Step::Calls { first_call, .. } => *first_call = params.call_sites.len() as u32,
                    Step::Branch { first_alternative: first, end, .. } => {
                        (*first, *end) = (*first + first_alternative, *end + first_step);
                    }
                    Step::Jump { to } => *to += first_step,
                    Step::Work(_) => {}
                }
                for (endpoint, edge, probability) in sites {
                    let pair = format!("{}->{}", self.endpoints[e], self.endpoints[endpoint as usize]);
                    let repeat = seen.iter().filter(|p| **p == pair).count();
                    site_names.push(if repeat == 0 { pair.clone() } else { format!("{pair}#{}", repeat + 1) });
                    seen.push(pair);
                    params.call_sites.push(CallSite {
                        endpoint,
                        edge: edge_index(&self.edge_names, &edge),
                        probability,
                    });
                }
                params.steps.push(step);
            }
        }
        for (mut workload, edge) in self.workloads {
            workload.edge = edge_index(&self.edge_names, &edge);
            params.workloads.push(workload);
        }
        Topology {
            params,
            services: self.services,
            endpoints: self.endpoints,
            edges: self.edge_names,
            entries: self.entries,
            sites: site_names,
        }
    }
}

/// `api.checkout->db.read` is one call site's edge; `api->db` is a service edge (a link).
pub(super) fn is_call_site_edge(name: &str) -> bool {
    name.split_once("->").is_some_and(|(caller, _)| caller.contains('.'))
}

/// The service edge a call-site edge crosses: `api.checkout->db.read` → `api->db`.
pub(super) fn link_of(name: &str) -> String {
    let service = |side: &str| side.split('.').next().unwrap_or(side).to_string();
    match name.split_once("->") {
        Some((caller, callee)) => format!("{}->{}", service(caller), service(callee)),
        None => name.to_string(),
    }
}

/// A call-site edge's endpoints as the report labels them: `checkout → read`.
pub(super) fn call_site_label(name: &str) -> Option<String> {
    let (caller, callee) = name.split_once("->").filter(|_| is_call_site_edge(name))?;
    let endpoint = |side: &str| side.split_once('.').map_or(side, |(_, e)| e).to_string();
    Some(format!("{} → {}", endpoint(caller), endpoint(callee)))
}

/// The index of edge `name` among the built edges.
fn edge_index(edges: &[String], name: &str) -> u32 {
    edges.iter().position(|e| e == name).expect("every used edge is built") as u32
}

fn limiter(path: &str, l: &super::schema::LimiterConfig) -> Result<LimiterKind> {
    at_least_one(&format!("{path}.initial"), l.initial)?;
    let initial = l.initial as f64;
    let (min, max) = (l.min.map(f64::from), l.max.map(f64::from));
    if l.kind == LimiterName::Fixed && (min.is_some() || max.is_some()) {
        return Err(bad(format!("{path}: a fixed limit has no min or max (initial is the limit)")));
    }
    if let (Some(min), Some(max)) = (min, max) {
        if !(min <= initial && initial <= max) {
            return Err(bad(format!("{path}: needs min ≤ initial ≤ max (here {min}, {initial}, {max})")));
        }
    }
    Ok(match l.kind {
        LimiterName::Fixed => LimiterKind::Fixed { limit: l.initial },
        LimiterName::Aimd => {
            let d = AimdConfig::default();
            LimiterKind::Aimd(AimdConfig {
                initial,
                min: min.unwrap_or(d.min.min(initial)),
                max: max.unwrap_or(d.max.max(initial)),
                ..d
            })
        }
        LimiterName::Vegas => {
            let d = VegasConfig::default();
            LimiterKind::Vegas(VegasConfig { initial, max: max.unwrap_or(d.max.max(initial)), ..d })
        }
        LimiterName::Gradient => {
            let d = GradientConfig::default();
            LimiterKind::Gradient(GradientConfig {
                initial,
                min: min.unwrap_or(d.min.min(initial)),
                max: max.unwrap_or(d.max.max(initial)),
                ..d
            })
        }
        LimiterName::Gradient2 => {
            let d = Gradient2Config::default();
            LimiterKind::Gradient2(Gradient2Config {
                initial,
                min: min.unwrap_or(d.min.min(initial)),
                max: max.unwrap_or(d.max.max(initial)),
                ..d
            })
        }
    })
}

/// Samples an adaptive timeout reads its quantile from (the hedge's default too).
const TIMEOUT_MIN_SAMPLES: u32 = 20;

/// `timeout_s = "p99"` (`"p99.9"`, `"p95 * 2"`) with its floor and ceiling, checked;
/// `None` for a fixed timeout or none.
fn timeout_of(path: &str, e: &EdgeConfig) -> Result<Option<AdaptiveTimeoutConfig>> {
    let bounds_alone = e.timeout_min_s.is_some() || e.timeout_max_s.is_some();
    let Some(TimeoutValue::Quantile(text)) = &e.timeout_s else {
        if bounds_alone {
            return Err(bad(format!(
                "{path}: timeout_min_s and timeout_max_s bound an adaptive timeout (timeout_s = \"p99\"); a fixed one needs neither"
            )));
        }
        return Ok(None);
    };
    let refuse = || {
        bad(format!(
            "{path}.timeout_s = {text:?}: seconds, or a running quantile of the callee's latency such as \"p99\", \"p99.9\" \
             or \"p95 * 2\""
        ))
    };
    let (quantile, multiple) = match text.split_once('*') {
        Some((q, m)) => (q.trim(), m.trim().parse::<f64>().map_err(|_| refuse())?),
        None => (text.trim(), 1.0),
    };
    let q = quantile
        .strip_prefix('p')
        .and_then(|digits| digits.parse::<f64>().ok())
        .map(|percent| percent / 100.0)
        .filter(|q| *q > 0.0 && *q < 1.0)
        .ok_or_else(refuse)?;
    if !(multiple > 0.0 && multiple.is_finite()) {
        return Err(refuse());
    }
    let Some(ceiling) = e.timeout_max_s else {
        return Err(bad(format!(
            "{path}.timeout_s = {text:?}: give timeout_max_s too — the timeout until {TIMEOUT_MIN_SAMPLES} answers are seen, \
             and the most it may become"
        )));
    };
    let floor = e.timeout_min_s.unwrap_or(0.001);
    positive(&format!("{path}.timeout_min_s"), floor, "a positive number of seconds")?;
    if !(ceiling >= floor && ceiling.is_finite()) {
        return Err(bad(format!("{path}.timeout_max_s = {ceiling}: must be at least timeout_min_s ({floor})")));
    }
    Ok(Some(AdaptiveTimeoutConfig {
        quantile: q,
        multiple,
        floor: secs_to_nanos(floor),
        ceiling: secs_to_nanos(ceiling),
        min_samples: TIMEOUT_MIN_SAMPLES,
    }))
}

fn edge(path: &str, e: &EdgeConfig, from: Option<u32>, to: u32, callee_instances: u32) -> Result<EdgeParams> {
    let network = e.network.as_ref().map(|n| n.resolve(&format!("{path}.network"))).transpose()?;
    let adaptive_timeout = timeout_of(path, e)?;
    let fixed_timeout = e.timeout_s.as_ref().and_then(TimeoutValue::seconds);
    if let Some(t) = fixed_timeout {
        positive(&format!("{path}.timeout_s"), t, "a positive number of seconds")?;
    }
    let r = &e.retry;
    check_retry(&format!("{path}.retry"), r)?;
    let retry_on = failures(&format!("{path}.retry.on"), &r.on, &[Failure::Timeout, Failure::Refused, Failure::Error])?;
    e.breaker.validate(&format!("{path}.breaker"))?;
    let hedge = e.hedge.as_ref().map(|h| hedge(&format!("{path}.hedge"), h, path, fixed_timeout)).transpose()?;
    let balance = balance(path, e, callee_instances)?;
    let fallback_on = match &e.fallback {
        None => FailureSet::NONE,
        Some(f) => failures(&format!("{path}.fallback.on"), &f.on, &Failure::ALL)?,
    };
    let outlier = e.outlier.as_ref().map(|o| outlier_config(&format!("{path}.outlier"), o)).transpose()?;
    let pool = e.pool.as_ref().map(|p| pool_config(&format!("{path}.pool"), p)).transpose()?;
    Ok(EdgeParams {
        from,
        to,
        network,
        timeout: fixed_timeout.map(secs_to_nanos),
        adaptive_timeout,
        propagate_deadline: e.deadline == DeadlineName::Propagate,
        max_attempts: r.max_attempts,
        backoff: r.backoff.with(secs_to_nanos(r.backoff_base_s), secs_to_nanos(r.backoff_cap_s)),
        retry_on,
        budget: retry_budget(r.budget, r.budget_ratio, r.budget_cap, r.budget_initial, r.budget_window_s),
        breaker: e.breaker.config(),
        hedge,
        hedge_uses_budget: e.hedge.as_ref().is_some_and(|h| h.uses_budget),
        balance,
        outlier,
        pool,
        fallback_on,
    })
}

/// An edge's retry section: attempts from 1 to 100, 0 ≤ backoff base ≤ cap, a valid budget.
fn check_retry(path: &str, r: &super::schema::EdgeRetryConfig) -> Result<()> {
    at_least_one(&format!("{path}.max_attempts"), r.max_attempts)?;
    if r.max_attempts > 100 {
        return Err(bad(format!("{path}.max_attempts = {}: at most 100", r.max_attempts)));
    }
    if r.backoff_base_s.is_nan()
        || r.backoff_base_s < 0.0
        || r.backoff_cap_s.is_nan()
        || r.backoff_cap_s < r.backoff_base_s
    {
        return Err(bad(format!(
            "{path}: backoff_base_s = {} and backoff_cap_s = {} must satisfy 0 ≤ base ≤ cap",
            r.backoff_base_s, r.backoff_cap_s
        )));
    }
    validate_budget(path, r.budget, r.budget_ratio, r.budget_cap, r.budget_window_s)
}

/// An edge's hedge (`path`): a fixed delay before the edge's fixed timeout (`edge`
/// names the edge in the error), or a running quantile such as "p95".
fn hedge(path: &str, h: &super::schema::HedgeConfig, edge: &str, fixed_timeout: Option<f64>) -> Result<HedgeConfig> {
    let delay = match (h.after_s, h.after.as_deref()) {
        (Some(after), None) => {
            positive(&format!("{path}.after_s"), after, "a positive number of seconds")?;
            if let Some(timeout) = fixed_timeout.filter(|&t| after >= t) {
                return Err(bad(format!(
                    "{path}.after_s = {after}: not before the timeout ({edge}.timeout_s = {timeout}), so no hedge would ever be sent"
                )));
            }
            HedgeDelay::Fixed(secs_to_nanos(after))
        }
        (None, Some(after)) => {
            let q = after
                .strip_prefix('p')
                .filter(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
                .map(|d| format!("0.{d}").parse::<f64>().unwrap_or(f64::NAN))
                .filter(|q| *q > 0.0 && *q < 1.0)
                .ok_or_else(|| bad(format!("{path}.after = {after:?}: a quantile such as \"p95\" or \"p999\"")))?;
            HedgeDelay::Quantile(q)
        }
        _ => {
            return Err(bad(format!(
                "{path}: give after_s (a fixed delay) or after = \"p95\" (a running quantile), one of them"
            )))
        }
    };
    at_least_one(&format!("{path}.max"), h.max)?;
    Ok(HedgeConfig { delay, max_hedges: h.max, min_samples: h.min_samples })
}

/// An edge's balancer over its callee's `callee_instances`; consistent hashing checks
/// its points per instance and its bounded-load factor.
fn balance(path: &str, e: &EdgeConfig, callee_instances: u32) -> Result<Balance> {
    Ok(match e.balance {
        BalanceName::RoundRobin => Balance::RoundRobin,
        BalanceName::Random => Balance::Random,
        BalanceName::LeastOutstanding => Balance::LeastOutstanding,
        BalanceName::PowerOfTwoChoices => Balance::PowerOfTwoChoices,
        BalanceName::ConsistentHash => {
            at_least_one(&format!("{path}.hash_vnodes"), e.hash_vnodes)?;
            if e.hash_vnodes as u64 * callee_instances as u64 > 1_000_000 {
                return Err(bad(format!(
                    "{path}.hash_vnodes = {}: instances × vnodes must stay below 1000000",
                    e.hash_vnodes
                )));
            }
            if e.hash_capacity_factor.is_nan() || e.hash_capacity_factor < 1.0 {
                return Err(bad(format!(
                    "{path}.hash_capacity_factor = {}: must be at least 1 (inf = plain consistent hashing)",
                    e.hash_capacity_factor
                )));
            }
            Balance::ConsistentHash { vnodes: e.hash_vnodes, capacity_factor: e.hash_capacity_factor }
        }
    })
}

/// An endpoint's cache, checked field by field: it needs an origin to miss to.
fn cache(path: &str, c: &CacheSection, endpoint: &EndpointConfig) -> Result<CacheParams> {
    at_least_one(&format!("{path}.capacity"), c.capacity)?;
    if let Some(ttl) = c.ttl_s {
        positive(&format!("{path}.ttl_s"), ttl, "a positive number of seconds (leave it out: entries never expire)")?;
    }
    let calls = |s: &StepConfig| {
        s.call.is_some()
            || s.parallel.as_ref().is_some_and(|p| !p.is_empty())
            || s.one_of.as_ref().is_some_and(|p| !p.is_empty())
    };
    if !super::schema::every_step(&endpoint.steps, path).iter().any(|(_, step)| calls(step)) {
        return Err(bad(format!(
            "{path}: a cache needs an origin — a miss runs the endpoint's steps, and they call nothing; add a step \
             such as {{ call = \"db.get\" }}"
        )));
    }
    Ok(CacheParams {
        capacity: c.capacity,
        ttl: c.ttl_s.map_or(Nanos::MAX, secs_to_nanos),
        coalesce: c.coalesce,
        serve_stale: c.serve_stale,
    })
}

/// A service's autoscaler, checked field by field; `instances` is the service's count
/// at the start.
fn autoscale(path: &str, a: &AutoscaleSection, instances: u32) -> Result<Autoscale> {
    positive(&format!("{path}.target"), a.target, "a positive value of the metric per instance")?;
    let fraction = matches!(a.metric, ScaleMetricName::Cpu | ScaleMetricName::Occupancy | ScaleMetricName::Utilisation);
    if fraction && a.target > 1.0 {
        return Err(bad(format!("{path}.target = {}: a utilisation, above 0 and at most 1", a.target)));
    }
    at_least_one(&format!("{path}.min"), a.min)?;
    if a.max < a.min {
        return Err(bad(format!("{path}.max = {}: at least min ({})", a.max, a.min)));
    }
    if a.max > 10_000 {
        return Err(bad(format!("{path}.max = {}: at most 10000 instances", a.max)));
    }
    if !(a.min..=a.max).contains(&instances) {
        return Err(bad(format!(
            "{path}: the service's instances = {instances} (the count at the start) must be within min = {} and max = {}",
            a.min, a.max
        )));
    }
    positive(&format!("{path}.sync_period_s"), a.sync_period_s, "a positive number of seconds")?;
    if !(0.0..1.0).contains(&a.tolerance) {
        return Err(bad(format!("{path}.tolerance = {}: a fraction, 0 or more and below 1", a.tolerance)));
    }
    for (field, value) in [
        ("scale_down_stabilization_s", a.scale_down_stabilization_s),
        ("scale_up_stabilization_s", a.scale_up_stabilization_s),
        ("cold_start_s", a.cold_start_s),
    ] {
        if !(value.is_finite() && value >= 0.0) {
            return Err(bad(format!("{path}.{field} = {value}: a number of seconds, 0 or more")));
        }
    }
    if !(a.cold_start_factor.is_finite() && a.cold_start_factor >= 1.0) {
        return Err(bad(format!(
            "{path}.cold_start_factor = {}: 1 or more (work is slower, not faster)",
            a.cold_start_factor
        )));
    }
    let provisioning = a.provisioning.resolve(&format!("{path}.provisioning"))?;
    Ok(Autoscale {
        config: AutoscaleConfig {
            target: a.target,
            min: a.min,
            max: a.max,
            sync_period: secs_to_nanos(a.sync_period_s),
            tolerance: a.tolerance,
            scale_down_window: secs_to_nanos(a.scale_down_stabilization_s),
            scale_up_window: secs_to_nanos(a.scale_up_stabilization_s),
        },
        metric: match a.metric {
            ScaleMetricName::Cpu => ScaleMetric::Cpu,
            ScaleMetricName::Occupancy | ScaleMetricName::Utilisation => ScaleMetric::Utilisation,
            ScaleMetricName::Rps => ScaleMetric::Rps,
            ScaleMetricName::InFlight => ScaleMetric::InFlight,
            ScaleMetricName::QueueDepth => ScaleMetric::QueueDepth,
        },
        initial: instances,
        provisioning,
        cold_start: secs_to_nanos(a.cold_start_s),
        cold_start_factor: a.cold_start_factor,
    })
}

/// A service's health checks, checked field by field.
fn health_check(path: &str, h: &HealthCheckSection) -> Result<HealthCheckConfig> {
    positive(&format!("{path}.interval_s"), h.interval_s, "a positive number of seconds")?;
    positive(&format!("{path}.timeout_s"), h.timeout_s, "a positive number of seconds")?;
    at_least_one(&format!("{path}.unhealthy_threshold"), h.unhealthy_threshold)?;
    at_least_one(&format!("{path}.healthy_threshold"), h.healthy_threshold)?;
    if !(h.work_s.is_finite() && h.work_s >= 0.0) {
        return Err(bad(format!("{path}.work_s = {}: a number of seconds, 0 or more", h.work_s)));
    }
    if !(0.0..=100.0).contains(&h.panic_threshold_percent) {
        return Err(bad(format!(
            "{path}.panic_threshold_percent = {}: a percentage, 0 to 100",
            h.panic_threshold_percent
        )));
    }
    Ok(HealthCheckConfig {
        interval: secs_to_nanos(h.interval_s),
        timeout: secs_to_nanos(h.timeout_s),
        unhealthy_threshold: h.unhealthy_threshold,
        healthy_threshold: h.healthy_threshold,
        panic_threshold_percent: h.panic_threshold_percent,
    })
}

/// An edge's connection pool, checked field by field.
fn pool_config(path: &str, p: &PoolSection) -> Result<PoolConfig> {
    at_least_one(&format!("{path}.size"), p.size)?;
    positive(&format!("{path}.wait_timeout_s"), p.wait_timeout_s, "a positive number of seconds")?;
    Ok(PoolConfig { size: p.size, max_pending: p.max_pending, wait_timeout: secs_to_nanos(p.wait_timeout_s) })
}

/// An edge's outlier detection, checked field by field.
fn outlier_config(path: &str, o: &OutlierSection) -> Result<OutlierConfig> {
    at_least_one(&format!("{path}.consecutive_5xx"), o.consecutive_5xx)?;
    positive(&format!("{path}.base_ejection_s"), o.base_ejection_s, "a positive number of seconds")?;
    if o.max_ejection_s.is_nan() || o.max_ejection_s < o.base_ejection_s {
        return Err(bad(format!(
            "{path}.max_ejection_s = {}: at least base_ejection_s ({})",
            o.max_ejection_s, o.base_ejection_s
        )));
    }
    if !(0.0..=100.0).contains(&o.max_ejection_percent) {
        return Err(bad(format!("{path}.max_ejection_percent = {}: a percentage, 0 to 100", o.max_ejection_percent)));
    }
    Ok(OutlierConfig {
        consecutive_failures: o.consecutive_5xx,
        base_ejection: secs_to_nanos(o.base_ejection_s),
        max_ejection: secs_to_nanos(o.max_ejection_s),
        max_ejection_percent: o.max_ejection_percent,
    })
}

/// How deep `one_of` alternatives with steps of their own may nest: deeper is a model
/// no one reads (and the builder walks it by recursion).
const MAX_ALTERNATIVE_DEPTH: u32 = 8;

/// Refuses a call cycle unless `max_depth` bounds it; the depth bound to use.
fn check_cycles(b: &Builder, max_depth: Option<u32>) -> Result<u32> {
    let callees =
        |e: usize| -> BTreeSet<u32> { b.steps[e].iter().flat_map(|(_, sites)| sites.iter().map(|s| s.0)).collect() };
    // Depth-first search with colours; a grey node reached again closes a cycle. An
    // explicit stack, not recursion: a chain of 50,000 services is 50,000 deep.
    let n = b.endpoints.len();
    let mut colour = vec![0u8; n];
    let visit = |root: usize, colour: &mut [u8]| -> Option<Vec<usize>> {
        // (endpoint, its callees, the next one to look at); the path is the stack's endpoints.
        let mut stack: Vec<(usize, Vec<u32>, usize)> = vec![(root, callees(root).into_iter().collect(), 0)];
        colour[root] = 1;
        while let Some((e, next_callees, next)) = stack.last_mut() {
            let Some(&c) = next_callees.get(*next) else {
                colour[*e] = 2;
                stack.pop();
                continue;
            };
            *next += 1;
            let c = c as usize;
            if colour[c] == 1 {
                let from = stack.iter().position(|(x, _, _)| *x == c).expect("grey is on the stack");
                let mut cycle: Vec<usize> = stack[from..].iter().map(|(x, _, _)| *x).collect();
                cycle.push(c);
                return Some(cycle);
            }
            if colour[c] == 0 {
                colour[c] = 1;
                stack.push((c, callees(c).into_iter().collect(), 0));
            }
        }
        None
    };
    for e in 0..n {
        if colour[e] == 0 {
            if let Some(cycle) = visit(e, &mut colour) {
                let Some(depth) = max_depth else {
                    let names: Vec<&str> = cycle.iter().map(|&i| b.endpoints[i].as_str()).collect();
                    return Err(bad(format!("services: the calls form a cycle, {}", names.join(" -> ")))
                        .with_hint("a cycle is allowed with a bound on how deep calls nest: [graph] max_depth = 10"));
                };
                at_least_one("graph.max_depth", depth)?;
                return Ok(depth);
            }
        }
    }
    if let Some(depth) = max_depth {
        at_least_one("graph.max_depth", depth)?;
        return Ok(depth);
    }
    // Without a cycle no call is deeper than the number of endpoints.
    Ok(n as u32 + 1)
}

/// What fault `path` does, with each kind's own fields and no other's.
fn fault_kind(path: &str, fault: &FaultConfig, on_edge: bool) -> Result<FaultKind> {
    fault_target(path, fault.kind.as_str(), on_edge)?;
    let given =
        [("factor", fault.factor.is_some()), ("added_s", fault.added_s.is_some()), ("rate", fault.rate.is_some())];
    if let Some((_, refused)) = FAULT_REFUSES.iter().find(|(kind, _)| *kind == fault.kind) {
        if let Some((field, _)) = given.iter().find(|(field, set)| *set && refused.contains(field)) {
            return Err(bad(format!("{path}.{field}: kind = {:?} takes no {field}", fault.kind)));
        }
    }
    Ok(match fault.kind.as_str() {
        "slowdown" => {
            let factor = fault.factor.ok_or_else(|| {
                bad(format!("{path}.factor: missing; a slowdown multiplies work (or the network) by it"))
            })?;
            positive(&format!("{path}.factor"), factor, "a positive multiplier")?;
            FaultKind::Slowdown { factor }
        }
        "latency" => {
            let added = fault.added_s.ok_or_else(|| {
                bad(format!("{path}.added_s: missing; seconds added to each piece of work (on an edge, each way)"))
            })?;
            positive(&format!("{path}.added_s"), added, "a positive number of seconds")?;
            FaultKind::Latency { added: secs_to_nanos(added) }
        }
        "errors" => {
            let rate =
                fault.rate.ok_or_else(|| bad(format!("{path}.rate: missing; the share of answers that are errors")))?;
            FaultKind::Errors { rate: probability(&format!("{path}.rate"), Some(rate))? }
        }
        "crash" => FaultKind::Crash,
        "flush" => FaultKind::Flush,
        "partition" => {
            let fail_fast = match fault.mode.as_deref().unwrap_or("timeout") {
                "timeout" => false,
                "fail_fast" => true,
                other => return Err(bad(format!("{path}.mode = {other:?}: allowed: timeout, fail_fast"))),
            };
            FaultKind::Partition { fail_fast }
        }
        other => {
            return Err(bad(format!(
                "{path}.kind = {other:?}: allowed: slowdown, latency, errors, crash, flush, partition"
            )))
        }
    })
}

/// The numeric fields each fault kind does not take (a partition takes none of them
/// and is not listed: it reads only `mode`).
const FAULT_REFUSES: [(&str, &[&str]); 5] = [
    ("slowdown", &["added_s", "rate"]),
    ("latency", &["factor", "rate"]),
    ("errors", &["factor", "added_s"]),
    ("crash", &["factor"]),
    ("flush", &["factor", "added_s", "rate"]),
];

/// A fault of kind `kind` fits its target: instances crash and caches flush on a
/// service, a partition cuts an edge.
fn fault_target(path: &str, kind: &str, on_edge: bool) -> Result<()> {
    let wrong = match (kind, on_edge) {
        ("crash", true) => "instances crash; an edge is partitioned (kind = \"partition\")",
        ("flush", true) => "empties a service's caches; an edge has none",
        ("partition", false) => "partitions an edge (target = \"a->b\"); an instance crashes (kind = \"crash\")",
        _ => return Ok(()),
    };
    Err(bad(format!("{path}.kind = {kind:?}: {wrong}")))
}

/// A `one_of`'s checked probabilities, an equal share each where none is given: the
/// step takes none of its own, every alternative is a call or steps, and they sum to
/// at most 1.
fn one_of_probabilities(path: &str, step: &StepConfig, alternatives: &[AlternativeConfig]) -> Result<Vec<f64>> {
    if step.probability.is_some() || step.wait.is_some() || step.quorum.is_some() {
        return Err(bad(format!(
            "{path}: one_of takes no probability, wait or quorum of its own: give each alternative its probability"
        )));
    }
    if alternatives.is_empty() {
        return Err(bad(format!("{path}.one_of = []: give at least one alternative")));
    }
    let given = alternatives.iter().filter(|a| a.probability.is_some()).count();
    if given != 0 && given != alternatives.len() {
        return Err(bad(format!("{path}.one_of: give every alternative a probability, or none (an equal share each)")));
    }
    let share = 1.0 / alternatives.len() as f64;
    let mut probabilities = Vec::with_capacity(alternatives.len());
    for (i, alternative) in alternatives.iter().enumerate() {
        let at = format!("{path}.one_of[{i}]");
        if alternative.call.is_some() == alternative.steps.is_some() {
            return Err(bad(format!(
                "{at}: an alternative is one of call = \"service.endpoint\" or steps = [...] (its own steps)"
            )));
        }
        probabilities.push(probability(&format!("{at}.probability"), alternative.probability.or(Some(share)))?);
    }
    let sum: f64 = probabilities.iter().sum();
    if sum > 1.0 + 1e-9 {
        return Err(bad(format!(
            "{path}.one_of: the probabilities sum to {sum}: exactly one alternative happens, so they sum to at most 1"
        )));
    }
    Ok(probabilities)
}

/// A workload's arrivals: a closed loop of `users`, or an open process (Poisson or
/// even at `rate_per_s`, or its `[load]`).
fn workload_arrivals(path: &str, workload: &WorkloadConfig) -> Result<WorkloadArrivals> {
    Ok(match (workload.users, &workload.arrivals) {
        (Some(users), arrivals) => {
            at_least_one(&format!("{path}.users"), users)?;
            if arrivals.is_some() || workload.rate_per_s.is_some() || workload.load.is_some() {
                return Err(bad(format!(
                    "{path}.users: a closed-loop workload sets no arrivals, rate_per_s or load (users arrive as they finish)"
                )));
            }
            positive(&format!("{path}.think_time_s"), workload.think_time_s, "a positive number of seconds")?;
            WorkloadArrivals::Closed { users, think: secs_to_nanos(workload.think_time_s) }
        }
        (None, arrivals) => {
            let rate_path = format!("{path}.rate_per_s");
            if let Some(rate) = workload.rate_per_s {
                crate::base::checks::positive_rate(&rate_path, rate)?;
            }
            let process = crate::inputs::load::entry_arrivals(
                workload.load.as_ref(),
                workload.rate_per_s,
                &rate_path,
                None,
                Some(crate::inputs::load::Pick { field: "endpoint_column", value: &workload.entry }),
            )
            .map_err(|e| e.context(path))?;
            let rate = workload.rate_per_s.unwrap_or(f64::NAN);
            let process = match (arrivals.as_deref(), process) {
                (Some(_), Some(_)) => {
                    return Err(bad(format!("{path}.arrivals: with [workload.load], give the arrivals there (load.arrivals)")))
                }
                (None, Some(process)) => process,
                (None | Some("poisson"), None) => ArrivalProcess::Poisson(RateProfile::constant(rate)),
                (Some("even"), None) => ArrivalProcess::Even(RateProfile::constant(rate)),
                (Some(other), None) => {
                    return Err(bad(format!("{path}.arrivals = {other:?}: allowed: poisson, even (or a [load] section for schedules and traces)")))
                }
            };
            WorkloadArrivals::Open(process)
        }
    })
}

/// A workload's shares of critical, normal and low requests (all normal when not
/// given); the shares add up to 1.
fn criticality_mix(path: &str, mix: Option<&BTreeMap<String, f64>>) -> Result<[f64; 4]> {
    let mut criticality = [0.0, 0.0, 1.0, 0.0];
    if let Some(mix) = mix {
        criticality = [0.0; 4];
        for (name, share) in mix {
            let level = match name.as_str() {
                "critical" => 0,
                "normal" => 2,
                "low" => 3,
                other => {
                    return Err(bad(format!("{path}.criticality.{other}: not a level; allowed: critical, normal, low")))
                }
            };
            criticality[level] = probability(&format!("{path}.criticality.{name}"), Some(*share))?;
        }
        let total: f64 = criticality.iter().sum();
        if (total - 1.0).abs() > 1e-9 {
            return Err(bad(format!("{path}.criticality: the shares add up to {total}, not 1")));
        }
    }
    Ok(criticality)
}

/// A service's queue order: FIFO, LIFO, or CoDel with its positive target and interval.
fn queue_discipline(path: &str, queue: &QueueConfig) -> Result<QueueDiscipline> {
    Ok(match queue.order {
        QueueOrderName::Fifo => QueueDiscipline::Fifo,
        QueueOrderName::Lifo => QueueDiscipline::Lifo,
        QueueOrderName::Codel => {
            positive(&format!("{path}.queue.codel_target_s"), queue.codel_target_s, "a positive number of seconds")?;
            positive(
                &format!("{path}.queue.codel_interval_s"),
                queue.codel_interval_s,
                "a positive number of seconds",
            )?;
            QueueDiscipline::CoDel(CoDelConfig {
                target: secs_to_nanos(queue.codel_target_s),
                interval: secs_to_nanos(queue.codel_interval_s).max(1),
            })
        }
    })
}

/// A service's priority shedder, when enabled: its marks, 0 < low ≤ normal ≤ 1.
fn shed_marks(path: &str, s: &ServiceConfig) -> Result<Option<ShedMarks>> {
    Ok(match s.shedder.as_ref().filter(|shedder| shedder.enabled) {
        None => None,
        Some(shedder) => {
            let (low, normal) = (shedder.shed_low_at, shedder.shed_normal_at);
            if !(low > 0.0 && low <= normal && normal <= 1.0) {
                return Err(bad(format!(
                    "{path}.shedder: shed_low_at = {low} and shed_normal_at = {normal} must satisfy 0 < shed_low_at ≤ shed_normal_at ≤ 1"
                )));
            }
            Some(ShedMarks([1.0, 1.0, normal, low]))
        }
    })
}

/// A service's token-bucket rate limit: a positive rate and a burst of at least one.
fn rate_limit(path: &str, s: &ServiceConfig) -> Result<Option<(f64, u64)>> {
    Ok(match &s.rate_limit {
        None => None,
        Some(r) => {
            positive(&format!("{path}.rate_limit.per_s"), r.per_s, "a positive rate per second")?;
            if r.burst == 0 {
                return Err(bad(format!("{path}.rate_limit.burst = 0: must be at least 1")));
            }
            Some((r.per_s, r.burst))
        }
    })
}

/// A call step's calls as (call, probability, field path): the one `call`, or each of
/// `parallel`'s, with what each kind may not take refused.
fn step_calls(path: &str, step: &StepConfig) -> Result<Vec<(String, Option<f64>, String)>> {
    Ok(match (&step.call, &step.parallel) {
        (Some(call), None) => {
            if step.wait.as_deref().is_some_and(|w| w != "none") || step.quorum.is_some() {
                return Err(bad(format!(
                    "{path}: a single call takes wait = \"none\" (fire-and-forget) or no wait; all, first and \
                     quorum belong to a parallel group"
                )));
            }
            vec![(call.clone(), step.probability, format!("{path}.call"))]
        }
        (None, Some(parallel)) => {
            if step.probability.is_some() {
                return Err(bad(format!("{path}.probability: give each call in the group its own probability")));
            }
            if parallel.is_empty() {
                return Err(bad(format!("{path}.parallel = []: a group needs at least one call")));
            }
            parallel
                .iter()
                .enumerate()
                .map(|(i, c)| (c.call.clone(), c.probability, format!("{path}.parallel[{i}].call")))
                .collect()
        }
        _ => unreachable!("one kind"),
    })
}

/// What a call step waits for (`wait`, with `quorum` for a quorum) among its `calls`.
fn step_wait(path: &str, step: &StepConfig, calls: usize) -> Result<Wait> {
    Ok(match (step.wait.as_deref().unwrap_or("all"), step.quorum) {
        ("all", None) => Wait::All,
        ("first", None) => Wait::FirstSuccess,
        ("none", None) => Wait::Detached,
        ("quorum", Some(k)) => {
            if k == 0 || k as usize > calls {
                return Err(bad(format!("{path}.quorum = {k}: must be from 1 to the group's {calls} calls")));
            }
            Wait::Quorum(k)
        }
        ("quorum", None) => return Err(bad(format!("{path}.quorum: missing; wait = \"quorum\" needs quorum = k"))),
        (other @ ("all" | "first" | "none"), Some(_)) => {
            return Err(bad(format!("{path}.quorum: only with wait = \"quorum\" (here wait = {other:?})")))
        }
        (other, _) => {
            return Err(bad(format!("{path}.wait = {other:?}: allowed: all, first, quorum, none")));
        }
    })
}
