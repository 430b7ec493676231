//! The clients' side: open-loop arrivals and closed-loop users make requests; a
//! request's attempt is routed through the ring (bounded loads, failover) past the
//! shard's breaker into its queue; a timeout, a refusal or an error leads to a retry
//! (policy, backoff, budget) or to giving up.

use super::model::Cluster;
use super::params::RetryPolicy;
use super::results::HOPS_TRACKED;
use super::state::{Attempt, Event, Refusal, Request};
use crate::components::ring::Route;
use crate::kernel::sim::Scheduler;
use crate::kernel::slab::SlabKey;
use crate::kernel::time::round_to_nanos;
use crate::kernel::time::{Nanos, NANOS_PER_SEC};
use crate::kernel::timer::{TimerSlot, TimerTicket};
use crate::measurement::ending::Ending;
use crate::policy::classify::Outcome;

impl Cluster<'_> {
    pub(super) fn think(&mut self) -> Nanos {
        let mean = self.p.think_time as f64;
        round_to_nanos(self.user_rng.standard_exponential() * mean)
    }

    /// A request has ended (answered or given up): a closed-loop user thinks, then asks again.
    pub(super) fn request_ended(&mut self, closed_loop: bool, scheduler: &mut Scheduler<Event>) {
        if closed_loop {
            let think = self.think();
            scheduler.after(think, Event::UserRequest);
        }
    }

    /// The gap from `now` to the next open-loop arrival.
    pub(super) fn interarrival(&mut self, now: Nanos) -> Nanos {
        if let Some(load) = &mut self.load {
            // A trace replayed to its end, or a rate zero from now on: no more arrivals.
            return load.next_gap(now, self.rate_factor, &mut self.arrivals).unwrap_or(Nanos::MAX / 2);
        }
        let rate = self.p.arrival_rate_per_s * self.rate_factor;
        if rate <= 0.0 {
            return Nanos::MAX / 2; // a closed-loop-only cluster has no open arrivals
        }
        round_to_nanos(self.arrivals.exponential(rate) * NANOS_PER_SEC as f64)
    }

    pub(super) fn new_request(&mut self, now: Nanos, closed_loop: bool, scheduler: &mut Scheduler<Event>) {
        // An open-loop request replayed from a trace with keys takes its recorded key.
        let replayed = if closed_loop { None } else { self.replayed_key.take() };
        let key = match replayed {
            Some(key) => key % self.p.keys,
            None => {
                let hot = self.p.hot_share > 0.0 && self.key_rng.bernoulli(self.p.hot_share);
                if hot {
                    0
                } else {
                    self.key_sampler.draw(&mut self.key_rng)
                }
            }
        };
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
        if let Some(tracer) = self.tracer.as_deref_mut() {
            tracer.call_started(request, None, if closed_loop { "user" } else { "request" }, counted, now);
        }
        self.p.budget.on_request(now);
        self.send(now, request, scheduler);
    }

    pub(super) fn send(&mut self, now: Nanos, request_key: SlabKey, scheduler: &mut Scheduler<Event>) {
        let Some(request) = self.requests.get_mut(request_key) else { return };
        request.attempts += 1;
        if let Some(tracer) = self.tracer.as_deref_mut() {
            tracer.wait_ends(request_key, now);
        }
        let key_hash = request.key_hash;
        let counted = request.counted;
        let ticket = request.timer.arm();
        if let Some(wake) = self.timeouts.arm(now + self.p.attempt_timeout, (request_key, ticket)) {
            scheduler.at(wake.at, Event::Timeouts { ticket: wake.ticket });
        }
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
                    self.count_hops(hops);
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
        let sent = Attempt { request: request_key, shard, service_started: 0, abandoned: false, permit, sent_at: now };
        let attempt = self.attempts.insert(sent);
        self.requests.get_mut(request_key).expect("live").attempt = Some(attempt);
        self.in_flight += 1;
        if let Some(tracer) = self.tracer.as_deref_mut() {
            tracer.attempt_sent(request_key, now, shard);
        }
        if can_start {
            self.start(now, shard, attempt, scheduler);
        } else {
            self.touch(shard, now);
            self.shards[shard as usize].queue.push_back(attempt);
            self.queued += 1;
        }
        self.check(shard);
    }

    /// A counted attempt routed in `hops` (the ring's walk to a shard with room).
    #[inline]
    fn count_hops(&mut self, hops: u32) {
        self.hops_total += hops as u64;
        self.routed += 1;
        self.results.hops_max = self.results.hops_max.max(hops as u64);
        self.series.hops[(hops as usize).min(HOPS_TRACKED)] += 1;
    }

    /// The timeout FIFO's wake-up: every attempt timeout due by `now` whose request
    /// still waits fires, in the order armed; then the wake-up for the next one.
    pub(super) fn timeouts_due(&mut self, now: Nanos, ticket: TimerTicket, scheduler: &mut Scheduler<Event>) {
        if !self.timeouts.woken(ticket) {
            return;
        }
        loop {
            let requests = &self.requests;
            let waiting = |&(request, ticket): &(SlabKey, TimerTicket)| {
                requests.get(request).is_some_and(|r| r.timer.is_live(ticket))
            };
            let Some((request, ticket)) = self.timeouts.pop_due(now, waiting) else { break };
            self.timeout(now, request, ticket, scheduler);
        }
        if let Some(wake) = self.timeouts.rearm() {
            scheduler.at(wake.at, Event::Timeouts { ticket: wake.ticket });
        }
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
        if let Some(tracer) = self.tracer.as_deref_mut() {
            tracer.attempt_ended(request_key, now, None, "timeout");
        }
        self.p.budget.on_outcome(now, false);
        self.retry_or_fail(now, request_key, scheduler);
    }

    pub(super) fn attempt_failed(
        &mut self,
        now: Nanos,
        request_key: SlabKey,
        why: Refusal,
        scheduler: &mut Scheduler<Event>,
    ) {
        let Some(request) = self.requests.get_mut(request_key) else { return };
        request.timer.cancel();
        let sent = request.attempt.take().is_some();
        if let Some(tracer) = self.tracer.as_deref_mut() {
            // An attempt the shard dropped ended; one refused before it was sent never started.
            match (sent, why) {
                (true, _) => tracer.attempt_ended(request_key, now, None, why.name()),
                (false, Refusal::Breaker) => tracer.refusal(request_key, now, why.name(), "breaker"),
                (false, Refusal::QueueFull) => tracer.refusal(request_key, now, why.name(), "queue"),
                (false, _) => tracer.refusal(request_key, now, why.name(), "router"),
            }
        }
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

    pub(super) fn retry_or_fail(&mut self, now: Nanos, request_key: SlabKey, scheduler: &mut Scheduler<Event>) {
        let request = *self.requests.get(request_key).expect("live request");
        let (max_attempts, backoff) = match self.p.retry {
            RetryPolicy::None => (1, None),
            RetryPolicy::Naive { max_attempts } => (max_attempts, None),
            RetryPolicy::Backoff { max_attempts, backoff } => (max_attempts, Some(backoff)),
        };
        if request.attempts < max_attempts {
            let active = self.in_flight as u32;
            if self.p.budget.try_retry(now, active, self.queued as u32, &mut self.retry_rng) {
                if let Some(tracer) = self.tracer.as_deref_mut() {
                    tracer.wait_starts(request_key, now, "backoff", "retry");
                }
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
            self.endings.record(self.latencies, now, Ending::Failed, now - request.arrived_at);
        }
        if let Some(tracer) = self.tracer.as_deref_mut() {
            tracer.call_ended(request_key, now, "failed");
        }
        self.request_ended(request.closed_loop, scheduler);
    }
}
