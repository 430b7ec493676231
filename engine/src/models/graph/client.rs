//! The client side of every call: entry requests, attempts, per-attempt timeouts and
//! deadlines, retries with backoff and budgets, the breaker, hedges, load balancing,
//! fallbacks, and cancelling what a caller no longer waits for.

use crate::components::ring::{RingHash, Route};
use crate::kernel::rng::RngStream;
use crate::kernel::sim::Scheduler;
use crate::kernel::slab::SlabKey;
use crate::kernel::time::Nanos;
use crate::kernel::timer::{TimerSlot, TimerTicket};
use crate::measurement::ending::Ending;
use crate::policy::breaker::Permit;
use crate::policy::classify::Outcome;

use super::model::{measured_s, Graph};
use super::params::{Balance, Cause, Failure, WorkloadArrivals};
use super::pool::Connection;
use super::results::EntryResults;
use super::state::{Answer, Attempt, Call, Event, Lag, NO_POOL, NO_SITE, PROBE_EDGE};

/// How a call ended, as its caller sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CallOutcome {
    Success,
    /// The callee answered, degraded (a fallback somewhere below, for this cause).
    Degraded(Cause),
    /// The call failed for this cause and its edge's fallback answered.
    Fallback(Cause),
    Failed(Failure, Cause),
}

impl CallOutcome {
    /// How the caller saw it end: a fallback's answer (here or below) is degraded.
    fn ending(self) -> Ending {
        match self {
            CallOutcome::Success => Ending::Ok,
            CallOutcome::Degraded(_) | CallOutcome::Fallback(_) => Ending::Degraded,
            CallOutcome::Failed(..) => Ending::Failed,
        }
    }
}

/// Picks one of `count` candidates for `edge` by `balance` (not consistent hashing) and
/// returns its instance's local index, `slot(k)` for candidate k; `instances` start at
/// the callee's first. An instance the edge's outlier detection ejected, or `health`
/// marked unhealthy, is skipped: a pick moves on to the next usable candidate (least
/// outstanding compares only those), and with none usable the pick stands.
fn pick(
    balance: Balance,
    edge: &mut super::entities::EdgeState,
    health: Option<&crate::policy::health::HealthChecker>,
    instances: &[super::entities::Instance],
    now: Nanos,
    count: u32,
    slot: impl Fn(u32) -> u32,
) -> Option<u32> {
    if count == 0 {
        return None;
    }
    let filtered = edge.outlier.is_some() || health.is_some();
    let outlier = &mut edge.outlier;
    let mut usable = |k: u32| {
        let i = slot(k);
        health.is_none_or(|h| h.usable(i)) && !outlier.as_mut().is_some_and(|o| o.is_ejected(now, i))
    };
    let present = |k: u32| instances[slot(k) as usize].present;
    let chosen = match balance {
        Balance::RoundRobin => {
            let k = edge.round_robin % count;
            edge.round_robin = edge.round_robin.wrapping_add(1);
            k
        }
        Balance::Random => edge.routing_rng.below(count as u64) as u32,
        Balance::LeastOutstanding if filtered => (0..count)
            .filter(|&k| usable(k))
            .min_by_key(|&k| present(k))
            .unwrap_or_else(|| (0..count).min_by_key(|&k| present(k)).expect("candidates > 0")),
        Balance::LeastOutstanding => (0..count).min_by_key(|&k| present(k)).expect("candidates > 0"),
        Balance::PowerOfTwoChoices => {
            let a = edge.routing_rng.below(count as u64) as u32;
            let b = edge.routing_rng.below(count as u64) as u32;
            if present(b) < present(a) {
                b
            } else {
                a
            }
        }
        Balance::ConsistentHash { .. } => unreachable!("consistent hashing is routed by its ring"),
    };
    let chosen = if filtered && count > 1 {
        (0..count).map(|k| (chosen + k) % count).find(|&k| usable(k)).unwrap_or(chosen)
    } else {
        chosen
    };
    Some(slot(chosen))
}

/// Counts one ended call in `results` — an entry point's or a call site's: its
/// outcome, its latency (a success's also apart), and the root cause where `results` keeps causes (an
/// entry point's; a call site's tables are empty).
fn count_outcome(results: &mut EntryResults, outcome: CallOutcome, latency: Nanos) {
    results.latency_all.record(latency);
    match outcome {
        CallOutcome::Success => {
            results.successes += 1;
            results.latency.record(latency);
            results.latency_sum_s += latency as f64 / crate::kernel::time::NANOS_PER_SEC as f64;
        }
        CallOutcome::Degraded(cause) | CallOutcome::Fallback(cause) => {
            results.degraded += 1;
            if results.keeps_causes {
                results.degraded_by_service.add(cause.service);
            }
        }
        CallOutcome::Failed(failure, cause) => {
            results.failed[failure.index()] += 1;
            if results.keeps_causes {
                results.failed_by_cause.add(cause.index() as u32);
                results.caused_by.add(cause.culprit);
            }
        }
    }
}

fn pick_criticality(shares: &[f64; 4], rng: &mut RngStream) -> u8 {
    let u = rng.uniform01();
    let mut total = 0.0;
    for (level, share) in shares.iter().enumerate() {
        total += share;
        if u < total {
            return level as u8;
        }
    }
    3
}

/// An attempt that did not go: its call, the pool whose connection it held
/// (`NO_POOL`: none), and whether it was a hedge and a granted retry or hedge.
#[derive(Clone, Copy)]
struct Unsent {
    call: SlabKey,
    pool: u32,
    hedge: bool,
    granted: bool,
}

impl Attempt {
    /// The attempt of `call` (`c`) sent at `now` to `instance` (by way of `routed`):
    /// a hedge or not, `granted` a hedge's budget, with its timeout's slot and the
    /// breaker's permit; blamed on service `to` for its time until something else is.
    #[inline]
    fn sent(
        now: Nanos,
        (call, c): (SlabKey, &Call),
        (instance, routed): (u32, bool),
        (hedge, granted): (bool, bool),
        (timer, permit): (TimerSlot, Option<Permit>),
        to: u32,
    ) -> Attempt {
        Attempt {
            call,
            edge: c.edge,
            instance,
            endpoint: c.endpoint,
            sent: now,
            deadline: c.deadline,
            criticality: c.criticality,
            depth: c.depth,
            key: c.key,
            counted: c.counted,
            hedge,
            granted,
            timer,
            permit,
            routed,
            job: None,
            caller_waiting: true,
            in_flight: true,
            next: c.first_attempt,
            cause: None,
            time_culprit: to,
        }
    }
}

impl Graph<'_> {
    pub(super) fn arrival(&mut self, now: Nanos, w: usize, scheduler: &mut Scheduler<Event>) {
        // A replayed trace's key belongs to this arrival: read it before the replay moves on.
        let replayed = self.workloads[w].load.as_ref().and_then(|load| load.replayed_key());
        if let WorkloadArrivals::Open(_) = self.p.workloads[w].arrivals {
            if let Some(gap) = self.next_gap(w, now) {
                scheduler.after(gap, Event::Arrival { workload: w as u32 });
            }
        }
        let workload = &self.p.workloads[w];
        let state = &mut self.workloads[w];
        let criticality = pick_criticality(&workload.criticality, &mut state.mix_rng);
        let key = match (replayed, &workload.zipf) {
            (Some(key), _) => key,
            (None, Some(zipf)) => zipf.sample(&mut state.mix_rng),
            (None, None) if workload.keys > 1 => state.mix_rng.below(workload.keys),
            (None, None) => 0,
        };
        let counted = now >= self.p.warmup;
        if counted {
            state.results.offered += 1;
        }
        let deadline = workload.deadline.map_or(Nanos::MAX, |d| now.saturating_add(d));
        let call = self.calls.insert(Call::new(
            None,
            w as u32,
            workload.edge,
            workload.endpoint,
            deadline,
            now,
            criticality,
            0,
            key,
            counted,
        ));
        if let Some(tracer) = self.tracer.as_deref_mut() {
            tracer.call_started(call, now, workload.endpoint, crate::measurement::trace::NONE, counted);
        }
        self.begin_call(now, call, scheduler);
    }

    /// A call's first attempt.
    pub(super) fn begin_call(&mut self, now: Nanos, call: SlabKey, scheduler: &mut Scheduler<Event>) {
        let c = self.calls.get(call).expect("live call");
        let edge = &mut self.edges[c.edge as usize];
        if c.counted {
            edge.results.calls += 1;
        }
        edge.budget.on_request(now);
        self.send_attempt(now, call, false, false, None, scheduler);
    }

    /// Sends one attempt of `call` (a retry or hedge already granted, if `granted`).
    /// On an edge with a pool it first needs a connection: `held` is the pool whose
    /// connection a waiter was handed, else (`None`) the pool is asked and the attempt
    /// may wait or be refused there. The deadline, the breaker and the balancer may
    /// still stop it (a connection then goes back). One function, not two: it runs per
    /// attempt, and the pool's branch costs nothing where there is none.
    pub(super) fn send_attempt(
        &mut self,
        now: Nanos,
        call: SlabKey,
        hedge: bool,
        granted: bool,
        held: Option<u32>,
        scheduler: &mut Scheduler<Event>,
    ) {
        let c = *self.calls.get(call).expect("live call");
        let e = c.edge as usize;
        let pool = match held {
            Some(pool) => pool,
            None if now < c.deadline && self.edges[e].first_pool != NO_POOL => {
                match self.connect(now, call, hedge, granted, scheduler) {
                    Connection::Held(pool) => pool,
                    Connection::NotNow => return,
                }
            }
            None => NO_POOL,
        };
        let unsent = Unsent { call, pool, hedge, granted };
        if now >= c.deadline {
            return self.past_deadline(now, &c, unsent, scheduler);
        }
        let permit = match self.edges[e].breaker.as_mut() {
            None => None,
            Some(breaker) => match breaker.try_acquire(now) {
                Some(permit) => Some(permit),
                None => return self.breaker_refused(now, &c, unsent, scheduler),
            },
        };
        let Some((instance, routed)) = self.choose_instance(now, e, c.key) else {
            return self.no_instance(now, &c, unsent, permit, scheduler);
        };
        let timeout = self.timeout_for(now, e, c.deadline);
        let mut timer = TimerSlot::default();
        let ticket = (timeout != Nanos::MAX).then(|| timer.arm());
        let to = self.p.edges[e].to;
        let attempt = self.attempts.insert(Attempt::sent(
            now,
            (call, &c),
            (instance, routed),
            (hedge, granted),
            (timer, permit),
            to,
        ));
        let edge = &mut self.edges[e];
        edge.active += 1;
        if c.counted {
            edge.results.attempts += 1;
            if hedge {
                edge.results.hedges += 1;
            } else if c.tries > 0 {
                edge.results.retries += 1;
            }
        }
        let partition = edge.partition;
        let error_rate = edge.error_rate;
        let errored = error_rate > 0.0 && edge.client_rng.bernoulli(error_rate);
        self.call_sent(now, call, attempt, instance, hedge);
        if let Some(ticket) = ticket {
            self.arm_timeout(now, e, timeout, attempt, ticket, scheduler);
        }
        self.put_on_network(e, attempt, (partition, errored), scheduler);
        self.schedule_next_hedge(e, call, scheduler);
    }

    /// The call's side of sending `attempt` to `instance`: it heads the call's
    /// attempts and is outstanding; a try (not a hedge) counts and restarts the
    /// primary's clock.
    #[inline]
    fn call_sent(&mut self, now: Nanos, call: SlabKey, attempt: SlabKey, instance: u32, hedge: bool) {
        let c = self.calls.get_mut(call).expect("live call");
        c.first_attempt = Some(attempt);
        c.outstanding += 1;
        if !hedge {
            c.tries += 1;
            c.primary_sent = now;
        }
        if let Some(tracer) = self.tracer.as_deref_mut() {
            let number = if hedge { c.hedges } else { c.tries };
            tracer.attempt_sent(attempt, call, now, instance, number, hedge);
        }
    }

    /// The attempt leaves over edge `e`: lost in a partition (only its timeout ends
    /// it), refused at once by a fail-fast one, answered with an injected error, or on
    /// its way to the instance after the network's delay.
    #[inline]
    fn put_on_network(
        &mut self,
        e: usize,
        attempt: SlabKey,
        (partition, errored): (Option<bool>, bool),
        scheduler: &mut Scheduler<Event>,
    ) {
        match partition {
            Some(false) => self.attempts.get_mut(attempt).expect("live").in_flight = false,
            Some(true) => scheduler.after(0, Event::Answered { attempt, answer: Answer::Refused }),
            None if errored => scheduler.after(0, Event::Answered { attempt, answer: Answer::Error }),
            None => {
                let delay = self.network(e);
                scheduler.after(delay, Event::Arrives { attempt });
            }
        }
    }

    /// An attempt's timeout on edge `e` sent at `now`: the edge's own (adaptive, or
    /// fixed), cut to what is left before the call's deadline; `Nanos::MAX` for none.
    #[inline]
    fn timeout_for(&self, now: Nanos, e: usize, deadline: Nanos) -> Nanos {
        let own = match self.edges[e].adaptive_timeout.as_ref() {
            Some(adaptive) => Some(adaptive.timeout()),
            None => self.p.edges[e].timeout,
        };
        own.unwrap_or(Nanos::MAX).min(deadline.saturating_sub(now))
    }

    /// The call's next hedge on edge `e`, if its policy sends one more.
    #[inline]
    fn schedule_next_hedge(&mut self, e: usize, call: SlabKey, scheduler: &mut Scheduler<Event>) {
        if let Some(policy) = self.edges[e].hedge.as_mut() {
            let hedges = self.calls.get(call).expect("live call").hedges;
            if let Some(delay) = policy.delay(hedges) {
                let c = self.calls.get_mut(call).expect("live call");
                let ticket = c.hedge_timer.arm();
                scheduler.after(delay, Event::HedgeDue { call, ticket });
            }
        }
    }

    /// The call's deadline passed before its attempt went: the connection goes back,
    /// and the call fails if nothing else of it is out.
    #[cold]
    #[inline(never)]
    fn past_deadline(&mut self, now: Nanos, c: &Call, unsent: Unsent, scheduler: &mut Scheduler<Event>) {
        let e = c.edge as usize;
        self.release_connection(now, unsent.pool, scheduler);
        if !unsent.hedge && c.outstanding == 0 {
            self.call_failed(now, unsent.call, Failure::Timeout, self.callee(e, Failure::Timeout), scheduler);
        }
    }

    /// The edge's breaker refused the attempt: counted; the connection and a granted
    /// retry go back, and the call fails if nothing else of it is out.
    #[cold]
    #[inline(never)]
    fn breaker_refused(&mut self, now: Nanos, c: &Call, unsent: Unsent, scheduler: &mut Scheduler<Event>) {
        let e = c.edge as usize;
        self.release_connection(now, unsent.pool, scheduler);
        if c.counted {
            self.edges[e].results.breaker_refusals += 1;
        }
        if unsent.granted {
            self.edges[e].budget.retry_finished();
        }
        if !unsent.hedge && c.outstanding == 0 {
            let cause = self.callee(e, Failure::BreakerOpen);
            self.call_failed(now, unsent.call, Failure::BreakerOpen, cause, scheduler);
        }
    }

    /// No instance can take the attempt (every one down on a ring): refused at once;
    /// the breaker's permit, the connection and a granted retry go back.
    #[cold]
    #[inline(never)]
    fn no_instance(
        &mut self,
        now: Nanos,
        c: &Call,
        unsent: Unsent,
        permit: Option<Permit>,
        scheduler: &mut Scheduler<Event>,
    ) {
        let e = c.edge as usize;
        if let (Some(breaker), Some(permit)) = (self.edges[e].breaker.as_mut(), permit) {
            breaker.abandon(permit);
        }
        self.release_connection(now, unsent.pool, scheduler);
        if unsent.granted {
            self.edges[e].budget.retry_finished();
        }
        if !unsent.hedge && c.outstanding == 0 {
            self.calls.get_mut(unsent.call).expect("live call").last_cause = self.callee(e, Failure::Refused);
            self.attempts_exhausted(now, unsent.call, Failure::Refused, scheduler);
        }
    }

    /// Arms `attempt`'s timeout. The edge's own timeout goes into the edge's `TimeoutFifo`: every
    /// attempt along it waits the same time, so the FIFO is in expiry order and the heap
    /// holds one event per edge (its head's) instead of one per attempt — most of which
    /// would pop stale, the attempt answered long before. A timeout shortened by a
    /// deadline goes on the heap.
    fn arm_timeout(
        &mut self,
        now: Nanos,
        e: usize,
        timeout: Nanos,
        attempt: SlabKey,
        ticket: TimerTicket,
        scheduler: &mut Scheduler<Event>,
    ) {
        if Some(timeout) != self.p.edges[e].timeout {
            return scheduler.after(timeout, Event::AttemptTimeout { attempt, ticket });
        }
        if let Some(wake) = self.edges[e].expiries.arm(now + timeout, (attempt, ticket)) {
            scheduler.at(wake.at, Event::EdgeTimeouts { edge: e as u32, ticket: wake.ticket });
        }
    }

    /// Edge `e`'s timeout FIFO woke: fire every timeout due by `now` whose attempt's
    /// caller still waits (answered ones are dropped on the way), then wake for the next
    /// one. So an edge costs about one event per timeout length, plus one per timeout
    /// that fires.
    pub(super) fn edge_timeouts(
        &mut self,
        now: Nanos,
        e: usize,
        ticket: TimerTicket,
        scheduler: &mut Scheduler<Event>,
    ) {
        if !self.edges[e].expiries.woken(ticket) {
            return;
        }
        loop {
            let attempts = &self.attempts;
            let waiting = |&(attempt, ticket): &(SlabKey, TimerTicket)| {
                attempts.get(attempt).is_some_and(|a| a.caller_waiting && a.timer.is_live(ticket))
            };
            let Some((attempt, ticket)) = self.edges[e].expiries.pop_due(now, waiting) else { break };
            self.attempt_timeout(now, attempt, ticket, scheduler);
        }
        if let Some(wake) = self.edges[e].expiries.rearm() {
            scheduler.at(wake.at, Event::EdgeTimeouts { edge: e as u32, ticket: wake.ticket });
        }
    }

    /// Picks an instance of edge `e`'s callee: (its index among all instances, whether
    /// the bounded-load router counts it). Only instances serving are candidates (all
    /// of them unless the callee is autoscaled). An instance the edge's outlier
    /// detection ejected, or the callee's health checks marked unhealthy, is skipped: a
    /// pick moves on to the next usable candidate (least outstanding compares only
    /// those), and with none usable the pick stands.
    #[inline]
    fn choose_instance(&mut self, now: Nanos, e: usize, key: u64) -> Option<(u32, bool)> {
        let to = self.p.edges[e].to as usize;
        if self.edges[e].filters_callee {
            return self.choose_usable_instance(now, e, to);
        }
        // Every instance a candidate, no health to read: the common case, kept as it was.
        let first = self.services[to].first_instance;
        let count = self.p.services[to].instances;
        let edge = &mut self.edges[e];
        let present = |i: u32| self.instances[(first + i) as usize].present;
        let local = match self.p.edges[e].balance {
            Balance::RoundRobin => {
                let i = edge.round_robin % count;
                edge.round_robin = edge.round_robin.wrapping_add(1);
                i
            }
            Balance::Random => edge.routing_rng.below(count as u64) as u32,
            Balance::LeastOutstanding => match edge.outlier.as_mut() {
                None => (0..count).min_by_key(|&i| present(i)).expect("instances > 0"),
                Some(outlier) => (0..count)
                    .filter(|&i| !outlier.is_ejected(now, i))
                    .min_by_key(|&i| present(i))
                    .unwrap_or_else(|| (0..count).min_by_key(|&i| present(i)).expect("instances > 0")),
            },
            Balance::PowerOfTwoChoices => {
                let a = edge.routing_rng.below(count as u64) as u32;
                let b = edge.routing_rng.below(count as u64) as u32;
                if present(b) < present(a) {
                    b
                } else {
                    a
                }
            }
            Balance::ConsistentHash { .. } => {
                let (ring, router) = edge.ring.as_mut().expect("a ring for consistent hashing");
                match router.route(ring, RingHash::Fast.key(key)) {
                    Route::Shard { shard, .. } => return Some((first + shard, true)),
                    Route::Refused => return None,
                }
            }
        };
        let local = match edge.outlier.as_mut() {
            Some(outlier) if count > 1 => {
                (0..count).map(|k| (local + k) % count).find(|&i| !outlier.is_ejected(now, i)).unwrap_or(local)
            }
            _ => local,
        };
        Some((first + local, false))
    }

    /// [`Self::choose_instance`] for a callee that is autoscaled (only its serving
    /// instances are candidates) or health-checked (unhealthy ones are skipped), by any
    /// balancer but consistent hashing (whose ring knows which instances serve and
    /// ignores health).
    #[inline(never)]
    fn choose_usable_instance(&mut self, now: Nanos, e: usize, to: usize) -> Option<(u32, bool)> {
        let first = self.services[to].first_instance;
        let edge = &mut self.edges[e];
        let health = self.services[to].health.as_ref();
        let instances = &self.instances[first as usize..];
        let balance = self.p.edges[e].balance;
        let local = match self.services[to].serving.as_deref() {
            None => pick(balance, edge, health, instances, now, self.p.services[to].instances, |k| k),
            Some(serving) => pick(balance, edge, health, instances, now, serving.len() as u32, |k| serving[k as usize]),
        }?;
        Some((first + local, false))
    }

    /// Tells edge `e`'s outlier detection how an attempt to `instance` ended, and counts
    /// an ejection it causes (and its time inside the measured window).
    fn outlier_learns(&mut self, now: Nanos, e: usize, instance: u32, failed: bool) {
        let Some(outlier) = self.edges[e].outlier.as_mut() else { return };
        let first = self.services[self.p.edges[e].to as usize].first_instance;
        if let Some(ejection) = outlier.record(now, instance - first, failed) {
            let results = &mut self.edges[e].results;
            if ejection.from >= self.p.warmup {
                results.ejections += 1;
            }
            results.ejected_s += measured_s(ejection.from, ejection.until, self.p.warmup, self.p.horizon);
            let ejected = self.edges[e].ejected.as_mut().expect("outlier detection has its series");
            ejected.add_span(ejection.from, ejection.until.min(self.p.horizon));
        }
    }

    /// The caller stops waiting for `attempt` (it timed out, another answer won, or its
    /// call was cancelled). The server may keep working on it unless it cancels.
    fn let_go(&mut self, now: Nanos, attempt: SlabKey, outcome: Option<Outcome>, scheduler: &mut Scheduler<Event>) {
        let a = *self.attempts.get(attempt).expect("live attempt");
        debug_assert!(a.caller_waiting);
        let e = a.edge as usize;
        let edge = &mut self.edges[e];
        edge.active -= 1;
        if a.granted {
            edge.budget.retry_finished();
        }
        if let (Some(breaker), Some(permit)) = (edge.breaker.as_mut(), a.permit) {
            match outcome {
                Some(outcome) => breaker.record(now, permit, outcome, now - a.sent),
                None => breaker.abandon(permit),
            }
        }
        if a.routed {
            let to = self.p.edges[e].to as usize;
            let (_, router) = edge.ring.as_mut().expect("routed on a ring");
            router.release(a.instance - self.services[to].first_instance);
        }
        {
            let a = self.attempts.get_mut(attempt).expect("live attempt");
            a.caller_waiting = false;
            a.timer.cancel();
        }
        if self.edges[e].first_pool != NO_POOL {
            let pool = self.pool_of(e, self.calls.get(a.call).expect("a waited-for attempt's call is live"));
            self.release_connection(now, pool.expect("an edge with pools") as u32, scheduler);
        }
        if let Some(tracer) = self.tracer.as_deref_mut() {
            let outcome = match outcome {
                Some(Outcome::Success) => "success",
                Some(Outcome::Timeout) => "timeout",
                Some(Outcome::Overloaded) => "refused",
                Some(_) => "error",
                None => "let_go",
            };
            tracer.attempt_ended(attempt, now, outcome);
        }
        // Unanswered (timed out, or its call let go): a server that cancels stops the work.
        if matches!(outcome, None | Some(Outcome::Timeout)) {
            let service = self.instances[a.instance as usize].service as usize;
            if let (Some(job), true) = (a.job, self.p.services[service].cancel_abandoned) {
                self.abandon_job(now, job, scheduler);
            }
        }
        self.drop_attempt_if_done(attempt);
    }

    /// Removes an attempt nobody refers to any more: its caller let go, no event or job
    /// refers to it, and its call is over (a live call's attempts stay linked to it).
    pub(super) fn drop_attempt_if_done(&mut self, attempt: SlabKey) {
        let a = self.attempts.get(attempt).expect("live attempt");
        if !a.caller_waiting && !a.in_flight && !self.calls.contains(a.call) {
            self.attempts.remove(attempt);
        }
    }

    /// An attempt's answer reaches its caller.
    pub(super) fn answered(&mut self, now: Nanos, attempt: SlabKey, answer: Answer, scheduler: &mut Scheduler<Event>) {
        let Some(a) = self.attempts.get_mut(attempt) else { return };
        a.in_flight = false;
        let a = *a;
        if !a.caller_waiting {
            self.drop_attempt_if_done(attempt);
            return;
        }
        if a.edge == PROBE_EDGE {
            return self.probe_ended(now, attempt, matches!(answer, Answer::Success | Answer::Degraded));
        }
        let outcome = match answer {
            Answer::Success | Answer::Degraded => Outcome::Success,
            Answer::Refused => Outcome::Overloaded,
            Answer::Error => Outcome::ServerError,
        };
        let e = a.edge as usize;
        self.edges[e].budget.on_outcome(now, outcome == Outcome::Success);
        self.outlier_learns(now, e, a.instance, outcome != Outcome::Success);
        if let Some(adaptive) = self.edges[e].adaptive_timeout.as_mut() {
            // Every answer, failures too: how long the callee takes to answer at all.
            adaptive.answered(now - a.sent);
        }
        if outcome == Outcome::Success {
            // The call's latency since its primary attempt, not the winning attempt's own:
            // attempts that lose to a hedge are never seen, so their own latencies would read
            // the tail short. At the fixed point, the share of calls still waiting at the
            // delay (the calls that hedge) is 1 − q.
            let primary_sent = self.calls.get(a.call).expect("live call").primary_sent;
            if let Some(hedge) = self.edges[e].hedge.as_mut() {
                hedge.observe(now - primary_sent);
            }
        }
        self.let_go(now, attempt, Some(outcome), scheduler);
        let c = self.calls.get_mut(a.call).expect("a waiting attempt's call is live");
        c.outstanding -= 1;
        let counted = c.counted;
        match answer {
            Answer::Success | Answer::Degraded => {
                if a.hedge && counted {
                    self.edges[e].results.hedge_wins += 1;
                }
                let outcome = match answer {
                    Answer::Success => CallOutcome::Success,
                    _ => CallOutcome::Degraded(a.cause.unwrap_or_else(|| self.callee(e, Failure::Error))),
                };
                let c = self.calls.get(a.call).expect("live call");
                let lag = Self::call_lag(now, c, a.sent, a.time_culprit);
                self.call_complete(now, a.call, outcome, lag, scheduler);
            }
            // A partition that fails fast or an edge's error fault answers without a
            // cause: the callee is where it failed.
            Answer::Refused => {
                let cause = a.cause.unwrap_or_else(|| self.callee(e, Failure::Refused));
                self.attempt_failed(now, a.call, Failure::Refused, cause, scheduler)
            }
            Answer::Error => {
                let cause = a.cause.unwrap_or_else(|| self.callee(e, Failure::Error));
                self.attempt_failed(now, a.call, Failure::Error, cause, scheduler)
            }
        }
    }

    pub(super) fn attempt_timeout(
        &mut self,
        now: Nanos,
        attempt: SlabKey,
        ticket: TimerTicket,
        scheduler: &mut Scheduler<Event>,
    ) {
        let Some(a) = self.attempts.get_mut(attempt) else { return };
        if !a.timer.fire(ticket) || !a.caller_waiting {
            return;
        }
        let a = *a;
        if a.edge == PROBE_EDGE {
            return self.probe_ended(now, attempt, false);
        }
        let e = a.edge as usize;
        if a.counted {
            self.edges[e].results.timeouts += 1;
        }
        if let Some(adaptive) = self.edges[e].adaptive_timeout.as_mut() {
            adaptive.timed_out(now - a.sent);
        }
        self.edges[e].budget.on_outcome(now, false);
        self.outlier_learns(now, e, a.instance, true);
        // Followed down before the caller lets go (a server that cancels drops the job).
        let cause = Cause { culprit: self.attempt_culprit(attempt), ..Cause::at(self.p.edges[e].to, Failure::Timeout) };
        self.let_go(now, attempt, Some(Outcome::Timeout), scheduler);
        self.calls.get_mut(a.call).expect("a waiting attempt's call is live").outstanding -= 1;
        self.attempt_failed(now, a.call, Failure::Timeout, cause, scheduler);
    }

    /// The cause "`failure` calling edge `e`'s callee", caused by the walk from it.
    pub(super) fn callee(&self, e: usize, failure: Failure) -> Cause {
        self.caused(self.p.edges[e].to, failure)
    }

    /// One attempt failed (for `cause`): wait for the others, or retry, or give up.
    fn attempt_failed(
        &mut self,
        now: Nanos,
        call: SlabKey,
        failure: Failure,
        cause: Cause,
        scheduler: &mut Scheduler<Event>,
    ) {
        let c = self.calls.get_mut(call).expect("live call");
        c.last_failure = failure;
        c.last_cause = cause;
        if c.outstanding > 0 {
            return; // a hedge may still answer
        }
        self.attempts_exhausted(now, call, failure, scheduler);
    }

    /// No attempt of `call` is out: retry if the policy, the deadline and the budget allow.
    pub(super) fn attempts_exhausted(
        &mut self,
        now: Nanos,
        call: SlabKey,
        failure: Failure,
        scheduler: &mut Scheduler<Event>,
    ) {
        let c = *self.calls.get(call).expect("live call");
        let e = c.edge as usize;
        let params = &self.p.edges[e];
        if !params.retry_on.contains(failure) || c.tries >= params.max_attempts {
            return self.call_failed(now, call, failure, c.last_cause, scheduler);
        }
        let edge = &mut self.edges[e];
        let delay = params.backoff.delay(c.tries - 1, c.last_backoff, None, &mut edge.client_rng);
        // A retry that cannot start before the deadline is not made.
        if now.saturating_add(delay) >= c.deadline {
            return self.call_failed(now, call, failure, c.last_cause, scheduler);
        }
        if !edge.budget.try_retry(now, edge.active, 0, &mut edge.client_rng) {
            if c.counted {
                edge.results.budget_denials += 1;
            }
            return self.call_failed(now, call, failure, c.last_cause, scheduler);
        }
        let c = self.calls.get_mut(call).expect("live call");
        c.last_backoff = delay;
        c.backing_off = true;
        c.hedge_timer.cancel();
        if let Some(tracer) = self.tracer.as_deref_mut() {
            tracer.backoff_starts(call, now);
        }
        scheduler.after(delay, Event::RetryDue { call });
    }

    pub(super) fn retry_due(&mut self, now: Nanos, call: SlabKey, scheduler: &mut Scheduler<Event>) {
        let Some(c) = self.calls.get_mut(call) else { return };
        if !c.backing_off {
            return;
        }
        c.backing_off = false;
        if let Some(tracer) = self.tracer.as_deref_mut() {
            tracer.backoff_ends(call, now);
        }
        self.send_attempt(now, call, false, true, None, scheduler);
    }

    pub(super) fn hedge_due(
        &mut self,
        now: Nanos,
        call: SlabKey,
        ticket: TimerTicket,
        scheduler: &mut Scheduler<Event>,
    ) {
        let Some(c) = self.calls.get_mut(call) else { return };
        if !c.hedge_timer.fire(ticket) || c.outstanding == 0 || c.backing_off {
            return;
        }
        c.hedges += 1;
        let c = *c;
        let e = c.edge as usize;
        let edge = &mut self.edges[e];
        if self.p.edges[e].hedge_uses_budget && !edge.budget.try_retry(now, edge.active, 0, &mut edge.client_rng) {
            if c.counted {
                edge.results.budget_denials += 1;
            }
            return;
        }
        let granted = self.p.edges[e].hedge_uses_budget;
        self.send_attempt(now, call, true, granted, None, scheduler);
    }

    /// Every attempt failed and no retry will be made: a fallback answers, or the call
    /// fails; either way for `cause`.
    fn call_failed(
        &mut self,
        now: Nanos,
        call: SlabKey,
        failure: Failure,
        cause: Cause,
        scheduler: &mut Scheduler<Event>,
    ) {
        let c = self.calls.get(call).expect("live call");
        let (edge, lag) = (c.edge, Lag::of(cause.culprit, now - c.started));
        if self.p.edges[edge as usize].fallback_on.contains(failure) {
            self.call_complete(now, call, CallOutcome::Fallback(cause), lag, scheduler);
        } else {
            self.call_complete(now, call, CallOutcome::Failed(failure, cause), lag, scheduler);
        }
    }

    /// The call is over, its time caused as `lag` says: let go of any attempt still
    /// out, and tell its parent.
    fn call_complete(
        &mut self,
        now: Nanos,
        call: SlabKey,
        outcome: CallOutcome,
        lag: Lag,
        scheduler: &mut Scheduler<Event>,
    ) {
        let first_attempt = self.let_go_of_attempts(now, call, scheduler);
        if let Some(tracer) = self.tracer.as_deref_mut() {
            let (name, cause) = match outcome {
                CallOutcome::Success => ("success", None),
                CallOutcome::Degraded(cause) => ("degraded", Some(cause)),
                CallOutcome::Fallback(cause) => ("fallback", Some(cause)),
                CallOutcome::Failed(failure, cause) => (failure.name(), Some(cause)),
            };
            tracer.call_ended(call, now, name, cause);
        }
        self.unlink_child(call);
        let c = self.calls.remove(call).expect("live call");
        if c.parent.is_some() {
            self.edges[c.edge as usize].outstanding_calls -= 1;
        }
        self.drop_attempts(first_attempt);
        let edge = &mut self.edges[c.edge as usize].results;
        if c.counted {
            match outcome {
                CallOutcome::Success | CallOutcome::Degraded(_) => {}
                CallOutcome::Fallback(_) => edge.fallbacks += 1,
                CallOutcome::Failed(..) => edge.failed += 1,
            }
        }
        if c.counted && c.site != NO_SITE {
            count_outcome(&mut self.sites[c.site as usize], outcome, now - c.started);
        }
        match c.parent {
            Some(job) => self.child_done(now, job, outcome, lag, scheduler),
            None if c.detached => {}
            None => self.entry_done(now, &c, outcome, lag, scheduler),
        }
    }

    /// Lets go of every attempt of `call` still out (a hedge lost, or the call was
    /// cancelled); returns the head of its attempts, for [`Self::drop_attempts`] once
    /// the call is removed.
    fn let_go_of_attempts(&mut self, now: Nanos, call: SlabKey, scheduler: &mut Scheduler<Event>) -> Option<SlabKey> {
        let c = self.calls.get(call).expect("live call");
        let head = c.first_attempt;
        if c.waiting_for_connection {
            self.leave_pool(now, call);
        }
        let mut cursor = head;
        while let Some(attempt) = cursor {
            let Some(a) = self.attempts.get(attempt) else { break };
            cursor = a.next;
            if a.caller_waiting {
                self.let_go(now, attempt, None, scheduler);
            }
        }
        let c = self.calls.get_mut(call).expect("live call");
        c.outstanding = 0;
        c.first_attempt = None;
        c.hedge_timer.cancel();
        c.backing_off = false;
        head
    }

    /// Splices `call` out of its parent job's children.
    fn unlink_child(&mut self, call: SlabKey) {
        let c = self.calls.get(call).expect("live call");
        let (parent, prev_sibling, next_sibling) = (c.parent, c.prev_sibling, c.next_sibling);
        let Some(job) = parent else { return };
        match prev_sibling {
            Some(prev) => self.calls.get_mut(prev).expect("live sibling").next_sibling = next_sibling,
            None => {
                if let Some(j) = self.jobs.get_mut(job) {
                    debug_assert_eq!(j.first_child, Some(call));
                    j.first_child = next_sibling;
                }
            }
        }
        if let Some(next) = next_sibling {
            self.calls.get_mut(next).expect("live sibling").prev_sibling = prev_sibling;
        }
    }

    /// After their call is removed: removes its attempts that no event or job needs.
    fn drop_attempts(&mut self, head: Option<SlabKey>) {
        let mut cursor = head;
        while let Some(attempt) = cursor {
            cursor = self.attempts.get(attempt).expect("a call's attempts stay until it ends").next;
            self.drop_attempt_if_done(attempt);
        }
    }

    /// The parent gave up on `call`: cancel it without telling the parent.
    pub(super) fn cancel_call(&mut self, now: Nanos, call: SlabKey, scheduler: &mut Scheduler<Event>) {
        if self.calls.contains(call) {
            let head = self.let_go_of_attempts(now, call, scheduler);
            if let Some(tracer) = self.tracer.as_deref_mut() {
                tracer.call_ended(call, now, "cancelled", None);
            }
            self.unlink_child(call);
            let c = self.calls.remove(call).expect("live call");
            if c.parent.is_some() {
                self.edges[c.edge as usize].outstanding_calls -= 1;
            }
            self.drop_attempts(head);
        }
    }

    fn entry_done(
        &mut self,
        now: Nanos,
        call: &Call,
        outcome: CallOutcome,
        lag: Lag,
        scheduler: &mut Scheduler<Event>,
    ) {
        let w = call.workload as usize;
        let latency = now - call.started;
        if call.counted {
            count_outcome(&mut self.workloads[w].results, outcome, latency);
            self.entry_latencies[w].record(self.latencies, now, outcome.ending(), latency);
        }
        if matches!(outcome, CallOutcome::Success | CallOutcome::Degraded(_)) {
            // Slow: above the entry's SLO, or its running p99 of answered requests.
            let (slo, state) = (self.p.workloads[w].slo, &mut self.workloads[w]);
            if call.counted && slo.or(state.slow_p99.current()).is_some_and(|threshold| latency > threshold) {
                state.results.slow += 1;
                state.results.slow_caused_by.add(lag.culprit);
            }
            if slo.is_none() {
                state.slow_p99.observe(latency);
            }
        }
        if outcome == CallOutcome::Success {
            if let Some(b) = self.series.successes[w].get_mut((now / self.p.bucket) as usize) {
                *b += 1;
            }
        }
        if let WorkloadArrivals::Closed { think, .. } = self.p.workloads[w].arrivals {
            let gap = self.think_time(w, think);
            scheduler.after(gap, Event::Arrival { workload: w as u32 });
        }
    }

    /// A call `job` makes along call site `site`, counted and traced: its child (the
    /// head of its children, under its deadline where the edge propagates it), or,
    /// `detached`, a call of no one's with no deadline.
    #[inline(always)] // per call made: each caller's `detached` folds away
    fn call_from(&mut self, now: Nanos, job: SlabKey, site: u32, detached: bool) -> SlabKey {
        // The few fields read, not the whole record copied: this runs per call made.
        let j = self.jobs.get(job).expect("live job");
        let (attempt, counted) = (j.attempt, j.counted);
        let site_index = site;
        let site = self.p.call_sites[site as usize];
        let edge = &self.p.edges[site.edge as usize];
        let deadline = if edge.propagate_deadline && !detached { j.deadline } else { Nanos::MAX };
        let (parent, next_sibling) = if detached { (None, None) } else { (Some(job), j.first_child) };
        let a = self.attempts.get(attempt).expect("a job's attempt is live");
        let workload = self.calls.get(a.call).map_or(0, |c| c.workload);
        if counted {
            self.sites[site_index as usize].offered += 1;
        }
        if !detached {
            self.edges[site.edge as usize].outstanding_calls += 1;
        }
        let call = self.calls.insert(Call {
            next_sibling,
            site: site_index,
            detached,
            ..Call::new(
                parent,
                workload,
                site.edge,
                site.endpoint,
                deadline,
                now,
                j.criticality,
                j.depth + 1,
                j.key,
                counted,
            )
        });
        if let Some(tracer) = self.tracer.as_deref_mut() {
            let parent = tracer.attempt_span(attempt);
            tracer.call_started(call, now, site.endpoint, parent, counted);
        }
        call
    }

    /// A call from `job` along call site `site` that `job` does not wait for: linked
    /// to no one, no deadline of the caller's, started at once.
    pub(super) fn detached_call(&mut self, now: Nanos, job: SlabKey, site: u32, scheduler: &mut Scheduler<Event>) {
        let call = self.call_from(now, job, site, true);
        self.begin_call(now, call, scheduler);
    }

    /// A new call from `job` along call site `site`, linked as its first child; the
    /// caller starts it with [`Self::begin_call`] once the whole group is made.
    pub(super) fn child_call(&mut self, now: Nanos, job: SlabKey, site: u32) -> SlabKey {
        let call = self.call_from(now, job, site, false);
        if let Some(next) = self.calls.get(call).expect("just made").next_sibling {
            self.calls.get_mut(next).expect("a job's children are live").prev_sibling = Some(call);
        }
        self.jobs.get_mut(job).expect("live job").first_child = Some(call);
        call
    }
}
