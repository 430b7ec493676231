//! The graph model's struct: construction (its parts built in `setup.rs`), event
//! dispatch, time integrals, faults and the end of a run. What happens to a call is
//! in `client.rs`, to a job in `server.rs`.

use crate::kernel::histogram::LatencyHistogram;
use crate::kernel::rng::RngStream;
use crate::kernel::sim::{Model, Scheduler, Simulation};
use crate::kernel::slab::{Slab, SlabKey};
use crate::kernel::time::{Nanos, NANOS_PER_SEC};
use crate::measurement::level_series::LevelSeries;
use crate::measurement::request_latencies::{EndingSlots, RequestLatencies};
use crate::policy::pool::ConnectionPool;

use super::entities::{EdgeState, Instance, Lifecycle, ServiceState, WorkloadState};
use super::params::{FaultKind, FaultTarget, GraphParams, WorkloadArrivals};
use super::results::{EntryResults, GraphResults, GraphSeries};
use super::setup::{self, Streams, BRANCHES, MIX};
use super::state::{Attempt, Call, Event, Job, OutEdges, PoolWaiter};

/// The seconds of `[from, until)` inside the measured window `[warmup, horizon)`
/// (an ejection, an instance marked unhealthy).
pub(super) fn measured_s(from: Nanos, until: Nanos, warmup: Nanos, horizon: Nanos) -> f64 {
    let (from, until) = (from.max(warmup), until.min(horizon));
    until.saturating_sub(from) as f64 / NANOS_PER_SEC as f64
}

/// The model.
pub struct Graph<'h> {
    pub(super) p: GraphParams,
    pub(super) instances: Vec<Instance>,
    pub(super) services: Vec<ServiceState>,
    pub(super) edges: Vec<EdgeState>,
    pub(super) workloads: Vec<WorkloadState>,
    /// One stream per call site: whether an optional call is made.
    pub(super) site_rng: Vec<RngStream>,
    /// Each branch's draw of its alternative, by the branch's first alternative.
    pub(super) branch_rng: Vec<RngStream>,
    /// Per call site, the outcomes of the calls it made.
    pub(super) sites: Vec<EntryResults>,
    pub(super) calls: Slab<Call>,
    pub(super) attempts: Slab<Attempt>,
    pub(super) jobs: Slab<Job>,
    /// Every edge's connection pools, one per caller instance.
    pub(super) pools: Vec<ConnectionPool<PoolWaiter>>,
    /// Each pool's edge.
    pub(super) pool_edges: Vec<u32>,
    /// Every cache endpoint's caches, one per instance of its service.
    pub(super) caches: Vec<super::state::CacheState>,
    /// Per endpoint, its first cache (`u32::MAX`: none).
    pub(super) first_cache: Vec<u32>,
    /// Per endpoint, its cache's counters.
    pub(super) cache_results: Vec<super::results::CacheResults>,
    /// By job slot, the next job waiting on the same cache fetch (single flight).
    pub(super) next_waiter: Vec<Option<SlabKey>>,
    pub(super) series: GraphSeries,
    /// Entry requests' latencies by ending: per workload `[ok, degraded, failed, all]`,
    /// or `[ok]` alone (see [`Graph::new`]).
    pub(super) latencies: &'h mut [LatencyHistogram],
    /// Per workload, where its entry requests' latencies go (and over time, when on).
    pub(super) entry_latencies: Vec<RequestLatencies>,
    /// Per-span tracing, off unless [`Graph::traced`].
    pub(super) tracer: Option<Box<super::trace::SpanTracer>>,
    /// Per service, the edges it calls along (for the causal walk).
    pub(super) out_edges: OutEdges,
}

impl<'h> Graph<'h> {
    /// A replica. `latencies` holds per workload four histograms — requests answered in
    /// full, degraded (a fallback answered), failed (the time until the client learned
    /// it), and all of them — or one (answered in full).
    pub fn new(mut p: GraphParams, master_seed: u64, replica: u64, latencies: &'h mut [LatencyHistogram]) -> Self {
        let split_endings = latencies.len() == 4 * p.workloads.len();
        assert!(split_endings || latencies.len() == p.workloads.len(), "one or four histograms per workload");
        assert!(p.bucket > 0 && !p.workloads.is_empty());
        let streams = Streams { master_seed, replica };
        let probe_endpoints = setup::add_probe_endpoints(&mut p);
        let buckets = p.horizon.div_ceil(p.bucket) as usize;
        let (services, instances) = setup::services(&p, &streams, &probe_endpoints, buckets);
        let (edges, pools, pool_edges) = setup::edges(&p, &streams, buckets);
        let (caches, first_cache) = setup::caches(&p);
        let mut graph = Graph {
            site_rng: (0..p.call_sites.len()).map(|c| streams.stream(MIX, 1_000_000 + c)).collect(),
            // One per branch, at its first alternative's index (the others' are unused).
            branch_rng: (0..p.alternatives.len()).map(|a| streams.stream(BRANCHES, a)).collect(),
            sites: vec![EntryResults::default(); p.call_sites.len()],
            instances,
            services,
            edges,
            workloads: setup::workloads(&p, &streams),
            calls: Slab::with_capacity(1024),
            attempts: Slab::with_capacity(1024),
            jobs: Slab::with_capacity(1024),
            pools,
            pool_edges,
            caches,
            first_cache,
            cache_results: vec![Default::default(); p.endpoints.len()],
            next_waiter: Vec::new(),
            series: setup::series(&p, buckets),
            entry_latencies: (0..p.workloads.len())
                .map(|w| match split_endings {
                    true => RequestLatencies::new(EndingSlots::split(4 * w, true)),
                    false => RequestLatencies::new(EndingSlots::ok_only(w)),
                })
                .collect(),
            latencies,
            tracer: None,
            out_edges: OutEdges::new(p.services.len(), p.edges.iter().map(|e| e.from)),
            p,
        };
        // An autoscaled service's instances that are not running are off its rings.
        for i in 0..graph.instances.len() {
            if graph.instances[i].lifecycle != Lifecycle::Serving {
                graph.sync_rings(i);
            }
        }
        graph
    }

    /// Records every call, attempt, backoff, queue wait and refusal with its span and
    /// parent span (see `trace.rs`); `names` label the rows.
    /// Keeps each entry point's latencies over time too, in windows of `window` ns.
    pub fn with_latency_windows(mut self, window: Nanos) -> Self {
        let horizon = self.p.horizon;
        self.entry_latencies.iter_mut().for_each(|latencies| latencies.keep_windows(window, horizon));
        self
    }

    /// Records a trace of every call, attempt and job as spans (see
    /// [`crate::measurement::trace`]), named by `names`.
    pub fn traced(mut self, names: super::trace::TraceNames) -> Self {
        self.tracer = Some(Box::new(super::trace::SpanTracer::new(names)));
        self
    }

    /// Runs to the horizon: the results, the series and (if traced) the trace.
    pub fn run_traced(self) -> (GraphResults, GraphSeries, Option<crate::measurement::trace::Trace>) {
        let horizon = self.p.horizon;
        let mut simulation = self.into_simulation();
        simulation.run_until(horizon);
        let events = simulation.events_handled();
        let (results, series) = simulation.model.finish(horizon, events);
        let trace = simulation.model.tracer.take().map(|t| t.finish(horizon));
        (results, series, trace)
    }

    /// Runs to the horizon: the results and the series.
    pub fn run(self) -> (GraphResults, GraphSeries) {
        let (results, series, _) = self.run_traced();
        (results, series)
    }

    /// The replica as a simulation with its first events scheduled (to run in stretches:
    /// the allocation-free proof, benchmarks); end it with [`Graph::finish`].
    pub fn into_simulation(self) -> Simulation<Self> {
        let mut simulation = Simulation::new(self, 4096);
        for (at, event) in simulation.model.first_events() {
            simulation.scheduler().at(at, event);
        }
        simulation
    }

    /// The first arrivals and every fault's transitions.
    fn first_events(&mut self) -> Vec<(Nanos, Event)> {
        let mut events = Vec::new();
        for w in 0..self.p.workloads.len() {
            match self.p.workloads[w].arrivals {
                WorkloadArrivals::Open(_) => {
                    if let Some(gap) = self.next_gap(w, 0) {
                        events.push((gap, Event::Arrival { workload: w as u32 }));
                    }
                }
                WorkloadArrivals::Closed { users, think } => {
                    for _ in 0..users {
                        let gap = self.think_time(w, think);
                        events.push((gap, Event::Arrival { workload: w as u32 }));
                    }
                }
            }
        }
        for (s, service) in self.services.iter().enumerate() {
            if let Some(scaler) = &service.scaler {
                events.push((scaler.autoscaler.config().sync_period, Event::AutoscaleSync { service: s as u32 }));
            }
            if let Some(health) = &service.health {
                let count = self.p.services[s].instances;
                for k in 0..count {
                    let at = crate::policy::health::first_probe(&health.config(), k, count);
                    events.push((at, Event::ProbeDue { instance: service.first_instance + k }));
                }
            }
        }
        for (index, fault) in self.p.faults.iter().enumerate() {
            if fault.start < self.p.horizon {
                events.push((fault.start, Event::FaultStarts { fault: index as u32 }));
                events.push((fault.start.saturating_add(fault.duration), Event::FaultEnds { fault: index as u32 }));
            }
        }
        events
    }

    /// The gap from `now` to workload `w`'s next open-loop request.
    pub(super) fn next_gap(&mut self, w: usize, now: Nanos) -> Option<Nanos> {
        let state = &mut self.workloads[w];
        state.load.as_mut()?.next_gap(now, 1.0, &mut state.arrival_rng)
    }

    pub(super) fn think_time(&mut self, w: usize, think: Nanos) -> Nanos {
        let mean_s = think as f64 / NANOS_PER_SEC as f64;
        let draw = mean_s.max(1e-12) * self.workloads[w].arrival_rng.standard_exponential();
        crate::kernel::time::round_to_nanos(draw * NANOS_PER_SEC as f64)
    }

    /// Closes the time integrals of service `s` up to `now` (call before its levels change).
    /// Inlined: most calls find the integrals closed already (several changes in one event).
    #[inline(always)]
    pub(super) fn advance(&mut self, s: usize, now: Nanos) {
        if self.services[s].last_change != now {
            self.integrate(s, now);
        }
    }

    #[inline(never)]
    fn integrate(&mut self, s: usize, now: Nanos) {
        let state = &mut self.services[s];
        let (busy, queued, present) = (state.busy as u128, state.queued as u128, state.present as u128);
        if let Some(scaler) = state.scaler.as_mut() {
            // What the autoscaler averages over its sync period.
            let elapsed = (now - state.last_change) as u128;
            scaler.totals.0 += busy * elapsed;
            scaler.totals.1 += present * elapsed;
            scaler.totals.2 += queued * elapsed;
        }
        let (queued_series, busy_series) = (&mut self.series.queued_area[s], &mut self.series.busy_area[s]);
        let (mut busy_window, mut queued_window, mut present_window) = (0u128, 0u128, 0u128);
        state.cursor.for_each_span(
            state.last_change,
            now,
            self.p.bucket,
            self.p.warmup,
            |bucket, after_warmup, dwell| {
                if let Some(area) = queued_series.get_mut(bucket) {
                    *area += queued * dwell;
                    busy_series[bucket] += busy * dwell;
                }
                if after_warmup {
                    busy_window += busy * dwell;
                    queued_window += queued * dwell;
                    present_window += present * dwell;
                }
            },
        );
        state.busy_window += busy_window;
        state.queued_window += queued_window;
        state.present_window += present_window;
        state.last_change = now;
    }

    fn fault(&mut self, now: Nanos, index: usize, starts: bool, scheduler: &mut Scheduler<Event>) {
        let fault = self.p.faults[index];
        match fault.target {
            FaultTarget::Edge(edge) => self.recompute_edge_faults(now, edge as usize),
            FaultTarget::Instances { service, first, count } => {
                let base = self.services[service as usize].first_instance;
                for i in base + first..base + first + count {
                    if let FaultKind::Crash = fault.kind {
                        // Crashes compose: the instance is down while any crash covering
                        // it is on. A second crash finds it down already; the end of one
                        // restarts it only when no other is still on.
                        let another = self.another_crash_on(now, index, i as usize);
                        if starts && self.instances[i as usize].up {
                            self.crash(now, i as usize, scheduler);
                        } else if !starts && !another {
                            self.restart(i as usize);
                        }
                        debug_assert!(!another || !self.instances[i as usize].up, "down while a crash is on");
                    }
                    if let (FaultKind::Flush, true) = (fault.kind, starts) {
                        self.flush_caches(i as usize);
                    }
                    self.recompute_instance_faults(now, i as usize);
                }
            }
        }
    }

    /// Whether a crash other than fault `index` covers global instance `i` at `now`.
    fn another_crash_on(&self, now: Nanos, index: usize, i: usize) -> bool {
        let service = self.instances[i].service;
        let local = i as u32 - self.services[service as usize].first_instance;
        (0..self.p.faults.len()).any(|other| {
            let fault = &self.p.faults[other];
            let FaultTarget::Instances { service: s, first, count } = fault.target else { return false };
            other != index
                && fault.kind == FaultKind::Crash
                && s == service
                && (first..first + count).contains(&local)
                && self.active(now, other)
        })
    }

    fn active(&self, now: Nanos, index: usize) -> bool {
        let fault = &self.p.faults[index];
        fault.start <= now && now < fault.start.saturating_add(fault.duration)
    }

    fn recompute_instance_faults(&mut self, now: Nanos, i: usize) {
        let (service, local) = {
            let instance = &self.instances[i];
            (instance.service, i as u32 - self.services[instance.service as usize].first_instance)
        };
        let (mut slowdown, mut added, mut error_rate) = (1.0, 0, 0.0);
        for index in 0..self.p.faults.len() {
            let fault = self.p.faults[index];
            let FaultTarget::Instances { service: s, first, count } = fault.target else { continue };
            if s != service || local < first || local >= first + count || !self.active(now, index) {
                continue;
            }
            match fault.kind {
                FaultKind::Slowdown { factor } => slowdown *= factor,
                FaultKind::Latency { added: extra } => added += extra,
                // Independent error sources: the answer survives each.
                FaultKind::Errors { rate } => error_rate = 1.0 - (1.0 - error_rate) * (1.0 - rate),
                FaultKind::Crash | FaultKind::Flush | FaultKind::Partition { .. } => {}
            }
        }
        let instance = &mut self.instances[i];
        (instance.slowdown, instance.added, instance.error_rate) = (slowdown, added, error_rate);
        instance.plain = slowdown == 1.0 && instance.cold_until <= now;
        self.recount_faulted(service as usize);
    }

    fn recompute_edge_faults(&mut self, now: Nanos, e: usize) {
        let (mut partition, mut added, mut slowdown, mut error_rate) = (None, 0, 1.0, 0.0);
        for index in 0..self.p.faults.len() {
            let fault = self.p.faults[index];
            if fault.target != FaultTarget::Edge(e as u32) || !self.active(now, index) {
                continue;
            }
            match fault.kind {
                FaultKind::Partition { fail_fast } => partition = Some(fail_fast || partition == Some(true)),
                FaultKind::Latency { added: extra } => added += extra,
                FaultKind::Slowdown { factor } => slowdown *= factor,
                FaultKind::Errors { rate } => error_rate = 1.0 - (1.0 - error_rate) * (1.0 - rate),
                FaultKind::Crash | FaultKind::Flush => {}
            }
        }
        let edge = &mut self.edges[e];
        (edge.partition, edge.added, edge.slowdown, edge.error_rate) = (partition, added, slowdown, error_rate);
    }

    /// Instance `i` crashes: its queue and workers are gone, and every job it held is
    /// stranded (its events find a new epoch and end silently; callers time out).
    fn crash(&mut self, now: Nanos, i: usize, scheduler: &mut Scheduler<Event>) {
        let s = self.instances[i].service as usize;
        self.advance(s, now);
        self.close_blocked(s, now);
        let instance = &mut self.instances[i];
        let service = &mut self.services[s];
        service.busy -= instance.busy as u64;
        service.queued -= instance.queue.len() as u64;
        service.present -= instance.present as u64;
        service.awaiting -= instance.awaiting as u64;
        service.blocked -= instance.blocked as u64;
        let epoch = instance.epoch + 1;
        let queue = std::mem::take(&mut instance.queue);
        let (lifecycle, provision_epoch) = (instance.lifecycle, instance.provision_epoch);
        self.instances[i] = Instance::fresh(&self.p, s as u32, epoch);
        let instance = &mut self.instances[i];
        (instance.up, instance.lifecycle, instance.provision_epoch) = (false, lifecycle, provision_epoch);
        // Queued jobs hold no event: end them here (their attempts wait for timeouts).
        for job in queue {
            self.strand(now, job, scheduler);
        }
        // Its caches start cold; requests waiting on a fetch are lost with it.
        self.flush_caches(i);
        self.strand_cache_waiters(now, i, scheduler);
        self.sync_rings(i);
    }

    fn restart(&mut self, i: usize) {
        self.instances[i].up = true;
        self.sync_rings(i);
    }

    /// Tells the hash rings of every edge to instance `i`'s service whether it takes
    /// requests: up and serving.
    pub(super) fn sync_rings(&mut self, i: usize) {
        let instance = &self.instances[i];
        let s = instance.service as usize;
        let takes = instance.up && instance.lifecycle == Lifecycle::Serving;
        for (e, edge) in self.edges.iter_mut().enumerate() {
            if self.p.edges[e].to as usize == s {
                if let Some((ring, _)) = edge.ring.as_mut() {
                    ring.set_healthy(i as u32 - self.services[s].first_instance, takes);
                }
            }
        }
    }

    /// Closes service `s`'s integrals at `now` (`window_ns` after the warm-up): its
    /// utilisation (of the workers serving, when autoscaled), mean queue and jobs
    /// present, its limiters' final limits, and its scaler's series.
    fn finish_service(&mut self, s: usize, now: Nanos, window_ns: f64) {
        self.advance(s, now);
        self.close_blocked(s, now);
        let params = &self.p.services[s];
        let state = &mut self.services[s];
        let capacity = (params.instances * params.workers) as f64;
        match state.scaler.as_mut() {
            None => {
                state.results.utilisation = state.busy_window as f64 / (window_ns * capacity);
                let working = state.busy_window.saturating_sub(state.blocked_window);
                state.results.cpu_utilisation = working as f64 / (window_ns * capacity);
                state.results.instances_mean = params.instances as f64;
            }
            Some(scaler) => {
                // Of the workers serving over time.
                scaler.serving.advance(now);
                let serving = scaler.serving.window as f64 * params.workers as f64;
                state.results.utilisation = state.busy_window as f64 / serving;
                let working = state.busy_window.saturating_sub(state.blocked_window);
                state.results.cpu_utilisation = working as f64 / serving;
                state.results.instances_mean = scaler.serving.window as f64 / window_ns;
                self.series.instances_area[s] = std::mem::take(&mut scaler.serving.area);
                scaler.desired.advance(now);
                scaler.read_milli.advance(now);
                self.series.desired_area[s] = std::mem::take(&mut scaler.desired.area);
                self.series.scale_read_milli_area[s] = std::mem::take(&mut scaler.read_milli.area);
            }
        }
        state.results.queue_mean = state.queued_window as f64 / window_ns;
        state.results.present_mean = state.present_window as f64 / window_ns;
        let first = state.first_instance as usize;
        state.results.limit_final = self.instances[first..first + params.instances as usize]
            .iter()
            .map(|i| i.limiter.as_ref().map_or(0.0, |l| l.limit() as f64))
            .sum();
    }

    /// How long after the last fault that began before `now` the whole graph's queue
    /// depth recovered (`None`: it never did).
    fn recovery(&self, now: Nanos) -> Option<Nanos> {
        // Recovery from the whole graph's queue depth, after the last fault.
        let buckets = self.series.queued_area.first().map_or(0, Vec::len);
        let total: Vec<u128> = (0..buckets).map(|b| self.series.queued_area.iter().map(|s| s[b]).sum()).collect();
        let faults: Vec<(Nanos, Nanos)> = self
            .p
            .faults
            .iter()
            .filter(|f| f.start < now)
            .map(|f| (f.start, f.start.saturating_add(f.duration)))
            .collect();
        crate::measurement::recovery::recovery_time(&total, self.p.bucket, self.p.warmup, &faults, self.p.recovery_hold)
    }

    /// Closes the integrals at `now` and returns the results and series.
    pub fn finish(&mut self, now: Nanos, events: u64) -> (GraphResults, GraphSeries) {
        let window_ns = now.saturating_sub(self.p.warmup) as f64;
        let window_s = window_ns / NANOS_PER_SEC as f64;
        for s in 0..self.services.len() {
            self.finish_service(s, now, window_ns);
        }
        self.close_unhealthy(now);
        for state in &mut self.workloads {
            state.results.goodput_rps = state.results.successes as f64 / window_s;
        }
        for edge in &mut self.edges {
            edge.results.breaker_trips = edge.breaker.as_ref().map_or(0, |b| b.counters().trips);
            if let Some(in_use) = edge.pool_in_use.as_mut() {
                in_use.advance(now);
                edge.results.pool_in_use_mean = in_use.window as f64 / window_ns;
            }
            if let Some(waiting) = edge.pool_waiting.as_mut() {
                waiting.advance(now);
            }
        }
        let take = |level: &mut Option<LevelSeries>| level.as_mut().map_or(Vec::new(), |l| std::mem::take(&mut l.area));
        self.series.ejected_area = self.edges.iter_mut().map(|e| take(&mut e.ejected)).collect();
        self.series.pool_in_use_area = self.edges.iter_mut().map(|e| take(&mut e.pool_in_use)).collect();
        self.series.pool_waiting_area = self.edges.iter_mut().map(|e| take(&mut e.pool_waiting)).collect();
        let recovery = self.recovery(now);
        self.series.unhealthy_area = self.services.iter_mut().map(|s| take(&mut s.unhealthy)).collect();
        let results = GraphResults {
            entries: self.workloads.iter_mut().map(|w| std::mem::take(&mut w.results)).collect(),
            sites: std::mem::take(&mut self.sites),
            services: self.services.iter_mut().map(|s| std::mem::take(&mut s.results)).collect(),
            edges: self.edges.iter().map(|e| e.results).collect(),
            caches: self.cache_results_at_end(),
            recovered: recovery.is_some(),
            recovery_s: recovery.map_or(f64::NAN, |ns| ns as f64 / NANOS_PER_SEC as f64),
            events,
        };
        self.series.latency = self.entry_latencies.iter_mut().map(RequestLatencies::take_windows).collect();
        (results, std::mem::take(&mut self.series))
    }

    /// Draws a one-way network delay on edge `e`.
    pub(super) fn network(&mut self, e: usize) -> Nanos {
        let edge = &mut self.edges[e];
        let base = match (edge.network_fixed, &self.p.edges[e].network) {
            (Some(fixed), _) => fixed,
            (None, Some(distribution)) => distribution.sample(&mut edge.network_rng),
            (None, None) => unreachable!("no distribution is a fixed delay of 0"),
        };
        let slowed = if edge.slowdown == 1.0 { base } else { (base as f64 * edge.slowdown).round() as Nanos };
        slowed + edge.added
    }
}

impl Model for Graph<'_> {
    type Event = Event;

    fn handle(&mut self, now: Nanos, event: Event, scheduler: &mut Scheduler<Event>) {
        match event {
            Event::Arrival { workload } => self.arrival(now, workload as usize, scheduler),
            Event::Arrives { attempt } => self.attempt_arrives(now, attempt, scheduler),
            Event::Answered { attempt, answer } => self.answered(now, attempt, answer, scheduler),
            Event::EdgeTimeouts { edge, ticket } => self.edge_timeouts(now, edge as usize, ticket, scheduler),
            Event::AttemptTimeout { attempt, ticket } => self.attempt_timeout(now, attempt, ticket, scheduler),
            Event::WorkDone { job, stamp } => self.work_done(now, job, stamp, scheduler),
            Event::RetryDue { call } => self.retry_due(now, call, scheduler),
            Event::HedgeDue { call, ticket } => self.hedge_due(now, call, ticket, scheduler),
            Event::AutoscaleSync { service } => self.autoscale_sync(now, service as usize, scheduler),
            Event::InstanceReady { instance, epoch } => self.instance_ready(now, instance as usize, epoch),
            Event::ProbeDue { instance } => self.probe_due(now, instance as usize, scheduler),
            Event::PoolExpiry { call, ticket } => self.pool_expiry(now, call, ticket, scheduler),
            Event::PoolHandOver { pool } => self.pool_hand_over(now, pool as usize, scheduler),
            Event::FaultStarts { fault } => self.fault(now, fault as usize, true, scheduler),
            Event::FaultEnds { fault } => self.fault(now, fault as usize, false, scheduler),
        }
    }
}
