//! The [`Cluster`] model: its state, construction, the event dispatch, the exact
//! per-bucket integrals, invariant checks and the results at the horizon.

use super::params::FaultKind;
use crate::measurement::buckets::BucketCursor;
use crate::measurement::trace::{Trace, TraceKind, Tracer, NONE};
use std::collections::VecDeque;

use super::params::{ClusterParams, Fault, QueueDiscipline};
use super::results::{recovery_time, ClusterResults, ClusterSeries, HOPS_TRACKED};
use super::state::{Attempt, Event, KeySampler, Request, Shard};
use crate::components::arrivals::Arrivals;
use crate::components::ring::{BoundedLoadRouter, HashRing, RingHash};
use crate::kernel::histogram::LatencyHistogram;
use crate::kernel::rng::{RngStream, StreamPurpose};
use crate::kernel::sim::{Model, Scheduler, Simulation};
use crate::kernel::slab::{Slab, SlabKey};
use crate::kernel::time::{Nanos, NANOS_PER_SEC};
use crate::kernel::timeout_fifo::TimeoutFifo;
use crate::kernel::timer::TimerTicket;
use crate::measurement::latency_windows::WindowCounts;
use crate::measurement::request_latencies::{EndingSlots, RequestLatencies};
use crate::policy::breaker::CircuitBreaker;
use crate::policy::codel::CoDel;

pub(super) const ARRIVALS: StreamPurpose = StreamPurpose::named("cluster.arrivals");
pub(super) const KEYS: StreamPurpose = StreamPurpose::named("cluster.keys");
pub(super) const SERVICE: StreamPurpose = StreamPurpose::named("cluster.service");
pub(super) const RETRIES: StreamPurpose = StreamPurpose::named("cluster.retries");
pub(super) const USERS: StreamPurpose = StreamPurpose::named("cluster.users");

/// The cluster model.
pub struct Cluster<'h> {
    pub(super) p: ClusterParams,
    pub(super) arrivals: RngStream,
    /// Open-loop arrivals from `[load]` (a rate profile or a trace), with the replay's
    /// position; `None`: a constant-rate Poisson stream.
    pub(super) load: Option<Arrivals>,
    /// The recorded key of the open-loop arrival being handled (a trace with keys).
    pub(super) replayed_key: Option<u64>,
    pub(super) key_rng: RngStream,
    pub(super) service_rng: RngStream,
    pub(super) retry_rng: RngStream,
    pub(super) user_rng: RngStream,
    pub(super) key_sampler: KeySampler,
    pub(super) key_hashes: Vec<u32>,
    pub(super) ring: HashRing,
    pub(super) router: BoundedLoadRouter,
    pub(super) breakers: Vec<CircuitBreaker>,
    pub(super) shards: Vec<Shard>,
    pub(super) requests: Slab<Request>,
    pub(super) attempts: Slab<Attempt>,
    /// Every attempt's timeout (one length, so due in the order armed), off the heap:
    /// most never fire, the answer comes first.
    pub(super) timeouts: TimeoutFifo<(SlabKey, TimerTicket)>,
    pub(super) rate_factor: f64,
    pub(super) spike_factor: f64,
    pub(super) arrival_generation: u32,
    // integrals and counters
    pub(super) last_change: Nanos,
    pub(super) queued: u64,
    pub(super) in_flight: u64,
    pub(super) series: ClusterSeries,
    pub(super) results: ClusterResults,
    pub(super) hops_total: u64,
    pub(super) routed: u64,
    pub(super) busy_area: u128,
    /// Busy servers over all shards (Σ shard.busy), for `busy_area`.
    pub(super) busy_servers: u64,
    /// The series bucket `last_change` lies in.
    pub(super) cursor: BucketCursor,
    pub(super) wasted_ns: u128,
    /// Requests' latencies by ending (see [`Self::new`]).
    pub(super) latencies: &'h mut [LatencyHistogram],
    pub(super) endings: RequestLatencies,
    /// Per-request tracing, off unless [`Cluster::traced`]: one branch per hook when off.
    pub(super) tracer: Option<Box<Tracer>>,
}

impl<'h> Cluster<'h> {
    /// Replica `replica` of a run seeded `master_seed`. Request latencies go to
    /// `latencies`: `[ok, failed, all]` (a failed request's latency is the time until
    /// its client gave up), or `[ok]` alone.
    pub fn new(p: ClusterParams, master_seed: u64, replica: u64, latencies: &'h mut [LatencyHistogram]) -> Self {
        assert!(p.shards > 0 && p.servers > 0 && p.keys > 0 && p.bucket > 0);
        assert!(p.faults.len() < u32::MAX as usize);
        let ring = HashRing::new(p.shards, p.vnodes, p.hash, 0x5eed);
        let key_hashes =
            if p.hash == RingHash::Sha256 { (0..p.keys).map(|k| p.hash.key(k)).collect() } else { Vec::new() };
        let buckets = p.horizon.div_ceil(p.bucket) as usize;
        let shards = (0..p.shards)
            .map(|_| Shard {
                queue: VecDeque::with_capacity(p.queue_capacity as usize),
                busy: 0,
                load_since: 0,
                slowdown: 1.0,
                stalls: 0,
                failures: 0,
                load_area: 0,
                codel: match p.discipline {
                    QueueDiscipline::CoDel(config) => Some(CoDel::new(config)),
                    _ => None,
                },
            })
            .collect();
        let breakers = match p.breaker {
            Some(config) => (0..p.shards).map(|_| CircuitBreaker::new(config)).collect(),
            None => Vec::new(),
        };
        Cluster {
            arrivals: RngStream::derive(master_seed, replica, ARRIVALS),
            load: p.load.clone().map(Arrivals::new),
            replayed_key: None,
            key_rng: RngStream::derive(master_seed, replica, KEYS),
            service_rng: RngStream::derive(master_seed, replica, SERVICE),
            retry_rng: RngStream::derive(master_seed, replica, RETRIES),
            user_rng: RngStream::derive(master_seed, replica, USERS),
            key_sampler: KeySampler::new(p.keys, p.zipf_s),
            key_hashes,
            router: BoundedLoadRouter::new(p.shards, p.capacity_factor),
            ring,
            breakers,
            shards,
            requests: Slab::with_capacity(1024),
            attempts: Slab::with_capacity(1024),
            timeouts: TimeoutFifo::with_capacity(1024),
            rate_factor: 1.0,
            spike_factor: 1.0,
            arrival_generation: 0,
            last_change: 0,
            queued: 0,
            in_flight: 0,
            series: ClusterSeries {
                queued_area: vec![0; buckets],
                in_flight_area: vec![0; buckets],
                attempts: vec![0; buckets],
                successes: vec![0; buckets],
                hops: vec![0; HOPS_TRACKED + 1],
                latency: WindowCounts::default(),
            },
            results: ClusterResults::default(),
            hops_total: 0,
            routed: 0,
            busy_area: 0,
            busy_servers: 0,
            cursor: BucketCursor::new(p.bucket),
            wasted_ns: 0,
            endings: RequestLatencies::new(EndingSlots::for_len(0, latencies.len(), false)),
            latencies,
            tracer: None,
            p,
        }
    }

    /// Keeps the requests' latencies over time too, in windows of `window` ns (see
    /// [`ClusterSeries::latency`]).
    pub fn with_latency_windows(mut self, window: Nanos) -> Self {
        self.endings.keep_windows(window, self.p.horizon);
        self
    }

    /// Records a trace of every request (see [`crate::measurement::trace`]); the
    /// requests still going at the horizon end there as `in_flight`.
    pub fn traced(mut self) -> Self {
        let mut tracer = Tracer::new();
        for fault in &self.p.faults {
            let (kind, place) = match fault.kind {
                FaultKind::Surge { .. } => ("surge", NONE),
                FaultKind::Brownout { shard, .. } => ("brownout", shard),
                FaultKind::ShardFailure { shard } => ("shard_failure", shard),
                FaultKind::LatencySpike { .. } => ("latency_spike", NONE),
            };
            let window = (fault.start, fault.start.saturating_add(fault.duration));
            tracer.event(TraceKind::Incident, "", place, window, kind, "", window.1 > self.p.warmup);
        }
        self.tracer = Some(Box::new(tracer));
        self
    }

    /// Runs to the horizon: the scalars, the time series and (if [`Cluster::traced`]) the trace.
    pub fn run_traced(self) -> (ClusterResults, ClusterSeries, Option<Trace>) {
        let horizon = self.p.horizon;
        let mut simulation = self.into_simulation();
        simulation.run_until(horizon);
        let events = simulation.events_handled();
        let (results, series) = simulation.model.finish(horizon, events);
        let trace = simulation.model.tracer.take().map(|t| t.finish(Some(horizon)));
        (results, series, trace)
    }

    /// Runs to the horizon; returns the scalars and the time series.
    pub fn run(self) -> (ClusterResults, ClusterSeries) {
        let horizon = self.p.horizon;
        let mut simulation = self.into_simulation();
        simulation.run_until(horizon);
        let events = simulation.events_handled();
        simulation.model.finish(horizon, events)
    }

    /// The model in a kernel with its first arrival and the fault events scheduled.
    pub fn into_simulation(mut self) -> Simulation<Self> {
        let first = self.interarrival(0);
        let faults: Vec<Fault> = self.p.faults.clone();
        let mut simulation = Simulation::new(self, 1024);
        let scheduler = simulation.scheduler();
        scheduler.at(first, Event::Arrival { generation: 0 });
        let users = simulation.model.p.closed_loop_users;
        for _ in 0..users {
            let think = simulation.model.think();
            simulation.scheduler().at(think, Event::UserRequest);
        }
        let scheduler = simulation.scheduler();
        for (index, fault) in faults.iter().enumerate() {
            scheduler.at(fault.start, Event::FaultStart { index: index as u32 });
            scheduler.at(fault.start.saturating_add(fault.duration), Event::FaultEnd { index: index as u32 });
        }
        simulation
    }

    pub(super) fn counted(&self, now: Nanos) -> bool {
        now >= self.p.warmup
    }

    /// Adds the state held since the last change to the per-bucket integrals. Most
    /// events fall in the bucket of the previous one: the cursor then adds one piece
    /// without dividing.
    #[inline]
    pub(super) fn advance(&mut self, now: Nanos) {
        let (queued, in_flight, busy) = (self.queued as u128, self.in_flight as u128, self.busy_servers as u128);
        let series = &mut self.series;
        let busy_area = &mut self.busy_area;
        self.cursor.for_each_span(
            self.last_change,
            now,
            self.p.bucket,
            self.p.warmup,
            |bucket, after_warmup, dwell| {
                if let Some(area) = series.queued_area.get_mut(bucket) {
                    *area += queued * dwell;
                    series.in_flight_area[bucket] += in_flight * dwell;
                }
                if after_warmup {
                    *busy_area += busy * dwell;
                }
            },
        );
        self.last_change = now;
    }

    /// Brings `shard`'s load integral (busy + queued, after the warm-up) up to `now`;
    /// called before its load changes. Integer sums: the same total in any order.
    #[inline]
    pub(super) fn touch(&mut self, shard: u32, now: Nanos) {
        let warmup = self.p.warmup;
        let s = &mut self.shards[shard as usize];
        let from = s.load_since.max(warmup);
        if now > from {
            s.load_area += (s.busy as u128 + s.queue.len() as u128) * (now - from) as u128;
        }
        s.load_since = now;
    }

    pub(super) fn bucket_of(&self, now: Nanos) -> usize {
        (now / self.p.bucket) as usize
    }

    pub(super) fn check(&self, shard: u32) {
        let s = &self.shards[shard as usize];
        debug_assert!(s.busy <= self.p.servers, "shard {shard}: more busy servers than servers");
        debug_assert!(s.queue.len() <= self.p.queue_capacity as usize, "shard {shard}: queue over capacity");
        debug_assert_eq!(self.router.total() as u64, self.in_flight, "router load out of step with attempts");
        debug_assert_eq!(
            self.shards.iter().map(|s| s.busy as u64).sum::<u64>(),
            self.busy_servers,
            "busy servers out of step with the shards"
        );
    }

    /// Closes the integrals and computes the results.
    pub fn finish(&mut self, now: Nanos, events: u64) -> (ClusterResults, ClusterSeries) {
        self.advance(now);
        for shard in 0..self.shards.len() as u32 {
            self.touch(shard, now);
        }
        let window_s = (now.saturating_sub(self.p.warmup)) as f64 / NANOS_PER_SEC as f64;
        let r = &mut self.results;
        r.events = events;
        r.amplification_ratio = if r.offered > 0 { r.attempts as f64 / r.offered as f64 } else { 0.0 };
        r.success_ratio = if r.offered > 0 { r.successes as f64 / r.offered as f64 } else { 0.0 };
        r.goodput_rps = if window_s > 0.0 { r.successes as f64 / window_s } else { 0.0 };
        r.wasted_work_s = self.wasted_ns as f64 / NANOS_PER_SEC as f64;
        r.wasted_work_ratio = if self.busy_area > 0 {
            // Busy server time is Σ busy × dwell; wasted is Σ service of abandoned attempts.
            (self.wasted_ns as f64 / self.busy_area as f64).min(1.0)
        } else {
            0.0
        };
        r.hops_mean = if self.routed > 0 { self.hops_total as f64 / self.routed as f64 } else { 0.0 };
        let loads: Vec<f64> = self.shards.iter().map(|s| s.load_area as f64).collect();
        let mean = loads.iter().sum::<f64>() / loads.len() as f64;
        r.peak_shard_load_ratio = if mean > 0.0 { loads.iter().cloned().fold(0.0, f64::max) / mean } else { 1.0 };
        r.breaker_trips = self.breakers.iter().map(|b| b.counters().trips).sum();
        let recovery = recovery_time(&self.series.queued_area, &self.p);
        r.recovered = recovery.is_some();
        r.recovery_s = recovery.map_or(f64::NAN, |ns| ns as f64 / NANOS_PER_SEC as f64);
        self.series.latency = self.endings.take_windows();
        (*r, std::mem::take(&mut self.series))
    }
}

impl Model for Cluster<'_> {
    type Event = Event;

    fn handle(&mut self, now: Nanos, event: Event, scheduler: &mut Scheduler<Event>) {
        self.advance(now);
        match event {
            Event::Arrival { generation } => {
                if generation != self.arrival_generation {
                    return; // superseded by a rate change
                }
                // The key a replayed trace recorded for this arrival, read before the
                // next arrival is drawn (which moves the replay on).
                self.replayed_key = self.load.as_ref().and_then(Arrivals::replayed_key);
                let next = self.interarrival(now);
                scheduler.after(next, Event::Arrival { generation });
                self.new_request(now, false, scheduler);
            }
            Event::UserRequest => self.new_request(now, true, scheduler),
            Event::Send { request } => self.send(now, request, scheduler),
            Event::Done { shard, attempt } => self.done(now, shard, attempt, scheduler),
            Event::Timeouts { ticket } => self.timeouts_due(now, ticket, scheduler),
            Event::FaultStart { index } => self.fault(now, index, true, scheduler),
            Event::FaultEnd { index } => self.fault(now, index, false, scheduler),
        }
    }
}
