//! The server side: an attempt reaching an instance (admission: down, depth, deadline,
//! queue room, rate limit, shedder, limiter), the queue and its discipline, workers,
//! a job's steps (local work, groups of calls and how they end), its answer, and the
//! work that is cancelled, stranded by a crash, or wasted.

use crate::kernel::sim::Scheduler;
use crate::kernel::slab::SlabKey;
use crate::kernel::time::Nanos;
use crate::kernel::timer::{Ticket, TicketStamp};
use crate::models::cluster::QueueDiscipline;
use crate::policy::limiter::Signal;
use crate::policy::Criticality;

use super::cache::Looked;
use super::client::CallOutcome;
use super::entities::Instance;
use super::model::Graph;
use super::params::{Cause, Failure, Refusal, ServiceParams, Step, Wait};
use super::state::{Answer, Attempt, CacheRole, Event, Job, JobState, Lag, PROBE_EDGE};

const ENDPOINT_WORK: u32 = u32::MAX;

fn criticality(level: u8) -> Criticality {
    [Criticality::CriticalPlus, Criticality::Critical, Criticality::SheddablePlus, Criticality::Sheddable]
        [level as usize]
}

impl Instance {
    /// Whether the instance refuses attempt `a` of a service with `params` at `now`,
    /// and why: down, too deep, past its deadline, no queue room, rate-limited, shed,
    /// or over its concurrency limit — checked in that order. Admitted, the attempt
    /// holds a rate-limit token and a place in the shedder and the limiter, if any.
    #[inline]
    fn refusal(&mut self, now: Nanos, a: &Attempt, params: &ServiceParams, max_depth: u32) -> Option<Refusal> {
        if !self.up {
            Some(Refusal::Down)
        } else if a.depth > max_depth {
            Some(Refusal::Depth)
        } else if now >= a.deadline {
            Some(Refusal::Deadline)
        } else if self.busy >= params.workers && self.queue.len() >= params.queue_capacity as usize {
            Some(Refusal::QueueFull)
        } else if self.bucket.as_mut().is_some_and(|bucket| !bucket.try_take(now, 1)) {
            Some(Refusal::RateLimit)
        } else if self.shedder.as_mut().is_some_and(|shedder| !shedder.try_admit(criticality(a.criticality))) {
            Some(Refusal::Shed)
        } else if self.limiter.as_mut().is_some_and(|limiter| !limiter.try_acquire()) {
            if let Some(shedder) = self.shedder.as_mut() {
                shedder.release();
            }
            Some(Refusal::Limiter)
        } else {
            None
        }
    }
}

impl Job {
    /// The job `attempt` (`a`) starts on arriving at an instance in its life `epoch`,
    /// queued for the endpoint's own work before its first step; `held` says whether it
    /// holds the instance's shedder and limiter, `service` is its own (its first lag
    /// culprit).
    #[inline]
    pub(super) fn arriving(
        now: Nanos,
        attempt: SlabKey,
        a: &Attempt,
        (epoch, first_step): (u32, u32),
        (shed_held, limit_held): (bool, bool),
        service: u32,
    ) -> Job {
        Job {
            attempt,
            endpoint: a.endpoint,
            instance: a.instance,
            epoch,
            next_step: first_step,
            did_work: false,
            pending_work: ENDPOINT_WORK,
            state: JobState::Queued { since: now, fresh: true },
            ticket: Ticket::default(),
            holds_worker: false,
            busy_since: 0,
            busy_ns: 0,
            arrived: now,
            deadline: a.deadline,
            criticality: a.criticality,
            depth: a.depth,
            key: a.key,
            counted: a.counted,
            degraded: false,
            shed_held,
            limit_held,
            first_child: None,
            group_launched: 0,
            group_needed: 0,
            group_pending: 0,
            group_ok: 0,
            group_failed: 0,
            cancelled: false,
            cache_role: CacheRole::None,
            cause: None,
            awaiting: false,
            blocked: false,
            group_started: now,
            own_ns: 0,
            lag_culprit: service,
            lag_span: 0,
        }
    }
}

impl Graph<'_> {
    /// Sends `attempt`'s answer back along its edge.
    #[inline]
    fn answer(&mut self, attempt: SlabKey, answer: Answer, scheduler: &mut Scheduler<Event>) {
        let edge = self.attempts.get(attempt).expect("an answered attempt is live").edge;
        // A probe's checker sits beside the instance: no network.
        let delay = if edge == PROBE_EDGE { 0 } else { self.network(edge as usize) };
        scheduler.after(delay, Event::Answered { attempt, answer });
    }

    fn refuse(&mut self, attempt: SlabKey, service: usize, refusal: Refusal, scheduler: &mut Scheduler<Event>) {
        if let Some(tracer) =
            self.tracer.as_deref_mut().filter(|_| self.attempts.get(attempt).is_none_or(|a| a.edge != PROBE_EDGE))
        {
            tracer.refused(attempt, scheduler.now(), service as u32, refusal.name());
        }
        let culprit = self.refusal_culprit(service, refusal);
        let a = self.attempts.get_mut(attempt).expect("live");
        a.cause = Some(Cause { service: service as u32, failure: Failure::Refused, culprit });
        if a.counted {
            self.services[service].results.refused[refusal.index()] += 1;
        }
        self.answer(attempt, Answer::Refused, scheduler);
    }

    pub(super) fn attempt_arrives(&mut self, now: Nanos, attempt: SlabKey, scheduler: &mut Scheduler<Event>) {
        let a = *self.attempts.get(attempt).expect("an attempt in the network is live");
        let i = a.instance as usize;
        let s = self.instances[i].service as usize;
        let params = &self.p.services[s];
        if a.counted {
            self.services[s].results.arrivals += 1;
        }
        if let Some(scaler) = self.services[s].scaler.as_mut().filter(|_| a.edge != PROBE_EDGE) {
            scaler.arrivals += 1; // what an rps autoscaler reads
        }
        if !a.caller_waiting && params.cancel_abandoned {
            // The cancellation got there first.
            self.attempts.get_mut(attempt).expect("live").in_flight = false;
            return self.drop_attempt_if_done(attempt);
        }
        let instance = &mut self.instances[i];
        if let Some(refusal) = instance.refusal(now, &a, params, self.p.max_depth) {
            return self.refuse(attempt, s, refusal, scheduler);
        }
        let held = (instance.shedder.is_some(), instance.limiter.is_some());
        let first_step = self.p.endpoints[a.endpoint as usize].first_step;
        let job = self.jobs.insert(Job::arriving(now, attempt, &a, (instance.epoch, first_step), held, s as u32));
        self.attempts.get_mut(attempt).expect("live").job = Some(job);
        if let Some(tracer) = self.tracer.as_deref_mut().filter(|_| a.edge != PROBE_EDGE) {
            tracer.queued(job, now, attempt);
        }
        self.advance(s, now);
        self.instances[i].present += 1;
        self.services[s].present += 1;
        let instance = &self.instances[i];
        if instance.busy < self.p.services[s].workers && instance.queue.is_empty() {
            // It would be queued and taken at once: taken without the queue's round trip
            // (the same checks; the queue's level would rise and fall at this instant).
            self.take_queued(now, i, job, scheduler);
        } else {
            self.enqueue(i, job);
        }
        self.dispatch(now, i, scheduler);
    }

    #[inline]
    fn enqueue(&mut self, i: usize, job: SlabKey) {
        let instance = &mut self.instances[i];
        instance.queue.push_back(job);
        self.services[instance.service as usize].queued += 1;
    }

    /// Free workers of instance `i` take queued jobs, by the service's discipline.
    pub(super) fn dispatch(&mut self, now: Nanos, i: usize, scheduler: &mut Scheduler<Event>) {
        let s = self.instances[i].service as usize;
        let workers = self.p.services[s].workers;
        while self.instances[i].busy < workers {
            let lifo = matches!(self.p.services[s].discipline, QueueDiscipline::Lifo);
            let instance = &mut self.instances[i];
            let Some(job) = (if lifo { instance.queue.pop_back() } else { instance.queue.pop_front() }) else { break };
            self.advance(s, now);
            self.services[s].queued -= 1;
            self.take_queued(now, i, job, scheduler);
        }
        debug_assert!(self.instances[i].busy <= workers);
        debug_assert!(self.instances[i].queue.len() <= self.p.services[s].queue_capacity as usize + workers as usize);
    }

    /// A free worker of instance `i` takes `job`, out of the queue: a cancelled job is
    /// dropped, a fresh one may still be dropped by CoDel or its deadline, and the rest
    /// start their work.
    #[inline]
    fn take_queued(&mut self, now: Nanos, i: usize, job: SlabKey, scheduler: &mut Scheduler<Event>) {
        let s = self.instances[i].service as usize;
        let j = self.jobs.get(job).expect("a queued job is live");
        let JobState::Queued { since, fresh } = j.state else { unreachable!("queued") };
        let (cancelled, attempt, deadline, pending) = (j.cancelled, j.attempt, j.deadline, j.pending_work);
        if let Some(tracer) = self.tracer.as_deref_mut() {
            tracer.dequeued(job, now, s as u32, if cancelled { "cancelled" } else { "queue" });
        }
        if cancelled {
            self.fetch_abandoned(now, job, scheduler);
            return self.drop_cancelled_job(now, job);
        }
        if fresh {
            let queue_empty = self.instances[i].queue.is_empty();
            let dropped =
                self.instances[i].codel.as_mut().is_some_and(|c| c.should_drop(now, now - since, queue_empty));
            if dropped || now >= deadline {
                let refusal = if dropped { Refusal::Codel } else { Refusal::Deadline };
                self.release_job(now, job);
                self.attempts.get_mut(attempt).expect("live").job = None;
                return self.refuse(attempt, s, refusal, scheduler);
            }
        }
        self.queue_waited(job, s, now - since);
        self.take_worker(now, i, job);
        if fresh {
            if let Some(tracer) =
                self.tracer.as_deref_mut().filter(|_| self.attempts.get(attempt).is_some_and(|a| a.edge != PROBE_EDGE))
            {
                let endpoint = self.jobs.get(job).expect("live").endpoint;
                tracer.serve_started(job, now, attempt, endpoint, s as u32, i as u32);
            }
            self.proceed(now, job, scheduler);
        } else {
            self.start_work(now, job, pending, scheduler);
        }
    }

    #[inline]
    fn take_worker(&mut self, now: Nanos, i: usize, job: SlabKey) {
        let s = self.instances[i].service as usize;
        self.advance(s, now);
        self.instances[i].busy += 1;
        self.services[s].busy += 1;
        let j = self.jobs.get_mut(job).expect("live job");
        debug_assert!(!j.holds_worker);
        j.holds_worker = true;
        j.busy_since = now;
    }

    /// Removes a job its caller cancelled (no answer goes back) and its attempt if done.
    pub(super) fn drop_cancelled_job(&mut self, now: Nanos, job: SlabKey) {
        let attempt = self.jobs.get(job).expect("live job").attempt;
        self.release_job(now, job);
        let a = self.attempts.get_mut(attempt).expect("live");
        (a.job, a.in_flight) = (None, false);
        self.drop_attempt_if_done(attempt);
    }

    /// The worker `job` holds, if any, goes back (the job stays).
    #[inline]
    pub(super) fn release_worker(&mut self, now: Nanos, job: SlabKey) {
        let j = self.jobs.get_mut(job).expect("live job");
        if !j.holds_worker {
            return;
        }
        j.holds_worker = false;
        j.busy_ns += now - j.busy_since;
        let i = j.instance as usize;
        let s = self.instances[i].service as usize;
        self.advance(s, now);
        self.instances[i].busy -= 1;
        self.services[s].busy -= 1;
    }

    /// Runs `job` (holding a worker) through its steps until it must wait: for work, a
    /// worker, or its calls; or until it is done.
    fn proceed(&mut self, now: Nanos, job: SlabKey, scheduler: &mut Scheduler<Event>) {
        loop {
            // The few fields read, not the whole record copied: this runs per step.
            let j = self.jobs.get_mut(job).expect("live job");
            let endpoint = &self.p.endpoints[j.endpoint as usize];
            if !j.did_work {
                j.did_work = true;
                if endpoint.work.is_some() {
                    return self.need_work(now, job, ENDPOINT_WORK, scheduler);
                }
                continue;
            }
            if endpoint.cache.is_some() && j.cache_role == CacheRole::None && j.next_step == endpoint.first_step {
                match self.cache_lookup(now, job) {
                    Looked::Hit => return self.finish_job(now, job, Answer::Success, scheduler),
                    Looked::Wait => return,
                    Looked::Fetch => continue,
                }
            }
            if j.next_step == endpoint.first_step + endpoint.step_count {
                let answer = if j.degraded { Answer::Degraded } else { Answer::Success };
                return self.finish_job(now, job, answer, scheduler);
            }
            let step = j.next_step;
            j.next_step += 1;
            match self.p.steps[step as usize] {
                Step::Work(_) => return self.need_work(now, job, step, scheduler),
                Step::Calls { first_call, calls, wait: Wait::Detached } => {
                    // Made and left: the job goes on to its next step now.
                    for site in first_call..first_call + calls {
                        if self.site_fires(site) {
                            self.detached_call(now, job, site, scheduler);
                        }
                    }
                    continue;
                }
                Step::Calls { first_call, calls, wait: Wait::OneOf } => {
                    let Some(site) = self.one_of_site(first_call, calls) else { continue };
                    self.child_call(now, job, site);
                    self.wait_for_calls(now, job, 1, 1, scheduler);
                    return;
                }
                Step::Branch { first_alternative, alternatives, end } => {
                    let next = self.branch_start(first_alternative, alternatives, end);
                    self.jobs.get_mut(job).expect("live job").next_step = next;
                    continue;
                }
                Step::Jump { to } => {
                    j.next_step = to;
                    continue;
                }
                Step::Calls { first_call, calls, wait } => {
                    if self.launch_group(now, job, (first_call, calls), wait, scheduler) {
                        return;
                    }
                }
            }
        }
    }

    /// One draw picks a `one_of`'s call: the sites' probabilities are consecutive
    /// slices of [0, 1); past their sum, none is made.
    #[inline]
    fn one_of_site(&mut self, first_call: u32, calls: u32) -> Option<u32> {
        let draw = self.site_rng[first_call as usize].uniform01();
        let mut reach = 0.0;
        (first_call..first_call + calls).find(|&site| {
            reach += self.p.call_sites[site as usize].probability;
            draw < reach
        })
    }

    /// As [`Self::one_of_site`] for a branch: one draw, the alternatives'
    /// probabilities consecutive slices of [0, 1); the chosen one's first step, or
    /// `end` past their sum.
    #[inline]
    fn branch_start(&mut self, first_alternative: u32, alternatives: u32, end: u32) -> u32 {
        let draw = self.branch_rng[first_alternative as usize].uniform01();
        let mut reach = 0.0;
        let range = first_alternative as usize..(first_alternative + alternatives) as usize;
        self.p.alternatives[range]
            .iter()
            .find(|a| {
                reach += a.probability;
                draw < reach
            })
            .map_or(end, |a| a.start)
    }

    /// Makes a group's calls (each site that fires) and waits for as many as `wait`
    /// needs; false when none fired and the job goes on.
    #[inline]
    fn launch_group(
        &mut self,
        now: Nanos,
        job: SlabKey,
        (first_call, calls): (u32, u32),
        wait: Wait,
        scheduler: &mut Scheduler<Event>,
    ) -> bool {
        // Made last site first: each is linked at the head of the job's children, so
        // the list runs in site order.
        let mut launched = 0;
        for site in (first_call..first_call + calls).rev() {
            if self.site_fires(site) {
                self.child_call(now, job, site);
                launched += 1;
            }
        }
        if launched == 0 {
            return false;
        }
        let needed = match wait {
            Wait::All => launched,
            Wait::FirstSuccess => 1,
            Wait::Quorum(k) => k.min(launched),
            Wait::Detached | Wait::OneOf => unreachable!("handled in proceed"),
        };
        self.wait_for_calls(now, job, launched, needed, scheduler);
        true
    }

    /// Whether call site `site` makes its call this time (its probability; a sure call
    /// draws nothing).
    #[inline]
    fn site_fires(&mut self, site: u32) -> bool {
        let probability = self.p.call_sites[site as usize].probability;
        probability >= 1.0 || self.site_rng[site as usize].bernoulli(probability)
    }

    /// `job` waits for `needed` of the `launched` calls just linked as its children:
    /// its worker goes back if its service does not block, and the calls start.
    fn wait_for_calls(
        &mut self,
        now: Nanos,
        job: SlabKey,
        launched: u32,
        needed: u32,
        scheduler: &mut Scheduler<Event>,
    ) {
        let j = self.jobs.get_mut(job).expect("live");
        (j.group_launched, j.group_needed, j.group_pending, j.group_ok, j.group_failed) =
            (launched, needed, launched, 0, 0);
        j.state = JobState::Waiting;
        let (i, mut cursor) = (j.instance as usize, j.first_child);
        if !self.p.services[self.instances[i].service as usize].blocking {
            self.release_worker(now, job);
        }
        let j = self.jobs.get_mut(job).expect("live");
        (j.awaiting, j.blocked, j.group_started) = (true, j.holds_worker, now);
        let blocked = j.blocked;
        self.count_awaiting(now, i, blocked, true);
        // Started in order, the group already waiting: a call that ends at once
        // (an open breaker) may settle the group, which cancels the calls not
        // started yet (their keys then find nothing).
        while let Some(call) = cursor.filter(|&call| self.calls.contains(call)) {
            cursor = self.calls.get(call).expect("live").next_sibling;
            self.begin_call(now, call, scheduler);
        }
    }

    /// `job` has local work `piece` to do: on its worker if it holds one, else it queues.
    #[inline]
    fn need_work(&mut self, now: Nanos, job: SlabKey, piece: u32, scheduler: &mut Scheduler<Event>) {
        let j = self.jobs.get_mut(job).expect("live job");
        if j.holds_worker {
            return self.start_work(now, job, piece, scheduler);
        }
        j.pending_work = piece;
        j.state = JobState::Queued { since: now, fresh: false };
        let (i, attempt) = (j.instance as usize, j.attempt);
        if let Some(tracer) = self.tracer.as_deref_mut() {
            tracer.queued(job, now, attempt);
        }
        // A continuing job is not refused for room: it was admitted already.
        self.enqueue(i, job);
    }

    #[inline]
    fn start_work(&mut self, now: Nanos, job: SlabKey, piece: u32, scheduler: &mut Scheduler<Event>) {
        let j = self.jobs.get(job).expect("live job");
        debug_assert!(j.holds_worker);
        let (i, endpoint) = (j.instance as usize, j.endpoint as usize);
        let s = self.instances[i].service as usize;
        let distribution = if piece == ENDPOINT_WORK {
            self.p.endpoints[endpoint].work.as_ref().expect("the endpoint has work")
        } else {
            match &self.p.steps[piece as usize] {
                Step::Work(distribution) => distribution,
                Step::Calls { .. } | Step::Branch { .. } | Step::Jump { .. } => unreachable!("a work step"),
            }
        };
        let base = distribution.sample(&mut self.services[s].work_rng);
        let slowed = if self.instances[i].plain { base } else { self.slowed(now, i, base) };
        let duration = slowed.saturating_add(self.instances[i].added);
        let j = self.jobs.get_mut(job).expect("live job");
        j.own_ns = j.own_ns.saturating_add(duration);
        j.state = JobState::Working;
        let stamp = j.ticket.renew();
        scheduler.after(duration, Event::WorkDone { job, stamp });
    }

    /// `base` of work on instance `i` at `now` under its slowdown and cold start.
    #[inline(never)]
    fn slowed(&mut self, now: Nanos, i: usize, base: Nanos) -> Nanos {
        let cold = self.cold_factor(now, i);
        let instance = &mut self.instances[i];
        if now >= instance.cold_until {
            instance.plain = instance.slowdown == 1.0;
        }
        let factor = instance.slowdown * cold;
        if factor == 1.0 {
            base
        } else {
            (base as f64 * factor).round().min(u64::MAX as f64 / 2.0) as Nanos
        }
    }

    pub(super) fn work_done(&mut self, now: Nanos, job: SlabKey, stamp: TicketStamp, scheduler: &mut Scheduler<Event>) {
        let Some(j) = self.jobs.get(job) else { return };
        if !j.ticket.matches(stamp) {
            return;
        }
        let i = j.instance as usize;
        if self.stranded(job) {
            return self.strand(now, job, scheduler);
        }
        let blocking = self.p.services[self.instances[i].service as usize].blocking;
        self.jobs.get_mut(job).expect("live").state = JobState::Waiting;
        if !blocking {
            // Async: the worker goes back between pieces of work; the job queues for the next.
            self.release_worker(now, job);
        }
        self.proceed(now, job, scheduler);
        self.dispatch(now, i, scheduler);
    }

    /// A child call of `job` ended.
    pub(super) fn child_done(
        &mut self,
        now: Nanos,
        job: SlabKey,
        outcome: CallOutcome,
        lag: Lag,
        scheduler: &mut Scheduler<Event>,
    ) {
        if !self.jobs.contains(job) {
            return;
        }
        if self.stranded(job) {
            return self.strand(now, job, scheduler);
        }
        let j = self.jobs.get_mut(job).expect("live job");
        debug_assert!(j.group_pending > 0 && j.state == JobState::Waiting);
        j.group_pending -= 1;
        match outcome {
            CallOutcome::Success => j.group_ok += 1,
            CallOutcome::Degraded(cause) | CallOutcome::Fallback(cause) => {
                j.group_ok += 1;
                j.degraded = true;
                j.cause = j.cause.or(Some(cause));
            }
            CallOutcome::Failed(..) => j.group_failed += 1,
        }
        let succeeded = j.group_ok >= j.group_needed;
        let failed = j.group_failed > j.group_launched - j.group_needed;
        if let (true, CallOutcome::Failed(_, cause)) = (failed, outcome) {
            j.cause = Some(cause); // the failure that decided the group
        }
        if !succeeded && !failed {
            return;
        }
        let i = j.instance as usize;
        // Not stranded (checked above): still counted.
        let blocked = j.blocked;
        (j.awaiting, j.blocked) = (false, false);
        self.count_awaiting(now, i, blocked, false);
        self.group_waited(now, job, lag);
        self.cancel_children(now, job, scheduler);
        if succeeded {
            self.proceed(now, job, scheduler);
        } else {
            self.finish_job(now, job, Answer::Error, scheduler);
        }
        self.dispatch(now, i, scheduler);
    }

    fn cancel_children(&mut self, now: Nanos, job: SlabKey, scheduler: &mut Scheduler<Event>) {
        let mut cursor = self.jobs.get(job).expect("live job").first_child;
        while let Some(call) = cursor {
            cursor = self.calls.get(call).expect("a job's children are live").next_sibling;
            self.cancel_call(now, call, scheduler);
        }
        debug_assert!(self.jobs.get(job).expect("live job").first_child.is_none());
    }

    /// The job answers its attempt: an error fault may turn a success into an error.
    pub(super) fn finish_job(&mut self, now: Nanos, job: SlabKey, answer: Answer, scheduler: &mut Scheduler<Event>) {
        let j = self.jobs.get(job).expect("live job");
        let (i, attempt, arrived, limit_held, below, role) =
            (j.instance as usize, j.attempt, j.arrived, j.limit_held, j.cause, j.cache_role);
        // A cache's fetch fills it (or answers stale) before the answer goes.
        let answer = if role == CacheRole::Fetch { self.fetch_done(now, job, answer, scheduler) } else { answer };
        let s = self.instances[i].service as usize;
        let error_rate = self.instances[i].error_rate;
        let (answer, cause) =
            if answer != Answer::Error && error_rate > 0.0 && self.services[s].error_rng.bernoulli(error_rate) {
                (Answer::Error, Some(Cause::at(s as u32, Failure::Error)))
            } else {
                (answer, below)
            };
        debug_assert!(answer == Answer::Success || cause.is_some(), "a degraded or error answer has its cause");
        let signal = if answer == Answer::Error { Signal::Dropped } else { Signal::Success };
        if let Some(limiter) = self.instances[i].limiter.as_mut().filter(|_| limit_held) {
            limiter.on_complete(now, now - arrived, signal, &mut self.services[s].limit_rng);
            self.jobs.get_mut(job).expect("live").limit_held = false;
        }
        if let Some(tracer) = self.tracer.as_deref_mut() {
            let outcome = match answer {
                Answer::Success => "success",
                Answer::Degraded => "degraded",
                Answer::Refused => "refused",
                Answer::Error => "error",
            };
            tracer.serve_ended(job, now, outcome);
        }
        let time_culprit = self.job_lag(job, s).culprit;
        self.release_job(now, job);
        let a = self.attempts.get_mut(attempt).expect("live");
        (a.job, a.cause, a.time_culprit) = (None, cause, time_culprit);
        self.answer(attempt, answer, scheduler);
    }

    /// Frees what `job` holds (worker, shedder and limiter places, its place among those
    /// present), accounts its busy time (wasted if its caller had let go), removes it.
    /// Its attempt keeps `in_flight` only if an answer is on the way, which the caller sets.
    fn release_job(&mut self, now: Nanos, job: SlabKey) {
        // A job released without an answer (its caller let go) ends its serve span here.
        if let Some(tracer) = self.tracer.as_deref_mut() {
            tracer.serve_ended(job, now, "cancelled");
        }
        self.release_worker(now, job);
        let j = self.jobs.remove(job).expect("live job");
        debug_assert!(j.first_child.is_none(), "children cancelled or done first");
        let i = j.instance as usize;
        // Released while waiting on calls (its caller let go): no longer counted. Every
        // job released here is of its instance's current life (a stranded one is not).
        if j.awaiting {
            debug_assert_eq!(self.instances[i].epoch, j.epoch);
            self.count_awaiting(now, i, j.blocked, false);
        }
        let s = self.instances[i].service as usize;
        self.advance(s, now);
        let instance = &mut self.instances[i];
        instance.present -= 1;
        self.services[s].present -= 1;
        if j.shed_held {
            instance.shedder.as_mut().expect("held").release();
        }
        if j.limit_held {
            instance.limiter.as_mut().expect("held").abandon();
        }
        if j.counted {
            let waiting = self.attempts.get(j.attempt).is_some_and(|a| a.caller_waiting);
            let results = &mut self.services[s].results;
            let busy_s = j.busy_ns as f64 / crate::kernel::time::NANOS_PER_SEC as f64;
            results.busy_s += busy_s;
            if !waiting {
                results.wasted_s += busy_s;
            }
        }
    }

    /// The caller let go of `job`'s attempt and the service cancels abandoned work:
    /// a queued job is dropped when it reaches the head; a running one frees its worker
    /// now and cancels its own calls.
    pub(super) fn abandon_job(&mut self, now: Nanos, job: SlabKey, scheduler: &mut Scheduler<Event>) {
        let Some(j) = self.jobs.get_mut(job) else { return };
        if j.cancelled {
            return;
        }
        j.cancelled = true;
        let (state, counted, i, attempt) = (j.state, j.counted, j.instance as usize, j.attempt);
        if self.stranded(job) {
            return self.strand(now, job, scheduler);
        }
        if counted {
            self.services[self.instances[i].service as usize].results.cancelled += 1;
        }
        // Queued, or waiting on another's cache fetch: dropped when it is next reached.
        if matches!(state, JobState::Queued { .. })
            || self.jobs.get(job).expect("live").cache_role == CacheRole::Waiting
        {
            return;
        }
        self.fetch_abandoned(now, job, scheduler);
        self.cancel_children(now, job, scheduler);
        self.release_job(now, job);
        let a = self.attempts.get_mut(attempt).expect("live");
        a.job = None;
        a.in_flight = false;
        self.drop_attempt_if_done(attempt);
        self.dispatch(now, i, scheduler);
    }

    /// Whether `job`'s instance crashed since it arrived.
    fn stranded(&self, job: SlabKey) -> bool {
        let j = self.jobs.get(job).expect("live job");
        self.instances[j.instance as usize].epoch != j.epoch
    }

    /// Ends a job its crashed instance lost: no answer (its caller times out), its calls
    /// cancelled; the instance's counters were reset by the crash.
    pub(super) fn strand(&mut self, now: Nanos, job: SlabKey, scheduler: &mut Scheduler<Event>) {
        if let Some(tracer) = self.tracer.as_deref_mut() {
            let service = self.instances[self.jobs.get(job).expect("live job").instance as usize].service;
            tracer.dequeued(job, now, service, "crash");
            tracer.serve_ended(job, now, "crash");
        }
        self.cancel_children(now, job, scheduler);
        let j = self.jobs.remove(job).expect("live job");
        if let Some(a) = self.attempts.get_mut(j.attempt) {
            a.job = None;
            a.in_flight = false;
            self.drop_attempt_if_done(j.attempt);
        }
    }
}
