//! A call's life above the attempt: it is created with its tokens drawn (common
//! random numbers: the same call whatever the stack), walks down the gates from its
//! position, is refused by one or parked in one, is released gate by gate with what
//! its attempts taught, and ends served or failed for exactly one reason.

use crate::kernel::sim::Scheduler;
use crate::kernel::slab::SlabKey;
use crate::kernel::time::Nanos;
use crate::kernel::Named;
use crate::measurement::ending::Ending as CallEnding;

use super::gate::Gate;
use super::gates::Entry;
use super::model::{tokens, Gateway};
use super::params::Client;
use super::reason::Reason;
use super::state::{Call, Ending, Event, Feedback, Origin};

impl Gateway<'_> {
    pub(super) fn start_call(&mut self, now: Nanos, class: usize, origin: Origin, scheduler: &mut Scheduler<Event>) {
        let Origin { turn, slot, instance, tenant } = origin;
        let params = &self.p.classes[class];
        // Common random numbers: the tokens are the call's, whatever the stack does.
        let input = tokens(&mut self.tokens, params.input_tokens);
        let cached = if params.cache_hit_ratio > 0.0 && self.cache_rng.bernoulli(params.cache_hit_ratio) {
            (input as f64 * params.cacheable_prefix) as u64
        } else {
            0
        };
        let output = tokens(&mut self.tokens, params.output_tokens).min(params.max_tokens);
        let counted = now >= self.p.warmup;
        self.results.classes[class].offered += counted as u64;
        let deadline = match self.p.client {
            Client::Stack => now + self.p.classes[class].deadline,
            Client::Naive { timeout, .. } => now + timeout,
        };
        let mut call = Call {
            class: class as u8,
            turn,
            slot,
            instance,
            tenant,
            counted,
            started_at: now,
            deadline,
            input,
            cached,
            output,
            pos: 0,
            attempts: 0,
            tries: 0,
            admitted: false,
            bulkhead: false,
            limiter: false,
            permit: None,
            reservation: None,
            meter: 0,
            quota_waited: 0,
            previous_backoff: 0,
            attempt: None,
        };
        // Admission first (the usual stack) and no trace to write: decide before the
        // call is built. A shed call (most of the outer classes' under pressure) ends
        // here, as a refusal at the first gate would, without a slab entry or a walk.
        let up_front = self.tracer.is_none() && self.p.gates.first() == Some(&Gate::Admission);
        if up_front && matches!(self.p.client, Client::Stack) {
            match self.admission_decision(now, (&call).into()) {
                Entry::Refuse(reason) => return self.call_over(now, &call, Ending::Failed(reason), scheduler),
                Entry::Pass => (call.admitted, call.pos) = (true, 1),
                Entry::Park => unreachable!("admission never parks a call"),
            }
        }
        let key = self.calls.insert(call);
        if let Some(trace) = self.tracer.as_deref_mut() {
            trace.rows.call_started(key, turn, self.p.class_names[class], counted, now);
            trace.rows.call_tokens(key, u32::from(tenant), input as u32);
        }
        self.walk(now, key, scheduler);
    }

    /// Passes the call through the gates from `pos` on; sends an attempt when all are passed.
    pub(super) fn walk(&mut self, now: Nanos, key: SlabKey, scheduler: &mut Scheduler<Event>) {
        let Client::Stack = self.p.client else {
            return self.send(now, key, scheduler);
        };
        self.trace_wait_ends(now, key);
        loop {
            let pos = self.call(key).pos as usize;
            let Some(&gate) = self.p.gates.get(pos) else {
                return self.send(now, key, scheduler);
            };
            match self.enter(gate, now, key, scheduler) {
                Entry::Pass => self.call_mut(key).pos += 1,
                Entry::Refuse(reason) => return self.refused(now, key, reason, scheduler),
                Entry::Park => return self.trace_wait_starts(now, key, gate),
            }
        }
    }

    pub(super) fn refused(&mut self, now: Nanos, key: SlabKey, reason: Reason, scheduler: &mut Scheduler<Event>) {
        debug_assert!(reason.is_local());
        self.trace_refusal(now, key, reason);
        let feedback = Feedback {
            ending: Ending::Failed(reason),
            reached_provider: false,
            sample: 0,
            duration: 0,
            output_used: 0,
            sampled: false,
        };
        self.attempt_over(now, key, feedback, None, scheduler);
    }

    /// Releases the gates at positions [from, to) that the call holds, innermost first,
    /// feeding each what the attempt (or the call) taught.
    pub(super) fn release(&mut self, now: Nanos, key: SlabKey, from: usize, to: usize, feedback: Feedback) {
        for pos in (from..to.min(self.p.gates.len())).rev() {
            self.release_gate(self.p.gates[pos], now, key, feedback);
        }
    }

    pub(super) fn end_call(&mut self, now: Nanos, key: SlabKey, ending: Ending, scheduler: &mut Scheduler<Event>) {
        let call = self.calls.remove(key).expect("a live call");
        debug_assert!(call.attempt.is_none() && !call.admitted && !call.bulkhead && !call.limiter);
        debug_assert!(call.permit.is_none() && call.reservation.is_none());
        self.trace_call_ended(now, key, ending);
        self.call_over(now, &call, ending, scheduler);
    }

    /// What a call's end changes: its class's counts, the budget, its turn. `end_call`
    /// after removing it from the slab, or `start_call` for a call refused before it
    /// was built.
    fn call_over(&mut self, now: Nanos, call: &Call, ending: Ending, scheduler: &mut Scheduler<Event>) {
        let class = call.class as usize;
        let served = ending == Ending::Success;
        let fallback = !served && self.serves_fallback(class);
        if call.counted {
            self.call_latency[class].record(now - call.started_at);
            if let Some(histograms) = &mut self.class_histograms[class] {
                let ending = if served { CallEnding::Ok } else { CallEnding::Failed };
                histograms.calls.record(self.histograms, now, ending, now - call.started_at);
            }
            let results = &mut self.results.classes[class];
            results.cache_hits += (call.cached > 0) as u64;
            results.cached_tokens += call.cached;
        }
        if call.counted {
            let results = &mut self.results.classes[class];
            match ending {
                Ending::Success => results.served += 1,
                Ending::Failed(reason) => {
                    results.failed += 1;
                    results.reasons[reason.index()] += 1;
                    results.fallbacks += fallback as u64;
                    if let Some(t) = self.results.tenants.get_mut(call.tenant as usize).filter(|_| reason.is_local()) {
                        t.calls_refused += 1;
                    }
                }
            }
        }
        if served {
            if let Some(budget) = &mut self.budget {
                budget.on_success();
            }
        }
        if let Some(turn) = call.turn {
            self.turn_step(now, turn, call, served, fallback, scheduler);
        }
    }
}
