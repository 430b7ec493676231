//! Causal attribution: the service that **caused** a failure or a slow answer, beside
//! where it failed ([`Cause::service`]). In a payments slowdown a browse request fails
//! at the edge service, whose queue is full because its workers all wait on checkout,
//! whose workers all wait on payments: the refusal happens at edge, the culprit is
//! payments.
//!
//! The walk from a service: if one of its instances has an active fault of its own
//! (down, slowed, delayed, erring), it is the culprit. Otherwise, if the resource that
//! ran out is mostly held by jobs waiting on their calls — most busy workers blocked
//! on calls (a blocking service's workers), or most jobs present awaiting calls (what a
//! concurrency limiter, a shedder or an async service counts) — the walk moves to the
//! callee of the out-edge with the most calls outstanding from its jobs, and repeats;
//! else the service is busy with its own work, and is the culprit. A timed-out attempt
//! follows its own request first: its job queued (then why the workers are busy: the
//! walk), working (its service), or waiting on a call (that call's attempt, and on).
//!
//! Slow answers are attributed the same way, per request: a job keeps the time its own
//! service caused (its work, queue waits for workers busy with their own work) and the
//! longest wait another caused (a group of calls: the culprit of the call that settled
//! it; a queue behind workers blocked downstream: the walk's), and answers with the
//! larger ([`Lag`]); a call's lag is its answering attempt's, or its failed attempts'
//! when retrying took longer than the answer.
//!
//! Cost: per failure or per queue wait, not per event: the out-degree of each service on
//! the way, at most [`MAX_HOPS`] hops (a cycle of waiting services stops there). Every
//! count it reads is kept as the model runs: per instance and service, jobs awaiting
//! calls and those of them holding a worker; per edge, calls outstanding from jobs; per
//! service, instances with an active fault of their own.
//!
//! Invariants (asserted): blocked ≤ awaiting ≤ present and blocked ≤ busy, per instance
//! and per service.

use crate::kernel::slab::SlabKey;
use crate::kernel::time::Nanos;

use super::model::Graph;
use super::params::{Cause, Failure, Refusal};
use super::state::{Call, JobState, Lag};

/// Hops the walk takes at most: a cycle of services waiting on each other ends there.
pub(super) const MAX_HOPS: usize = 32;

/// The resource a refusal or wait ran out of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Resource {
    /// Workers: a full queue, CoDel, a deadline passed in the queue, a queue wait.
    Workers,
    /// Requests in flight: a concurrency limiter or shedder.
    InFlight,
}

impl Graph<'_> {
    /// The culprit of a refusal at service `s`: a rate limit, a crash or a runaway
    /// depth is its own; a full queue, a limiter or a shedder is whatever holds the
    /// resource.
    pub(super) fn refusal_culprit(&self, s: usize, refusal: Refusal) -> u32 {
        match refusal {
            Refusal::QueueFull | Refusal::Codel | Refusal::Deadline => self.walk(s, Resource::Workers),
            Refusal::Limiter | Refusal::Shed => self.walk(s, Resource::InFlight),
            Refusal::RateLimit | Refusal::Down | Refusal::Depth => s as u32,
        }
    }

    /// The culprit of a failure calling service `s` (a breaker open on it, a deadline
    /// that ran out before an attempt): the walk from it, by what its callers wait for.
    pub(super) fn service_culprit(&self, s: usize) -> u32 {
        self.walk(s, self.waited_resource(s))
    }

    /// `cause` with its culprit: `failure` at `service`, caused by the walk from it.
    pub(super) fn caused(&self, service: u32, failure: Failure) -> Cause {
        Cause { service, failure, culprit: self.service_culprit(service as usize) }
    }

    /// What a caller of `s` waits for there: its workers (a blocking service's) or its
    /// jobs (an async one's, whose workers never wait on calls).
    fn waited_resource(&self, s: usize) -> Resource {
        if self.p.services[s].blocking {
            Resource::Workers
        } else {
            Resource::InFlight
        }
    }

    /// Whether service `s`'s `resource` is mostly held waiting on calls and it has no
    /// fault of its own: the walk goes on past it.
    #[inline]
    fn passes_blame(&self, s: usize, resource: Resource) -> bool {
        let service = &self.services[s];
        debug_assert!(service.blocked <= service.busy && service.awaiting <= service.present);
        service.faulted == 0
            && match resource {
                Resource::Workers => service.blocked * 2 > service.busy,
                Resource::InFlight => service.awaiting * 2 > service.present,
            }
    }

    /// The walk from service `s`, whose `resource` ran out.
    fn walk(&self, mut s: usize, mut resource: Resource) -> u32 {
        for _ in 0..MAX_HOPS {
            if !self.passes_blame(s, resource) {
                return s as u32;
            }
            let Some(e) = self.busiest_out_edge(s) else { return s as u32 };
            s = self.p.edges[e].to as usize;
            resource = self.waited_resource(s);
        }
        s as u32
    }

    /// The out-edge of `s` with the most calls outstanding from its jobs (the first of
    /// equals), if any has one.
    fn busiest_out_edge(&self, s: usize) -> Option<usize> {
        let mut best: Option<(usize, u32)> = None;
        for &e in self.out_edges.of(s) {
            let calls = self.edges[e as usize].outstanding_calls;
            if calls > best.map_or(0, |(_, most)| most) {
                best = Some((e as usize, calls));
            }
        }
        best.map(|(e, _)| e)
    }

    /// The culprit of `attempt`'s timeout: its own request followed down — a job
    /// queued (the walk from its service), working (its service), or waiting on calls
    /// (the first call still waited for: its attempt, or, backing off, its last
    /// failure's culprit); an attempt without a job (in the network, or its instance
    /// lost it) blames its callee by the walk.
    pub(super) fn attempt_culprit(&self, attempt: SlabKey) -> u32 {
        let mut attempt = attempt;
        for _ in 0..MAX_HOPS {
            let Some(a) = self.attempts.get(attempt) else { break };
            let to = self.p.edges[a.edge as usize].to as usize;
            let Some(j) = a.job.and_then(|job| self.jobs.get(job)) else { return self.service_culprit(to) };
            if self.services[to].faulted > 0 || self.instances[j.instance as usize].epoch != j.epoch {
                return to as u32;
            }
            match j.state {
                JobState::Queued { .. } => return self.walk(to, Resource::Workers),
                JobState::Working => return to as u32,
                JobState::Waiting => {
                    let Some(call) = j.first_child.and_then(|call| self.calls.get(call)) else { return to as u32 };
                    match self.waited_attempt(call) {
                        Some(next) => attempt = next,
                        None if call.tries > 0 => return call.last_cause.culprit,
                        None => return self.service_culprit(self.p.edges[call.edge as usize].to as usize),
                    }
                }
            }
        }
        self.attempts.get(attempt).map_or(0, |a| self.p.edges[a.edge as usize].to)
    }

    /// The latest attempt `call` still waits for, if any (none while it backs off or
    /// waits for a connection).
    fn waited_attempt(&self, call: &Call) -> Option<SlabKey> {
        let mut cursor = call.first_attempt;
        while let Some(attempt) = cursor {
            let a = self.attempts.get(attempt)?;
            if a.caller_waiting {
                return Some(attempt);
            }
            cursor = a.next;
        }
        None
    }

    /// A job of instance `i` starts (`starts`) or stops waiting on its group of calls,
    /// holding a worker meanwhile or not (`blocked`). The caller keeps the job's
    /// `awaiting`/`blocked` flags (it holds the job already); a job its instance's crash
    /// stranded is not counted any more (the crash reset the counts) and must not stop.
    /// A blocked job's worker stops (or starts) working at `now`: the integral of
    /// workers blocked (`S.cpu_utilisation` is busy minus it) is closed first.
    #[inline]
    pub(super) fn count_awaiting(&mut self, now: Nanos, i: usize, blocked: bool, starts: bool) {
        let s = self.instances[i].service as usize;
        if blocked {
            self.close_blocked(s, now);
        }
        let (instance, service) = (&mut self.instances[i], &mut self.services[s]);
        if starts {
            instance.awaiting += 1;
            service.awaiting += 1;
            instance.blocked += blocked as u32;
            service.blocked += blocked as u64;
        } else {
            instance.awaiting -= 1;
            service.awaiting -= 1;
            instance.blocked -= blocked as u32;
            service.blocked -= blocked as u64;
        }
    }

    /// Closes service `s`'s integral of workers blocked on calls up to `now` (before the
    /// level changes, before it is read): since the start, and after warm-up.
    #[inline]
    pub(super) fn close_blocked(&mut self, s: usize, now: Nanos) {
        let warmup = self.p.warmup;
        let service = &mut self.services[s];
        let (since, blocked) = (service.blocked_since, service.blocked as u128);
        if now > since && blocked > 0 {
            service.blocked_total += blocked * (now - since) as u128;
            service.blocked_window += blocked * now.saturating_sub(since.max(warmup)) as u128;
        }
        service.blocked_since = now;
    }

    /// Recounts service `s`'s instances with an active fault of their own (down,
    /// slowed, delayed or erring), after a fault began or ended.
    pub(super) fn recount_faulted(&mut self, s: usize) {
        let first = self.services[s].first_instance as usize;
        let count = self.p.services[s].instances as usize;
        let faulted = self.instances[first..first + count]
            .iter()
            .filter(|i| !i.up || i.slowdown != 1.0 || i.added > 0 || i.error_rate > 0.0)
            .count();
        self.services[s].faulted = faulted as u32;
    }

    #[inline]
    /// `job` (of service `s`) waited `wait` in its queue for a worker: its own time if
    /// its service's workers were busy with their own work, else a wait another
    /// service caused.
    pub(super) fn queue_waited(&mut self, job: SlabKey, s: usize, wait: Nanos) {
        if wait == 0 {
            return;
        }
        // The common case decided here: workers busy with their own work.
        let culprit = if self.passes_blame(s, Resource::Workers) { self.walk(s, Resource::Workers) } else { s as u32 };
        let j = self.jobs.get_mut(job).expect("live job");
        if culprit as usize == s {
            j.own_ns += wait;
        } else if wait > j.lag_span {
            (j.lag_culprit, j.lag_span) = (culprit, wait);
        }
    }

    /// `job`'s group of calls settled after `lag.span`, decided by a call whose time
    /// `lag.culprit` caused.
    pub(super) fn group_waited(&mut self, now: Nanos, job: SlabKey, lag: Lag) {
        let j = self.jobs.get_mut(job).expect("live job");
        let wait = now - j.group_started;
        if wait > j.lag_span {
            (j.lag_culprit, j.lag_span) = (lag.culprit, wait);
        }
    }

    /// Where `job`'s time went, as it answers: its own service's part or the longest
    /// wait another caused, whichever is larger.
    pub(super) fn job_lag(&self, job: SlabKey, s: usize) -> Lag {
        let j = self.jobs.get(job).expect("live job");
        Lag::of(s as u32, j.own_ns).max(Lag::of(j.lag_culprit, j.lag_span))
    }

    /// Where a call's time went, answered at `now` by an attempt sent at `sent` whose
    /// job's time went to `answered`: before it was sent (retries after failures, a
    /// backoff, a connection wait) or after.
    pub(super) fn call_lag(now: Nanos, call: &Call, sent: Nanos, answered: u32) -> Lag {
        let (before, after) = (sent - call.started, now - sent);
        if call.tries > 1 && before > after {
            Lag::of(call.last_cause.culprit, now - call.started)
        } else {
            Lag::of(answered, now - call.started)
        }
    }
}
