//! The sharded cluster: open-loop clients send keyed requests through a
//! consistent-hash router (optionally with bounded loads) to M shards, each a pool of
//! servers with a bounded queue; clients time out, retry by policy, and may be held
//! back by a retry budget and a breaker per shard. Faults (traffic surge, shard
//! brownout or stall, shard failure, cluster-wide latency spike) open and close
//! during the run.
//!
//! Metastability lives here: a server keeps working on an attempt whose client has
//! already given up (unless `drop_abandoned`), so after a fault the cluster can stay
//! busy with wasted work while retries keep the queues full.
//!
//! Entities: requests and attempts live in slabs; a request's timeout is a
//! `TimerSlot` (lazy cancellation). Time series of queue depth, in-flight attempts,
//! attempts and successes are kept per bucket as exact integers, so replicas can be
//! summed in any order.
//!
//! Invariants (asserted): busy ≤ servers on every shard; queue ≤ capacity; the
//! router's load equals attempts routed and not yet finished.

use std::collections::VecDeque;

use crate::components::ring::{BoundedLoadRouter, HashRing, RingHash, Route};
use crate::kernel::histogram::LatencyHistogram;
use crate::kernel::rng::{RngStream, StreamPurpose};
use crate::kernel::sim::{Model, Scheduler, Simulation};
use crate::kernel::slab::{Slab, SlabKey};
use crate::kernel::time::{Nanos, NANOS_PER_SEC};
use crate::kernel::timer::{TimerSlot, TimerTicket};
use crate::policy::backoff::Backoff;
use crate::policy::breaker::{BreakerConfig, CircuitBreaker, Permit};
use crate::policy::classify::Outcome;
use crate::policy::codel::{CoDel, CoDelConfig};
use crate::policy::retry_budget::RetryBudget;

const ARRIVALS: StreamPurpose = StreamPurpose::named("cluster.arrivals");
const KEYS: StreamPurpose = StreamPurpose::named("cluster.keys");
const SERVICE: StreamPurpose = StreamPurpose::named("cluster.service");
const RETRIES: StreamPurpose = StreamPurpose::named("cluster.retries");
const USERS: StreamPurpose = StreamPurpose::named("cluster.users");

/// Service-time distribution of one request on an unloaded server.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ServiceTime {
    Exponential { mean: Nanos },
    Lognormal { median: Nanos, sigma: f64 },
    Constant { value: Nanos },
}

/// The order in which a shard serves its queue.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum QueueDiscipline {
    Fifo,
    /// Newest first.
    Lifo,
    /// FIFO with CoDel drops at dequeue; a dropped attempt is an error to its client.
    CoDel(CoDelConfig),
}

/// The client's retry rule.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RetryPolicy {
    /// One attempt.
    None,
    /// Up to `max_attempts`, each retry immediately.
    Naive { max_attempts: u32 },
    /// Up to `max_attempts`, waiting by `backoff` between them.
    Backoff { max_attempts: u32, backoff: Backoff },
}

/// What a fault does while it is active.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FaultKind {
    /// Client arrivals × `multiplier`.
    Surge { multiplier: f64 },
    /// One shard's service times × `slowdown` (`f64::INFINITY` stalls it: no service starts).
    Brownout { shard: u32, slowdown: f64 },
    /// One shard leaves the ring; its queue fails and its keys fail over.
    ShardFailure { shard: u32 },
    /// Every shard's service times × `factor`.
    LatencySpike { factor: f64 },
}

/// A fault and its window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fault {
    pub kind: FaultKind,
    pub start: Nanos,
    pub duration: Nanos,
}

/// Parameters of one cluster replica.
#[derive(Clone, Debug)]
pub struct ClusterParams {
    pub arrival_rate_per_s: f64,
    /// Key space; keys are drawn uniformly or Zipf(s) when `zipf_s > 0`.
    pub keys: u64,
    pub zipf_s: f64,
    /// Share of requests that carry the single hot key 0 (a hot tenant); 0 = none.
    pub hot_share: f64,
    /// A closed-loop population: users that wait for their answer, think, ask again (0 = none).
    pub closed_loop_users: u32,
    /// Mean think time of a closed-loop user (exponential).
    pub think_time: Nanos,
    /// Each attempt's client-side timeout.
    pub attempt_timeout: Nanos,
    pub shards: u32,
    pub vnodes: u32,
    /// Bounded-load factor c; `f64::INFINITY` = plain consistent hashing.
    pub capacity_factor: f64,
    pub hash: RingHash,
    pub servers: u32,
    pub service: ServiceTime,
    /// Waiting room per shard.
    pub queue_capacity: u32,
    pub discipline: QueueDiscipline,
    /// Drop, at dequeue, attempts whose client already gave up.
    pub drop_abandoned: bool,
    pub retry: RetryPolicy,
    /// Any budget but Envoy's (which needs retry completions the model does not track).
    pub budget: RetryBudget,
    pub breaker: Option<BreakerConfig>,
    pub faults: Vec<Fault>,
    pub warmup: Nanos,
    pub horizon: Nanos,
    /// Width of a time-series bucket.
    pub bucket: Nanos,
    /// Recovery needs the queue back in its band for this long.
    pub recovery_hold: Nanos,
}

impl ClusterParams {
    /// The seed's harness cluster with every policy on: 4 shards × 4 servers (10 ms
    /// exponential service) at 1,200 requests/s with 50 ms timeouts, bounded loads
    /// (c = 1.25), full-jitter backoff (4 attempts), a 10% retry budget, a breaker per
    /// shard, and a 5× surge plus a 10× single-shard brownout at 3 s; 60 s long. The
    /// reference workload of the benchmark and the allocation test.
    pub fn every_policy_on() -> Self {
        const MS: Nanos = 1_000_000;
        ClusterParams {
            arrival_rate_per_s: 1_200.0,
            keys: 100_000,
            zipf_s: 0.0,
            hot_share: 0.0,
            closed_loop_users: 0,
            think_time: 0,
            attempt_timeout: 50 * MS,
            shards: 4,
            vnodes: 150,
            capacity_factor: 1.25,
            hash: RingHash::Fast,
            servers: 4,
            service: ServiceTime::Exponential { mean: 10 * MS },
            queue_capacity: 100,
            discipline: QueueDiscipline::Fifo,
            drop_abandoned: false,
            retry: RetryPolicy::Backoff {
                max_attempts: 4,
                backoff: Backoff::FullJitter { base: 10 * MS, cap: 1_000 * MS },
            },
            budget: RetryBudget::Ratio(crate::policy::retry_budget::RatioBudget::new(0.1, 100.0, 10.0)),
            breaker: Some(BreakerConfig {
                window: crate::policy::breaker::SlidingWindow::Time { window: 1_000 * MS, buckets: 10 },
                minimum_calls: 20,
                failure_rate_threshold: 0.5,
                open_duration: 500 * MS,
                max_open_duration: 500 * MS,
                half_open_probes: 3,
                ..BreakerConfig::default()
            }),
            faults: vec![
                Fault { kind: FaultKind::Surge { multiplier: 5.0 }, start: 3_000 * MS, duration: 200 * MS },
                Fault { kind: FaultKind::Brownout { shard: 0, slowdown: 10.0 }, start: 3_000 * MS, duration: 500 * MS },
            ],
            warmup: NANOS_PER_SEC,
            horizon: 60 * NANOS_PER_SEC,
            bucket: 10 * MS,
            recovery_hold: 200 * MS,
        }
    }
}

/// Time series of one replica, per bucket, in exact integers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterSeries {
    /// Σ (queued attempts × ns) per bucket.
    pub queued_area: Vec<u128>,
    /// Σ (attempts at shards, queued or in service × ns) per bucket.
    pub in_flight_area: Vec<u128>,
    /// Attempts sent per bucket.
    pub attempts: Vec<u64>,
    /// Successful requests per bucket.
    pub successes: Vec<u64>,
    /// Routed attempts (after warm-up) by hops walked: index h for h < 64, index 64 for 64 or more.
    pub hops: Vec<u64>,
}

/// Exact hop counts are kept below this; longer walks share the last slot.
pub const HOPS_TRACKED: usize = 64;

/// Scalar results of one replica (after warm-up).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ClusterResults {
    pub offered: u64,
    pub attempts: u64,
    pub amplification_ratio: f64,
    pub successes: u64,
    pub success_ratio: f64,
    pub goodput_rps: f64,
    pub failed: u64,
    pub timeouts: u64,
    pub refused_queue_full: u64,
    pub refused_breaker: u64,
    pub refused_no_shard: u64,
    pub dropped_codel: u64,
    pub retries_denied_by_budget: u64,
    pub wasted_work_s: f64,
    pub wasted_work_ratio: f64,
    pub hops_mean: f64,
    pub hops_max: u64,
    pub peak_shard_load_ratio: f64,
    pub breaker_trips: u64,
    /// Seconds from the end of the last fault until the queue is back in its band (NaN if never).
    pub recovery_s: f64,
    pub recovered: bool,
    pub events: u64,
}

/// Events of the cluster model (24 bytes).
#[derive(Clone, Copy, Debug)]
pub enum Event {
    Arrival {
        generation: u32,
    },
    Send {
        request: SlabKey,
    },
    Done {
        shard: u32,
        attempt: SlabKey,
    },
    Timeout {
        request: SlabKey,
        ticket: TimerTicket,
    },
    FaultStart {
        index: u32,
    },
    FaultEnd {
        index: u32,
    },
    /// A closed-loop user has finished thinking.
    UserRequest,
}

#[derive(Clone, Copy, Debug)]
struct Request {
    key_hash: u32,
    /// Sent by a closed-loop user, who asks again after thinking.
    closed_loop: bool,
    arrived_at: Nanos,
    counted: bool,
    attempts: u32,
    timer: TimerSlot,
    attempt: Option<SlabKey>,
    previous_backoff: Nanos,
}

#[derive(Clone, Copy, Debug)]
struct Attempt {
    request: SlabKey,
    shard: u32,
    service_started: Nanos,
    abandoned: bool,
    permit: Option<Permit>,
    sent_at: Nanos,
}

struct Shard {
    queue: VecDeque<SlabKey>,
    busy: u32,
    slowdown: f64,
    stalls: u32,
    load_area: u128,
    codel: Option<CoDel>,
}

/// Zipf sampler by inversion over a precomputed CDF (built once per replica).
struct KeySampler {
    cdf: Vec<f64>,
    keys: u64,
}

impl KeySampler {
    fn new(keys: u64, s: f64) -> Self {
        if s <= 0.0 {
            return KeySampler { cdf: Vec::new(), keys };
        }
        let mut cdf = Vec::with_capacity(keys as usize);
        let mut total = 0.0;
        for rank in 1..=keys {
            total += (rank as f64).powf(-s);
            cdf.push(total);
        }
        cdf.iter_mut().for_each(|c| *c /= total);
        KeySampler { cdf, keys }
    }

    #[inline]
    fn draw(&self, rng: &mut RngStream) -> u64 {
        if self.cdf.is_empty() {
            rng.below(self.keys)
        } else {
            let u = rng.uniform01();
            (self.cdf.partition_point(|&c| c < u) as u64).min(self.keys - 1)
        }
    }
}

/// The cluster model.
pub struct Cluster<'h> {
    p: ClusterParams,
    arrivals: RngStream,
    key_rng: RngStream,
    service_rng: RngStream,
    retry_rng: RngStream,
    user_rng: RngStream,
    key_sampler: KeySampler,
    key_hashes: Vec<u32>,
    ring: HashRing,
    router: BoundedLoadRouter,
    breakers: Vec<CircuitBreaker>,
    shards: Vec<Shard>,
    requests: Slab<Request>,
    attempts: Slab<Attempt>,
    rate_factor: f64,
    spike_factor: f64,
    arrival_generation: u32,
    // integrals and counters
    last_change: Nanos,
    queued: u64,
    in_flight: u64,
    series: ClusterSeries,
    results: ClusterResults,
    hops_total: u64,
    routed: u64,
    busy_area: u128,
    wasted_ns: u128,
    latency: &'h mut LatencyHistogram,
}

impl<'h> Cluster<'h> {
    /// Replica `replica` of a run seeded `master_seed`; successful request latencies go to `latency`.
    pub fn new(p: ClusterParams, master_seed: u64, replica: u64, latency: &'h mut LatencyHistogram) -> Self {
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
                slowdown: 1.0,
                stalls: 0,
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
            },
            results: ClusterResults::default(),
            hops_total: 0,
            routed: 0,
            busy_area: 0,
            wasted_ns: 0,
            latency,
            p,
        }
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
        let first = self.interarrival();
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

    fn think(&mut self) -> Nanos {
        let mean = self.p.think_time as f64;
        (self.user_rng.exponential(1.0) * mean).round() as Nanos
    }

    /// A request has ended (answered or given up): a closed-loop user thinks, then asks again.
    fn request_ended(&mut self, closed_loop: bool, scheduler: &mut Scheduler<Event>) {
        if closed_loop {
            let think = self.think();
            scheduler.after(think, Event::UserRequest);
        }
    }

    fn interarrival(&mut self) -> Nanos {
        let rate = self.p.arrival_rate_per_s * self.rate_factor;
        if rate <= 0.0 {
            return Nanos::MAX / 2; // a closed-loop-only cluster has no open arrivals
        }
        (self.arrivals.exponential(rate) * NANOS_PER_SEC as f64).round() as Nanos
    }

    fn service_time(&mut self, shard: u32) -> Nanos {
        let base = match self.p.service {
            ServiceTime::Exponential { mean } => self.service_rng.exponential(1.0) * mean as f64,
            ServiceTime::Lognormal { median, sigma } => median as f64 * self.service_rng.lognormal(0.0, sigma),
            ServiceTime::Constant { value } => value as f64,
        };
        (base * self.shards[shard as usize].slowdown * self.spike_factor).round() as Nanos
    }

    fn counted(&self, now: Nanos) -> bool {
        now >= self.p.warmup
    }

    /// Adds the state held since the last change to the per-bucket integrals.
    fn advance(&mut self, now: Nanos) {
        let (queued, in_flight) = (self.queued as u128, self.in_flight as u128);
        let series = &mut self.series;
        let shards = &mut self.shards;
        let busy_area = &mut self.busy_area;
        crate::measurement::buckets::for_each_span(
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
                    for shard in shards.iter_mut() {
                        shard.load_area += (shard.busy as u128 + shard.queue.len() as u128) * dwell;
                        *busy_area += shard.busy as u128 * dwell;
                    }
                }
            },
        );
        self.last_change = now;
    }

    fn bucket_of(&self, now: Nanos) -> usize {
        (now / self.p.bucket) as usize
    }

    fn new_request(&mut self, now: Nanos, closed_loop: bool, scheduler: &mut Scheduler<Event>) {
        let hot = self.p.hot_share > 0.0 && self.key_rng.bernoulli(self.p.hot_share);
        let key = if hot { 0 } else { self.key_sampler.draw(&mut self.key_rng) };
        let key_hash = if self.key_hashes.is_empty() { self.p.hash.key(key) } else { self.key_hashes[key as usize] };
        let counted = self.counted(now);
        if counted {
            self.results.offered += 1;
        }
        let request = self.requests.insert(Request {
            key_hash,
            closed_loop,
            arrived_at: now,
            counted,
            attempts: 0,
            timer: TimerSlot::default(),
            attempt: None,
            previous_backoff: 0,
        });
        self.p.budget.on_request(now);
        self.send(now, request, scheduler);
    }

    fn send(&mut self, now: Nanos, request_key: SlabKey, scheduler: &mut Scheduler<Event>) {
        let Some(request) = self.requests.get_mut(request_key) else { return };
        request.attempts += 1;
        let key_hash = request.key_hash;
        let counted = request.counted;
        let ticket = request.timer.arm();
        scheduler.after(self.p.attempt_timeout, Event::Timeout { request: request_key, ticket });
        if counted {
            self.results.attempts += 1;
        }
        let bucket = self.bucket_of(now);
        if let Some(b) = self.series.attempts.get_mut(bucket) {
            *b += 1;
        }
        let shard = match self.router.route(&self.ring, key_hash) {
            Route::Refused => return self.attempt_failed(now, request_key, Refusal::NoShard, scheduler),
            Route::Shard { shard, hops } => {
                if counted {
                    self.hops_total += hops as u64;
                    self.routed += 1;
                    self.results.hops_max = self.results.hops_max.max(hops as u64);
                    self.series.hops[(hops as usize).min(HOPS_TRACKED)] += 1;
                }
                shard
            }
        };
        let permit = match self.breakers.get_mut(shard as usize) {
            None => None,
            Some(breaker) => match breaker.try_acquire(now) {
                Some(permit) => Some(permit),
                None => {
                    self.router.release(shard);
                    return self.attempt_failed(now, request_key, Refusal::Breaker, scheduler);
                }
            },
        };
        let s = &self.shards[shard as usize];
        let can_start = s.busy < self.p.servers && s.stalls == 0;
        if !can_start && s.queue.len() >= self.p.queue_capacity as usize {
            self.router.release(shard);
            if let Some(permit) = permit {
                self.breakers[shard as usize].record(now, permit, Outcome::Overloaded, 0);
            }
            return self.attempt_failed(now, request_key, Refusal::QueueFull, scheduler);
        }
        let attempt = self.attempts.insert(Attempt {
            request: request_key,
            shard,
            service_started: 0,
            abandoned: false,
            permit,
            sent_at: now,
        });
        self.requests.get_mut(request_key).expect("live").attempt = Some(attempt);
        self.in_flight += 1;
        if can_start {
            self.start(now, shard, attempt, scheduler);
        } else {
            self.shards[shard as usize].queue.push_back(attempt);
            self.queued += 1;
        }
        self.check(shard);
    }

    fn start(&mut self, now: Nanos, shard: u32, attempt: SlabKey, scheduler: &mut Scheduler<Event>) {
        self.shards[shard as usize].busy += 1;
        self.attempts.get_mut(attempt).expect("live attempt").service_started = now;
        let service = self.service_time(shard);
        scheduler.after(service, Event::Done { shard, attempt });
    }

    /// Starts waiting attempts on free servers of `shard`.
    fn drain_queue(&mut self, now: Nanos, shard: u32, scheduler: &mut Scheduler<Event>) {
        loop {
            let s = &mut self.shards[shard as usize];
            if s.busy >= self.p.servers || s.stalls > 0 {
                return;
            }
            let next =
                if self.p.discipline == QueueDiscipline::Lifo { s.queue.pop_back() } else { s.queue.pop_front() };
            let Some(attempt) = next else { return };
            self.queued -= 1;
            let (abandoned, sent_at) = self.attempts.get(attempt).map_or((true, now), |a| (a.abandoned, a.sent_at));
            let queue_empty_after = self.shards[shard as usize].queue.is_empty();
            let codel_drop = self.shards[shard as usize]
                .codel
                .as_mut()
                .is_some_and(|codel| codel.should_drop(now, now - sent_at, queue_empty_after));
            if codel_drop || (abandoned && self.p.drop_abandoned) {
                let dropped = self.attempts.remove(attempt);
                self.in_flight -= 1;
                self.router.release(shard);
                if let Some(dropped) = dropped.filter(|a| codel_drop && !a.abandoned) {
                    // The server answers an error at once: the client may retry.
                    if let Some(permit) = dropped.permit {
                        self.breakers[shard as usize].record(now, permit, Outcome::Overloaded, now - dropped.sent_at);
                    }
                    self.attempt_failed(now, dropped.request, Refusal::CoDel, scheduler);
                }
                continue;
            }
            self.start(now, shard, attempt, scheduler);
        }
    }

    fn done(&mut self, now: Nanos, shard: u32, attempt_key: SlabKey, scheduler: &mut Scheduler<Event>) {
        let Some(attempt) = self.attempts.remove(attempt_key) else { return };
        self.shards[shard as usize].busy -= 1;
        self.in_flight -= 1;
        self.router.release(shard);
        let service = now - attempt.service_started;
        let shard_up = self.ring.is_healthy(shard);
        if attempt.abandoned || !shard_up {
            if self.counted(now) {
                self.wasted_ns += service as u128;
            }
        } else if let Some(request) = self.requests.remove(attempt.request) {
            let mut request = request;
            request.timer.cancel();
            if let Some(permit) = attempt.permit {
                self.breakers[shard as usize].record(now, permit, Outcome::Success, now - attempt.sent_at);
            }
            self.p.budget.on_outcome(now, true);
            if request.counted {
                self.results.successes += 1;
                self.latency.record(now - request.arrived_at);
            }
            self.request_ended(request.closed_loop, scheduler);
            let bucket = self.bucket_of(now);
            if let Some(b) = self.series.successes.get_mut(bucket) {
                *b += 1;
            }
        }
        self.drain_queue(now, shard, scheduler);
        self.check(shard);
    }

    fn timeout(&mut self, now: Nanos, request_key: SlabKey, ticket: TimerTicket, scheduler: &mut Scheduler<Event>) {
        let Some(request) = self.requests.get_mut(request_key) else { return };
        if !request.timer.fire(ticket) {
            return;
        }
        let counted = request.counted;
        if let Some(attempt_key) = request.attempt.take() {
            if let Some(attempt) = self.attempts.get_mut(attempt_key) {
                // The server keeps the attempt: its work is now wasted.
                attempt.abandoned = true;
                if let Some(permit) = attempt.permit.take() {
                    let shard = attempt.shard;
                    self.breakers[shard as usize].record(now, permit, Outcome::Timeout, self.p.attempt_timeout);
                }
            }
        }
        if counted {
            self.results.timeouts += 1;
        }
        self.p.budget.on_outcome(now, false);
        self.retry_or_fail(now, request_key, scheduler);
    }

    fn attempt_failed(&mut self, now: Nanos, request_key: SlabKey, why: Refusal, scheduler: &mut Scheduler<Event>) {
        let Some(request) = self.requests.get_mut(request_key) else { return };
        request.timer.cancel();
        request.attempt = None;
        if request.counted {
            match why {
                Refusal::QueueFull => self.results.refused_queue_full += 1,
                Refusal::Breaker => self.results.refused_breaker += 1,
                Refusal::NoShard => self.results.refused_no_shard += 1,
                Refusal::CoDel => self.results.dropped_codel += 1,
            }
        }
        self.p.budget.on_outcome(now, false);
        self.retry_or_fail(now, request_key, scheduler);
    }

    fn retry_or_fail(&mut self, now: Nanos, request_key: SlabKey, scheduler: &mut Scheduler<Event>) {
        let request = *self.requests.get(request_key).expect("live request");
        let (max_attempts, backoff) = match self.p.retry {
            RetryPolicy::None => (1, None),
            RetryPolicy::Naive { max_attempts } => (max_attempts, None),
            RetryPolicy::Backoff { max_attempts, backoff } => (max_attempts, Some(backoff)),
        };
        if request.attempts < max_attempts {
            let active = self.in_flight as u32;
            if self.p.budget.try_retry(now, active, self.queued as u32, &mut self.retry_rng) {
                match backoff {
                    None => scheduler.after(0, Event::Send { request: request_key }),
                    Some(backoff) => {
                        let delay =
                            backoff.delay(request.attempts - 1, request.previous_backoff, None, &mut self.retry_rng);
                        self.requests.get_mut(request_key).expect("live").previous_backoff = delay;
                        scheduler.after(delay, Event::Send { request: request_key });
                    }
                }
                return;
            }
            if request.counted {
                self.results.retries_denied_by_budget += 1;
            }
        }
        self.requests.remove(request_key);
        if request.counted {
            self.results.failed += 1;
        }
        self.request_ended(request.closed_loop, scheduler);
    }

    fn fault(&mut self, now: Nanos, index: u32, starting: bool, scheduler: &mut Scheduler<Event>) {
        let fault = self.p.faults[index as usize];
        match fault.kind {
            FaultKind::Surge { multiplier } => {
                self.rate_factor = if starting { self.rate_factor * multiplier } else { self.rate_factor / multiplier };
                // Poisson arrivals are memoryless: redraw the next one at the new rate.
                self.arrival_generation = self.arrival_generation.wrapping_add(1);
                let next = self.interarrival();
                scheduler.after(next, Event::Arrival { generation: self.arrival_generation });
            }
            FaultKind::Brownout { shard, slowdown } => {
                let s = &mut self.shards[shard as usize];
                if slowdown.is_infinite() {
                    if starting {
                        s.stalls += 1;
                    } else {
                        s.stalls -= 1;
                    }
                } else {
                    s.slowdown = if starting { s.slowdown * slowdown } else { s.slowdown / slowdown };
                }
                if !starting {
                    self.drain_queue(now, shard, scheduler);
                }
            }
            FaultKind::ShardFailure { shard } => {
                self.ring.set_healthy(shard, !starting);
                if starting {
                    // Queued attempts are lost; their clients see a refusal and may retry elsewhere.
                    while let Some(attempt_key) = self.shards[shard as usize].queue.pop_front() {
                        self.queued -= 1;
                        self.in_flight -= 1;
                        self.router.release(shard);
                        if let Some(attempt) = self.attempts.remove(attempt_key) {
                            if !attempt.abandoned {
                                self.attempt_failed(now, attempt.request, Refusal::NoShard, scheduler);
                            }
                        }
                    }
                }
            }
            FaultKind::LatencySpike { factor } => {
                self.spike_factor = if starting { self.spike_factor * factor } else { self.spike_factor / factor };
            }
        }
    }

    fn check(&self, shard: u32) {
        let s = &self.shards[shard as usize];
        debug_assert!(s.busy <= self.p.servers, "shard {shard}: more busy servers than servers");
        debug_assert!(s.queue.len() <= self.p.queue_capacity as usize, "shard {shard}: queue over capacity");
        debug_assert_eq!(self.router.total() as u64, self.in_flight, "router load out of step with attempts");
    }

    /// Closes the integrals and computes the results.
    pub fn finish(&mut self, now: Nanos, events: u64) -> (ClusterResults, ClusterSeries) {
        self.advance(now);
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
        (*r, std::mem::take(&mut self.series))
    }
}

#[derive(Clone, Copy, Debug)]
enum Refusal {
    QueueFull,
    Breaker,
    NoShard,
    CoDel,
}

/// Recovery after the cluster's last fault (see [`crate::measurement::recovery::recovery_time`]).
pub fn recovery_time(queued_area: &[u128], p: &ClusterParams) -> Option<Nanos> {
    let windows: Vec<(Nanos, Nanos)> = p.faults.iter().map(|f| (f.start, f.start.saturating_add(f.duration))).collect();
    crate::measurement::recovery::recovery_time(queued_area, p.bucket, p.warmup, &windows, p.recovery_hold)
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
                let next = self.interarrival();
                scheduler.after(next, Event::Arrival { generation });
                self.new_request(now, false, scheduler);
            }
            Event::UserRequest => self.new_request(now, true, scheduler),
            Event::Send { request } => self.send(now, request, scheduler),
            Event::Done { shard, attempt } => self.done(now, shard, attempt, scheduler),
            Event::Timeout { request, ticket } => self.timeout(now, request, ticket, scheduler),
            Event::FaultStart { index } => self.fault(now, index, true, scheduler),
            Event::FaultEnd { index } => self.fault(now, index, false, scheduler),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::time::secs_to_nanos;
    use crate::measurement::theory::erlang_c;
    use crate::policy::retry_budget::RatioBudget;

    const MS: Nanos = 1_000_000;

    fn base() -> ClusterParams {
        ClusterParams {
            arrival_rate_per_s: 1_200.0,
            keys: 10_000,
            zipf_s: 0.0,
            hot_share: 0.0,
            closed_loop_users: 0,
            think_time: 0,
            attempt_timeout: 50 * MS,
            shards: 4,
            vnodes: 150,
            capacity_factor: 1.25,
            hash: RingHash::Fast,
            servers: 4,
            service: ServiceTime::Exponential { mean: 10 * MS },
            queue_capacity: 200,
            discipline: QueueDiscipline::Fifo,
            drop_abandoned: false,
            retry: RetryPolicy::None,
            budget: RetryBudget::Unlimited,
            breaker: None,
            faults: Vec::new(),
            warmup: secs_to_nanos(1.0),
            horizon: secs_to_nanos(10.0),
            bucket: 10 * MS,
            recovery_hold: 200 * MS,
        }
    }

    fn run(p: &ClusterParams, replica: u64) -> (ClusterResults, ClusterSeries, LatencyHistogram) {
        let mut histogram = LatencyHistogram::new();
        let (results, series) = Cluster::new(p.clone(), 7, replica, &mut histogram).run();
        (results, series, histogram)
    }

    #[test]
    fn one_shard_without_timeouts_is_an_mmc_queue() {
        let p = ClusterParams {
            arrival_rate_per_s: 3_200.0,
            shards: 1,
            service: ServiceTime::Exponential { mean: MS },
            attempt_timeout: secs_to_nanos(1e6),
            queue_capacity: 1_000_000,
            capacity_factor: f64::INFINITY,
            horizon: secs_to_nanos(60.0),
            ..base()
        };
        let theory = erlang_c(3_200.0, 1_000.0, 4).unwrap();
        let means: Vec<f64> = (0..6).map(|r| run(&p, r).2.hdr().mean() / 1e9).collect();
        let mean = means.iter().sum::<f64>() / means.len() as f64;
        assert!(
            (mean / theory.response_mean_s - 1.0).abs() < 0.03,
            "W = {mean} vs Erlang C {}",
            theory.response_mean_s
        );
    }

    #[test]
    fn littles_law_holds_for_the_whole_cluster() {
        let p = ClusterParams { attempt_timeout: secs_to_nanos(100.0), ..base() };
        let (r, series, histogram) = run(&p, 0);
        let from = (p.warmup / p.bucket) as usize;
        let area: u128 = series.in_flight_area[from..].iter().sum();
        let window = (p.horizon - p.warmup) as f64;
        let l = area as f64 / window;
        let little = r.goodput_rps * histogram.hdr().mean() / 1e9;
        assert!((l / little - 1.0).abs() < 0.02, "L = {l}, λW = {little}");
        assert_eq!(r.timeouts, 0);
        assert!(r.success_ratio > 0.999);
    }

    #[test]
    fn a_surge_multiplies_arrivals_inside_its_window_only() {
        let surge = Fault {
            kind: FaultKind::Surge { multiplier: 5.0 },
            start: secs_to_nanos(4.0),
            duration: secs_to_nanos(1.0),
        };
        let p = ClusterParams { faults: vec![surge], ..base() };
        let (_, series, _) = run(&p, 0);
        let per_second = |from: usize, to: usize| {
            series.attempts[from..to].iter().sum::<u64>() as f64 / ((to - from) as f64 / 100.0)
        };
        let before = per_second(200, 400);
        let during = per_second(400, 500);
        assert!((before / 1_200.0 - 1.0).abs() < 0.05, "{before}");
        assert!(during > 4.0 * before, "surge: {during} vs {before}");
    }

    #[test]
    fn a_stalled_shard_builds_a_queue_and_a_failed_shard_fails_over() {
        let window = (secs_to_nanos(4.0), secs_to_nanos(0.5));
        let stall = Fault {
            kind: FaultKind::Brownout { shard: 1, slowdown: f64::INFINITY },
            start: window.0,
            duration: window.1,
        };
        let failure = Fault { kind: FaultKind::ShardFailure { shard: 1 }, start: window.0, duration: window.1 };
        // Plain consistent hashing: with bounded loads the router would already steer
        // around the stalled shard once it reached its cap.
        let plain = ClusterParams { capacity_factor: f64::INFINITY, ..base() };
        let (stalled, stalled_series, _) = run(&ClusterParams { faults: vec![stall], ..plain.clone() }, 0);
        let (failed_over, _, _) = run(&ClusterParams { faults: vec![failure], ..plain.clone() }, 0);
        let (bounded, _, _) = run(&ClusterParams { faults: vec![stall], ..base() }, 0);
        assert!(
            bounded.failed * 2 < stalled.failed,
            "bounded loads route around a stall: {} vs {}",
            bounded.failed,
            stalled.failed
        );
        let (healthy, healthy_series, _) = run(&base(), 0);
        let peak =
            |s: &ClusterSeries| s.queued_area[400..450].iter().max().copied().unwrap_or(0) as f64 / (10 * MS) as f64;
        assert!(peak(&stalled_series) > 100.0, "the stalled shard's queue fills: {}", peak(&stalled_series));
        assert!(peak(&healthy_series) < 20.0);
        assert!(stalled.timeouts > 100, "stalled requests time out");
        // Failing the shard moves its keys: far fewer requests are lost than in the stall.
        assert!(failed_over.failed * 2 < stalled.failed, "{} vs {}", failed_over.failed, stalled.failed);
        assert!(healthy.failed < failed_over.failed, "{} vs {}", healthy.failed, failed_over.failed);
    }

    #[test]
    fn a_latency_spike_slows_every_shard() {
        let spike = Fault {
            kind: FaultKind::LatencySpike { factor: 2.0 },
            start: secs_to_nanos(1.0),
            duration: secs_to_nanos(9.0),
        };
        let p = ClusterParams {
            faults: vec![spike],
            attempt_timeout: secs_to_nanos(100.0),
            arrival_rate_per_s: 400.0,
            ..base()
        };
        let (_, _, slow) = run(&p, 0);
        let (_, _, normal) =
            run(&ClusterParams { attempt_timeout: secs_to_nanos(100.0), arrival_rate_per_s: 400.0, ..base() }, 0);
        let ratio = slow.hdr().mean() / normal.hdr().mean();
        assert!(ratio > 1.9 && ratio < 2.6, "{ratio}");
    }

    /// The seed's story: a short latency spike, then naive retries keep the cluster
    /// full of wasted work long after the trigger is gone; a budgeted, jittered client
    /// lets it recover.
    fn storm(retry: RetryPolicy, budget: RetryBudget) -> ClusterResults {
        let spike = Fault {
            kind: FaultKind::LatencySpike { factor: 3.0 },
            start: secs_to_nanos(3.0),
            duration: secs_to_nanos(0.5),
        };
        let p = ClusterParams { faults: vec![spike], retry, budget, horizon: secs_to_nanos(12.0), ..base() };
        run(&p, 0).0
    }

    #[test]
    fn naive_retries_turn_a_short_spike_into_a_metastable_outage() {
        let naive = storm(RetryPolicy::Naive { max_attempts: 4 }, RetryBudget::Unlimited);
        let budgeted = storm(
            RetryPolicy::Backoff {
                max_attempts: 4,
                backoff: Backoff::FullJitter { base: 10 * MS, cap: secs_to_nanos(1.0) },
            },
            RetryBudget::Ratio(RatioBudget::new(0.1, 100.0, 10.0)),
        );
        assert!(!naive.recovered, "naive: {naive:?}");
        assert!(naive.amplification_ratio > 2.5, "naive amplification {}", naive.amplification_ratio);
        assert!(budgeted.recovered, "budgeted: {budgeted:?}");
        assert!(budgeted.recovery_s < 1.5, "budgeted recovery {}", budgeted.recovery_s);
        assert!(budgeted.amplification_ratio < 1.2);
        assert!(budgeted.goodput_rps > 2.0 * naive.goodput_rps);
        assert!(naive.wasted_work_ratio > 0.7 && budgeted.wasted_work_ratio < 0.3, "{naive:?} {budgeted:?}");
    }

    #[test]
    fn recovery_detection_uses_baseline_band_and_hold() {
        let fault = Fault { kind: FaultKind::Surge { multiplier: 2.0 }, start: 300 * MS, duration: 100 * MS };
        let p = ClusterParams {
            warmup: 100 * MS,
            horizon: secs_to_nanos(1.0),
            faults: vec![fault],
            recovery_hold: 50 * MS,
            ..base()
        };
        let at = |depth: u128| depth * p.bucket as u128;
        // Baseline 4 (buckets 10..30), band 8; the queue is high until bucket 55, dips
        // once at 47 (shorter than the hold), and stays low from 55 on.
        let mut area: Vec<u128> = (0..100).map(|b| at(if (10..30).contains(&b) { 4 } else { 0 })).collect();
        (30..55).for_each(|b| area[b] = at(50));
        area[47] = at(3);
        assert_eq!(recovery_time(&area, &p), Some(150 * MS), "recovered at 550 ms, 150 ms after the fault ends");
        (55..100).step_by(4).for_each(|b| area[b] = at(9));
        assert_eq!(recovery_time(&area, &p), None, "never five quiet buckets in a row");
        let calm = ClusterParams { faults: vec![], ..p.clone() };
        assert_eq!(recovery_time(&area, &calm), Some(0));
    }

    #[test]
    fn zipf_keys_concentrate_and_bounded_load_spreads_them() {
        let skewed = |c: f64| ClusterParams {
            zipf_s: 1.2,
            keys: 1_000,
            capacity_factor: c,
            attempt_timeout: secs_to_nanos(100.0),
            queue_capacity: 100_000,
            ..base()
        };
        let plain = run(&skewed(f64::INFINITY), 0).0;
        let bounded = run(&skewed(1.25), 0).0;
        assert!(plain.peak_shard_load_ratio > 1.8, "hot keys pile onto one shard: {}", plain.peak_shard_load_ratio);
        assert!(bounded.peak_shard_load_ratio < 1.3, "{}", bounded.peak_shard_load_ratio);
        assert!(bounded.hops_mean > 0.0 && plain.hops_mean == 0.0);
    }

    #[test]
    fn a_closed_loop_population_obeys_the_interactive_response_time_law() {
        // N users, think time Z, response time R: throughput X = N / (R + Z).
        let p = ClusterParams {
            arrival_rate_per_s: 0.0,
            closed_loop_users: 200,
            think_time: 100 * MS,
            attempt_timeout: secs_to_nanos(100.0),
            queue_capacity: 100_000,
            horizon: secs_to_nanos(30.0),
            ..base()
        };
        let (r, _, histogram) = run(&p, 0);
        let response_s = histogram.hdr().mean() / 1e9;
        let law = 200.0 / (response_s + 0.1);
        assert!((r.goodput_rps / law - 1.0).abs() < 0.02, "X = {} vs N/(R+Z) = {law}", r.goodput_rps);
        assert!(r.goodput_rps > 1_000.0, "the users keep the cluster busy: {}", r.goodput_rps);
    }

    #[test]
    fn a_hot_tenant_concentrates_load_unless_loads_are_bounded() {
        let hot = |c: f64| ClusterParams {
            hot_share: 0.3,
            capacity_factor: c,
            attempt_timeout: secs_to_nanos(100.0),
            queue_capacity: 100_000,
            arrival_rate_per_s: 800.0,
            ..base()
        };
        let plain = run(&hot(f64::INFINITY), 0).0;
        let bounded = run(&hot(1.25), 0).0;
        assert!(plain.peak_shard_load_ratio > 1.5, "{}", plain.peak_shard_load_ratio);
        assert!(bounded.peak_shard_load_ratio < plain.peak_shard_load_ratio * 0.8, "{}", bounded.peak_shard_load_ratio);
    }

    #[test]
    fn codel_drops_from_a_standing_queue_and_keeps_latency_low() {
        let overload = |discipline: QueueDiscipline| ClusterParams {
            arrival_rate_per_s: 1_800.0, // above the 1,600/s the cluster serves
            attempt_timeout: secs_to_nanos(100.0),
            queue_capacity: 100_000,
            discipline,
            ..base()
        };
        let (fifo, _, fifo_latency) = run(&overload(QueueDiscipline::Fifo), 0);
        let codel = QueueDiscipline::CoDel(CoDelConfig { target: 5 * MS, interval: 100 * MS });
        let (dropped, _, codel_latency) = run(&overload(codel), 0);
        assert_eq!(fifo.dropped_codel, 0);
        assert!(dropped.dropped_codel > 1_000, "{}", dropped.dropped_codel);
        assert!(codel_latency.hdr().mean() * 5.0 < fifo_latency.hdr().mean(), "CoDel keeps the queue short");
    }

    #[test]
    fn replicas_are_deterministic() {
        let p = ClusterParams { retry: RetryPolicy::Naive { max_attempts: 3 }, ..base() };
        assert_eq!(run(&p, 3).0, run(&p, 3).0);
        assert_ne!(run(&p, 3).0, run(&p, 4).0);
    }
}
