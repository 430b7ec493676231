//! The turn pipeline: a turn arrives (Poisson), draws which calls it will make,
//! and moves guard → rewrite (for its share) → answer, or think for the hard share;
//! a failed think is downgraded to answer, a failed answer may go to its fallback
//! tier; once answered, a title call (for its share) is sent, fire and forget.

use crate::kernel::sim::Scheduler;
use crate::kernel::slab::SlabKey;
use crate::kernel::time::Nanos;

use super::model::{count_in_bucket, Gateway};
use super::params::{ANSWER, ANSWER_FALLBACK, GUARD, REWRITE, THINK, TITLE};
use super::results::TURN_HISTOGRAM;
use super::state::{Call, Event, Stage, Turn};

impl Gateway<'_> {
    // ---------------------------------------------------------------- turns

    pub(super) fn turn_arrival(&mut self, now: Nanos, scheduler: &mut Scheduler<Event>) {
        if let Some(next) = self.interarrival(now).map(|gap| now.saturating_add(gap)) {
            if next < self.p.horizon {
                scheduler.at(next, Event::TurnArrival);
            }
        }
        let c = &self.p.classes;
        let (rewrite, hard, title) = (
            self.turn_rng.bernoulli(c[REWRITE].share),
            self.turn_rng.bernoulli(c[THINK].share),
            self.turn_rng.bernoulli(c[TITLE].share),
        );
        let instance = self.turn_rng.below(self.p.instances as u64) as u16;
        // Tenant 0 sends `hot_tenant_share` of the turns; the others share the rest.
        let hot = self.turn_rng.bernoulli(self.p.hot_tenant_share);
        let other = self.turn_rng.below(self.p.tenants as u64);
        let tenant = if hot || self.p.tenants == 1 { 0 } else { 1 + other % (self.p.tenants as u64 - 1) } as u16;
        let counted = now >= self.p.warmup;
        self.results.turns_offered += counted as u64;
        // A guard share below 1 skips the guard for the rest (drawn only then, so the
        // fixture's always-guarded turns consume the stream as before).
        let guard = c[GUARD].share >= 1.0 || self.turn_rng.bernoulli(c[GUARD].share);
        let (stage, class) = match (guard, rewrite, hard) {
            (true, ..) => (Stage::Guard, GUARD),
            (false, true, _) => (Stage::Rewrite, REWRITE),
            (false, false, true) => (Stage::Main, THINK),
            (false, false, false) => (Stage::Main, ANSWER),
        };
        let turn = self.turns.insert(Turn { arrived_at: now, stage, hard, rewrite, title, counted });
        if let Some(trace) = self.tracer.as_deref_mut() {
            trace.rows.group_started(turn);
        }
        self.start_call(now, class, Some(turn), instance, tenant, scheduler);
    }

    /// A turn's call ended: move the turn on.
    pub(super) fn turn_step(
        &mut self,
        now: Nanos,
        key: SlabKey,
        call: &Call,
        served: bool,
        fallback: bool,
        scheduler: &mut Scheduler<Event>,
    ) {
        let class = call.class as usize;
        let turn = *self.turns.get(key).expect("a live turn");
        let (instance, tenant) = (call.instance, call.tenant);
        let next = match (turn.stage, class) {
            (Stage::Guard, GUARD) | (Stage::Rewrite, REWRITE) if served || fallback => {
                if turn.stage == Stage::Guard && turn.rewrite {
                    Some((Stage::Rewrite, REWRITE))
                } else {
                    Some((Stage::Main, if turn.hard { THINK } else { ANSWER }))
                }
            }
            (Stage::Main, THINK) if !served && fallback => Some((Stage::Main, ANSWER)),
            (Stage::Main, ANSWER) if !served && fallback && self.p.answer_fallback => {
                Some((Stage::Main, ANSWER_FALLBACK))
            }
            (Stage::Main, _) if served => {
                self.end_turn(now, key, true);
                if turn.title {
                    self.start_call(now, TITLE, None, instance, tenant, scheduler);
                }
                return;
            }
            _ => None,
        };
        match next {
            Some((stage, class)) => {
                self.turns.get_mut(key).expect("live").stage = stage;
                self.start_call(now, class, Some(key), instance, tenant, scheduler);
            }
            None => self.end_turn(now, key, false),
        }
    }

    pub(super) fn end_turn(&mut self, now: Nanos, key: SlabKey, answered: bool) {
        let turn = self.turns.remove(key).expect("a live turn");
        if answered {
            count_in_bucket(&mut self.series.answered, self.p.series_bucket, now);
        }
        if turn.counted {
            if answered {
                self.results.turns_answered += 1;
                self.histograms[TURN_HISTOGRAM].record(now - turn.arrived_at);
            } else {
                self.results.turns_failed += 1;
            }
        }
    }
}
