//! The attempt loop: an attempt is sent to its tier, which refuses it at the door
//! (429, 529), queues it or starts it; the client's timeouts and the provider's plan
//! fix how it ends, scheduled as one `AttemptEnd` (plus a `FirstToken` for a
//! stream), both stamped with the attempt's ticket so a reschedule makes them stale.
//! When it ends, the gates inside the loop are released and the loop retries after a
//! backoff ([`super::gates`]' retry) or releases the rest and ends the call.

use crate::components::provider::{Arrival, CallSpec, ServicePlan};
use crate::kernel::sim::Scheduler;
use crate::kernel::slab::SlabKey;
use crate::kernel::time::Nanos;
use crate::kernel::timer::{Ticket, TicketStamp};

use super::gate::Gate;
use super::model::{earliest, Gateway};
use super::params::Client;
use super::reason::Reason;
use super::state::{Attempt, AttemptState, Call, Ending, Event, Feedback};

impl Gateway<'_> {
    /// Sends the call's attempt to its tier.
    pub(super) fn send(&mut self, now: Nanos, key: SlabKey, scheduler: &mut Scheduler<Event>) {
        let call = self.call_mut(key);
        call.attempts += 1;
        let (class, counted, attempts, deadline, output) =
            (call.class as usize, call.counted, call.attempts, call.deadline, call.output);
        let input_tokens = self.metered_input(self.call(key));
        let params = &self.p.classes[class];
        let (timeouts, max_tokens, tier) = (params.timeouts, params.max_tokens, params.tier);
        let (give_up_at, give_up_reason) = match self.p.client {
            // The naive client's one timeout per call is all it has.
            Client::Naive { .. } => (deadline, Reason::TimeoutTotal),
            // Without the attempt loop there are no attempt timeouts, only the deadline.
            Client::Stack if self.retry_pos.is_none() => (deadline, Reason::TimeoutDeadline),
            Client::Stack if deadline <= now + timeouts.total => (deadline, Reason::TimeoutDeadline),
            Client::Stack => (now + timeouts.total, Reason::TimeoutTotal),
        };
        let spec = CallSpec { id: 0, input_tokens, output_tokens: output, max_tokens };
        // The total and the tier's: one bucket index for both.
        let bucket = (now / self.p.series_bucket) as usize;
        if let Some(count) = self.series.attempts.get_mut(bucket) {
            *count += 1;
            self.series.tier_attempts[tier][bucket] += 1;
        }
        let results = &mut self.results.classes[class];
        if counted {
            results.attempts += 1;
            results.retries += (attempts > 1) as u64;
        }
        let attempt = self.attempts.insert(Attempt {
            call: key,
            spec,
            tier: tier as u8,
            state: AttemptState::Queued,
            ticket: Ticket::default(),
            sent_at: now,
            give_up_at,
            give_up_reason,
            ending: Ending::Success,
            retry_after: None,
            plan: None,
            sampled: false,
        });
        let spec = CallSpec { id: attempt.to_bits(), ..spec };
        self.attempt_mut(attempt).spec = spec;
        self.call_mut(key).attempt = Some(attempt);
        self.in_flight[tier] += 1;
        if let Some(trace) = self.tracer.as_deref_mut() {
            trace.rows.attempt_sent(key, now, tier as u32);
        }
        match self.providers[tier].arrive(now, spec, &mut self.provider_rng) {
            Arrival::RateLimited { respond_at, retry_after } => {
                self.attempt_mut(attempt).state = AttemptState::Refused;
                self.resolve(attempt, Ending::Failed(Reason::Http429), respond_at, Some(retry_after), scheduler)
            }
            Arrival::Overloaded { respond_at, retry_after } => {
                self.attempt_mut(attempt).state = AttemptState::Refused;
                self.resolve(attempt, Ending::Failed(Reason::Http529), respond_at, Some(retry_after), scheduler)
            }
            Arrival::Started(plan) => self.started(now, plan, scheduler),
            Arrival::Queued { gives_up_at } => {
                let connect = Some((now + timeouts.connect, Reason::TimeoutConnect))
                    .filter(|_| self.p.client == Client::Stack && self.retry_pos.is_some());
                // The provider's queue giving up reads as a 529; on a tie it answers first.
                let candidates = [connect, Some((give_up_at, give_up_reason)), None];
                let (at, ending) = earliest(candidates, (gives_up_at, Ending::Failed(Reason::Http529)));
                self.resolve(attempt, ending, at, None, scheduler);
            }
        }
    }

    /// Records how and when an attempt will end and schedules that end.
    pub(super) fn resolve(
        &mut self,
        key: SlabKey,
        ending: Ending,
        at: Nanos,
        retry_after: Option<Nanos>,
        scheduler: &mut Scheduler<Event>,
    ) {
        let attempt = self.attempts.get_mut(key).expect("a live attempt");
        let stamp = attempt.ticket.renew();
        attempt.ending = ending;
        attempt.retry_after = retry_after;
        scheduler.at(at, Event::AttemptEnd { attempt: key, stamp });
    }

    /// The provider gave attempt `plan.id` a server slot: work out how it ends for the client.
    pub(super) fn started(&mut self, now: Nanos, plan: ServicePlan, scheduler: &mut Scheduler<Event>) {
        let key = SlabKey::from_bits(plan.id);
        let attempt = self.attempts.get_mut(key).expect("a started attempt is live");
        if attempt.state == AttemptState::Abandoned {
            // The client left while it queued: the provider drops it at once.
            let spec = CallSpec { output_tokens: 0, ..attempt.spec };
            let tier = attempt.tier as usize;
            self.attempts.remove(key);
            self.provider_finish(now, tier, spec, false);
            return;
        }
        debug_assert_eq!(attempt.state, AttemptState::Queued);
        attempt.state = AttemptState::Started;
        attempt.plan = Some(plan);
        let call = self.calls.get(attempt.call).expect("an attempt's call is live");
        let params = &self.p.classes[call.class as usize];
        let timed = self.p.client == Client::Stack && self.retry_pos.is_some();
        let (timeouts, streamed) = (params.timeouts, params.streamed);
        // What the client sees first: the first token of a stream, else the whole response.
        let visible = if streamed { plan.first_token_at } else { plan.done_at };
        let first_token = (attempt.sent_at + timeouts.first_token, Reason::TimeoutFirstToken);
        let first_token = Some(first_token).filter(|&(limit, _)| timed && visible > limit);
        let gap = (plan.done_at - plan.first_token_at) / attempt.spec.output_tokens.max(1);
        let inter_token = timeouts
            .inter_token
            .filter(|&limit| timed && streamed && gap > limit)
            .map(|limit| (plan.first_token_at + limit, Reason::TimeoutInterToken));
        let total = Some((attempt.give_up_at, attempt.give_up_reason)).filter(|_| plan.done_at > attempt.give_up_at);
        // On a tie a stream blames the token it waited for; a whole response, the total.
        let candidates = if streamed { [first_token, inter_token, total] } else { [total, first_token, None] };
        let completed =
            (plan.done_at, if plan.server_error { Ending::Failed(Reason::Http500) } else { Ending::Success });
        let (at, ending) = earliest(candidates, completed);
        let at = at.max(now);
        self.resolve(key, ending, at, None, scheduler);
        if streamed && plan.first_token_at < at {
            let stamp = self.attempt_mut(key).ticket.current();
            scheduler.at(plan.first_token_at, Event::FirstToken { attempt: key, stamp });
        }
    }

    /// The first token of a streamed attempt: the limiter learns its latency now, not
    /// when the stream ends.
    pub(super) fn first_token(&mut self, now: Nanos, key: SlabKey, stamp: TicketStamp) {
        let Some(attempt) = self.attempts.get_mut(key) else { return };
        if !attempt.ticket.matches(stamp) || attempt.state != AttemptState::Started {
            return;
        }
        let call = self.calls.get(attempt.call).expect("an attempt's call is live");
        if call.limiter {
            attempt.sampled = true;
            let sample = now - attempt.sent_at;
            self.limiter_learns_first_token(now, call.class as usize, sample);
        }
    }

    /// Frees a server slot on `tier`; starts the waiters it hands slots to.
    pub(super) fn provider_finish(&mut self, now: Nanos, tier: usize, spec: CallSpec, server_error: bool) {
        let mut gave_up = std::mem::take(&mut self.provider_gave_up);
        if let Some(plan) =
            self.providers[tier].finish(now, spec, server_error, &mut self.provider_rng, |id| gave_up.push(id))
        {
            self.provider_started.push(plan);
        }
        for id in gave_up.drain(..) {
            let key = SlabKey::from_bits(id);
            // An abandoned waiter is forgotten; a live one already has its give-up event.
            if self.attempts.get(key).is_some_and(|a| a.state == AttemptState::Abandoned) {
                self.attempts.remove(key);
            }
        }
        self.provider_gave_up = gave_up;
    }

    pub(super) fn attempt_end(
        &mut self,
        now: Nanos,
        key: SlabKey,
        stamp: TicketStamp,
        scheduler: &mut Scheduler<Event>,
    ) {
        let Some(attempt) = self.attempts.get(key).copied() else { return };
        if !attempt.ticket.matches(stamp) || attempt.state == AttemptState::Abandoned {
            return;
        }
        self.in_flight[attempt.tier as usize] -= 1;
        if let (Some(plan), true, true) = (attempt.plan, self.tracer.is_some(), attempt.state == AttemptState::Started)
        {
            let call = self.calls.get(attempt.call).expect("an attempt's call is live");
            let generated = generated_tokens(now, &plan, attempt.spec.output_tokens);
            let usd = if plan.server_error {
                0.0
            } else {
                self.bill(attempt.tier as usize, (call.input, call.cached), generated)
            };
            let trace = self.tracer.as_deref_mut().expect("tracing");
            trace.rows.attempt_billed(attempt.call, generated as u32, (usd * 1e9).round() as u64);
        }
        self.trace_attempt(now, &attempt);
        let mut feedback = Feedback {
            ending: attempt.ending,
            reached_provider: true,
            sample: now - attempt.sent_at,
            duration: now - attempt.sent_at,
            output_used: 0,
            sampled: attempt.sampled,
        };
        match (attempt.state, attempt.plan) {
            (AttemptState::Started, Some(plan)) => self.started_attempt_ended(now, key, &attempt, plan, &mut feedback),
            (AttemptState::Refused, _) => {
                self.attempts.remove(key);
            }
            (AttemptState::Queued, _) => {
                // The client (or the provider's queue) gave up while it waited for a slot:
                // it stays in the provider's queue until the provider gets to it.
                self.attempt_mut(key).state = AttemptState::Abandoned;
            }
            _ => unreachable!("an attempt ends once"),
        }
        let call = attempt.call;
        self.call_mut(call).attempt = None;
        self.attempt_over(now, call, feedback, attempt.retry_after, scheduler);
    }

    /// A started attempt's bill, USD, on `tier` for a call's (input, cached) tokens and
    /// `generated` output: input once the server started (a cached token at the cache
    /// price), output as generated. A 500 is free: the callers do not bill it.
    #[inline]
    fn bill(&self, tier: usize, (input, cached): (u64, u64), generated: u64) -> f64 {
        let t = &self.p.tiers[tier];
        let billed_input = (input - cached) as f64 + cached as f64 * self.p.cache_price_weight;
        (billed_input * t.usd_per_mtok_in + generated as f64 * t.usd_per_mtok_out) / 1e6
    }

    /// A started attempt ended at `now` (done, failed or timed out): what it generated,
    /// what the client saw first, what it cost, its latencies; the server slot is freed.
    fn started_attempt_ended(
        &mut self,
        now: Nanos,
        key: SlabKey,
        attempt: &Attempt,
        plan: ServicePlan,
        feedback: &mut Feedback,
    ) {
        let call = self.calls.get(attempt.call).expect("an attempt's call is live");
        let (class, counted, tokens) = (call.class as usize, call.counted, (call.input, call.cached));
        let (turn, tenant) = (call.turn, call.tenant as usize);
        let generated = generated_tokens(now, &plan, attempt.spec.output_tokens);
        feedback.output_used = generated;
        let streamed = self.p.classes[class].streamed;
        feedback.sample = if streamed && now >= plan.first_token_at {
            plan.first_token_at - attempt.sent_at
        } else {
            now - attempt.sent_at
        };
        if counted && !plan.server_error {
            let usd = self.bill(attempt.tier as usize, tokens, generated);
            let results = &mut self.results.classes[class];
            if attempt.ending == Ending::Success {
                results.useful_usd += usd;
            } else {
                results.wasted_usd += usd;
            }
            if let Some(turn) = turn.and_then(|key| self.turns.get_mut(key)) {
                turn.usd += usd;
            }
            if let Some(t) = self.results.tenants.get_mut(tenant) {
                t.usd += usd;
            }
        }
        if attempt.ending == Ending::Success {
            let total = now - attempt.sent_at;
            // Counted like the counts: from the warm-up on.
            if counted {
                if let Some(histograms) = &self.class_histograms[class] {
                    self.histograms[histograms.ttft].record(feedback.sample);
                    self.histograms[histograms.total].record(total);
                }
                self.attempt_latency[class].record(total);
            }
            let expected = &mut self.expected_latency[class];
            *expected = (*expected as f64 * 0.9 + total as f64 * 0.1) as Nanos;
        }
        self.attempts.remove(key);
        let spec = CallSpec { output_tokens: generated, ..attempt.spec };
        self.provider_finish(now, attempt.tier as usize, spec, plan.server_error && now >= plan.done_at);
    }

    /// An attempt ended (or a local gate refused the call at `pos`): release the gates
    /// inside the attempt loop, then retry or end the call.
    pub(super) fn attempt_over(
        &mut self,
        now: Nanos,
        key: SlabKey,
        feedback: Feedback,
        retry_after: Option<Nanos>,
        scheduler: &mut Scheduler<Event>,
    ) {
        let &Call { pos, attempts, deadline, .. } = self.call(key);
        let inside_loop = self.retry_pos.is_some_and(|r| r < pos);
        if let Some(retry_pos) = self.retry_pos.filter(|_| inside_loop) {
            self.call_mut(key).tries += 1;
            self.release(now, key, retry_pos as usize + 1, pos as usize, feedback);
            if let Some(delay) = self.retry_delay(now, key, feedback, retry_after) {
                let call = self.call_mut(key);
                call.pos = retry_pos + 1;
                call.previous_backoff = delay;
                call.quota_waited = 0;
                scheduler.at(now + delay, Event::Resume { call: key });
                self.trace_wait_starts(now, key, Gate::Retry);
                return;
            }
            self.release(now, key, 0, retry_pos as usize, feedback);
        } else if let Client::Naive { attempts: max_attempts, .. } = self.p.client {
            if let Ending::Failed(reason) = feedback.ending {
                if attempts < max_attempts && !matches!(reason, Reason::TimeoutTotal) && now < deadline {
                    return self.send(now, key, scheduler); // again, at once
                }
            }
        } else {
            self.release(now, key, 0, pos as usize, feedback);
        }
        self.end_call(now, key, feedback.ending, scheduler);
    }
}

/// Output tokens the provider generated by `now`: all of them once done (none on a
/// server error), none before the first token, in proportion in between.
fn generated_tokens(now: Nanos, plan: &ServicePlan, output_tokens: u64) -> u64 {
    if now >= plan.done_at {
        if plan.server_error {
            0
        } else {
            output_tokens
        }
    } else if now <= plan.first_token_at {
        0
    } else {
        let fraction = (now - plan.first_token_at) as f64 / (plan.done_at - plan.first_token_at) as f64;
        (output_tokens as f64 * fraction) as u64
    }
}
