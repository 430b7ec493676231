//! A turn's walk through its [`TurnPlan`](super::params::TurnPlan): it arrives, draws
//! which planned calls it makes (one uniform per call with a probability below 1, in
//! plan order), and starts its steps one after the other — a step's calls together,
//! the next step once all of them have ended. A failed call with a fallback class is
//! replaced by that class's call in the same slot; a required call that fails for
//! good fails the turn once its step is over. When the last foreground step is done
//! the turn is answered and the background steps after it start.
//!
//! Invariants: `pending` counts the step's running calls (plus one while the step
//! starts them), so a call that ends before its siblings are started cannot end the
//! step early; a turn leaves the slab exactly once, answered or failed.

use crate::kernel::sim::Scheduler;
use crate::kernel::slab::SlabKey;
use crate::kernel::time::Nanos;

use super::model::{count_in_bucket, Gateway};
use super::state::{Call, Event, Origin, Turn};
use crate::measurement::ending::Ending as CallEnding;

impl Gateway<'_> {
    pub(super) fn turn_arrival(&mut self, now: Nanos, scheduler: &mut Scheduler<Event>) {
        if let Some(next) = self.interarrival(now).map(|gap| now.saturating_add(gap)) {
            if next < self.p.horizon {
                scheduler.at(next, Event::TurnArrival);
            }
        }
        let mut drawn = 0u32;
        for (i, planned) in self.p.plan.calls.iter().enumerate() {
            let probability = planned.probability.unwrap_or(self.p.classes[planned.class].share);
            if probability >= 1.0 || self.turn_rng.bernoulli(probability) {
                drawn |= 1 << i;
            }
        }
        let (instance, tenant) = self.draw_instance_and_tenant();
        let counted = now >= self.p.warmup;
        self.results.turns_offered += counted as u64;
        if let Some(t) = self.results.tenants.get_mut(tenant as usize) {
            t.turns_offered += counted as u64;
        }
        let turn = self.turns.insert(Turn {
            arrived_at: now,
            counted,
            instance,
            tenant,
            step: 0,
            pending: 0,
            failed: false,
            drawn,
            succeeded: 0,
            degraded: false,
            usd: 0.0,
        });
        if let Some(trace) = self.tracer.as_deref_mut() {
            trace.rows.group_started(turn);
        }
        self.next_step(now, turn, scheduler);
    }

    /// The gateway instance a turn (or a replayed call) lands on, and its tenant.
    pub(super) fn draw_instance_and_tenant(&mut self) -> (u16, u16) {
        let instance = self.turn_rng.below(self.p.instances as u64) as u16;
        // Tenant 0 sends `hot_tenant_share` of the turns; the others share the rest.
        let hot = self.turn_rng.bernoulli(self.p.hot_tenant_share);
        // One of the others, evenly (one draw whatever the count: common random numbers).
        let other = self.turn_rng.below((self.p.tenants as u64 - 1).max(1));
        let tenant = if hot || self.p.tenants == 1 { 0 } else { 1 + other } as u16;
        (instance, tenant)
    }

    /// The class planned call `slot` makes in `turn`, if it makes one.
    #[inline]
    fn planned_class(&self, turn: &Turn, slot: usize) -> Option<usize> {
        let planned = &self.p.plan.calls[slot];
        if planned.needs.is_some_and(|n| turn.succeeded & (1 << n) == 0) {
            return None;
        }
        if turn.drawn & (1 << slot) != 0 {
            Some(planned.class)
        } else {
            planned.otherwise
        }
    }

    /// Starts the turn's next step (skipping steps with no call to make), or ends the
    /// turn answered when no foreground step is left.
    fn next_step(&mut self, now: Nanos, key: SlabKey, scheduler: &mut Scheduler<Event>) {
        loop {
            let turn = self.turns.get_mut(key).expect("a live turn");
            debug_assert!(turn.pending == 0 && !turn.failed);
            let index = turn.step as usize;
            if index >= self.answered_at {
                // Answered: what is left runs in the background, outside the turn's latency.
                let turn = *turn;
                self.end_turn(now, key, true);
                for step in index..self.p.plan.steps.len() {
                    self.start_background(now, &turn, step, scheduler);
                }
                return;
            }
            turn.step += 1;
            let turn = *turn;
            let step = self.p.plan.steps[index];
            if step.background {
                self.start_background(now, &turn, index, scheduler);
                continue;
            }
            let origin = |slot: usize| Origin {
                turn: Some(key),
                slot: slot as u8,
                instance: turn.instance,
                tenant: turn.tenant,
            };
            if step.end == step.first + 1 {
                // One call (most steps): the step waits for it alone.
                let Some(class) = self.planned_class(&turn, step.first) else { continue };
                self.turns.get_mut(key).expect("live").pending = 1;
                return self.start_call(now, class, origin(step.first), scheduler);
            }
            // A group: held at one while its calls start, so that none can end the step early.
            self.turns.get_mut(key).expect("live").pending = 1;
            for slot in step.first..step.end {
                let turn = self.turns.get_mut(key).expect("held by `pending`");
                if turn.failed {
                    break; // a required call already failed: the rest are not made
                }
                let copy = *turn;
                if let Some(class) = self.planned_class(&copy, slot) {
                    self.turns.get_mut(key).expect("live").pending += 1;
                    self.start_call(now, class, origin(slot), scheduler);
                }
            }
            return self.call_done(now, key, scheduler);
        }
    }

    /// Starts the calls of background step `step`: nobody waits for them.
    fn start_background(&mut self, now: Nanos, turn: &Turn, step: usize, scheduler: &mut Scheduler<Event>) {
        let step = self.p.plan.steps[step];
        for slot in step.first..step.end {
            if let Some(class) = self.planned_class(turn, slot) {
                let origin = Origin { turn: None, slot: slot as u8, instance: turn.instance, tenant: turn.tenant };
                self.start_call(now, class, origin, scheduler);
            }
        }
    }

    /// The group's calls have all started: release the hold; when none is running, the
    /// turn fails (a required call did) or moves on.
    fn call_done(&mut self, now: Nanos, key: SlabKey, scheduler: &mut Scheduler<Event>) {
        let turn = self.turns.get_mut(key).expect("a live turn");
        debug_assert!(turn.pending > 0);
        turn.pending -= 1;
        if turn.pending > 0 {
            return;
        }
        if turn.failed {
            self.end_turn(now, key, false);
        } else {
            self.next_step(now, key, scheduler);
        }
    }

    /// A turn's call ended: served, served its fallback (a fallback class is called in
    /// its place), or failed.
    pub(super) fn turn_step(
        &mut self,
        now: Nanos,
        key: SlabKey,
        call: &Call,
        served: bool,
        fallback: bool,
        scheduler: &mut Scheduler<Event>,
    ) {
        let slot = call.slot as usize;
        if !served && fallback {
            self.turns.get_mut(key).expect("a live turn").degraded = true;
            if let Some(next) = self.p.classes[call.class as usize].fallback {
                // The slot goes on with the fallback's call; the step still waits for it.
                let origin = Origin { turn: Some(key), slot: slot as u8, instance: call.instance, tenant: call.tenant };
                return self.start_call(now, next, origin, scheduler);
            }
        }
        let turn = self.turns.get_mut(key).expect("a live turn");
        if served || fallback {
            turn.succeeded |= 1 << slot;
        } else if self.p.plan.calls[slot].required {
            turn.failed = true;
        }
        let failed = turn.failed;
        debug_assert!(turn.pending > 0);
        turn.pending -= 1;
        if turn.pending > 0 {
            return;
        }
        if failed {
            self.end_turn(now, key, false);
        } else {
            self.next_step(now, key, scheduler);
        }
    }

    pub(super) fn end_turn(&mut self, now: Nanos, key: SlabKey, answered: bool) {
        let turn = self.turns.remove(key).expect("a live turn");
        if answered {
            count_in_bucket(&mut self.series.answered, self.p.series_bucket, now);
        }
        if turn.counted {
            let r = &mut self.results;
            let ending = if answered {
                r.turns_answered += 1;
                r.turns_degraded += turn.degraded as u64;
                *(if turn.degraded { &mut r.degraded_usd } else { &mut r.full_usd }) += turn.usd;
                if let Some(t) = r.tenants.get_mut(turn.tenant as usize) {
                    t.turns_answered += 1;
                }
                self.turn_latency.record(now - turn.arrived_at);
                CallEnding::Ok
            } else {
                r.turns_failed += 1;
                r.failed_turns_usd += turn.usd;
                CallEnding::Failed
            };
            self.turn_latencies.record(self.histograms, now, ending, now - turn.arrived_at);
        }
    }
}
