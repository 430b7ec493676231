//! The event kernel: a clock, the pending-event set and a statically dispatched model.
//!
//! A model is a plain struct implementing [`Model`]; its `Event` type is a small
//! `Copy` enum. [`Simulation::run_until`] pops events in (time, push order) and hands
//! each to [`Model::handle`] together with the [`Scheduler`], through which the model
//! schedules follow-up events. Dispatch is monomorphised: there is no `Box<dyn>` and
//! no allocation per event. The clock never goes backwards: scheduling in the past is
//! a bug and is asserted against.

use crate::event_queue::EventQueue;
use crate::time::Nanos;

/// A discrete-event model: owns all entity state and reacts to its own events.
pub trait Model {
    /// The model's events. Keep them small (16–24 bytes): they are copied through the heap.
    type Event: Copy;

    /// Reacts to `event` at time `now` (equal to `scheduler.now()`).
    fn handle(&mut self, now: Nanos, event: Self::Event, scheduler: &mut Scheduler<Self::Event>);
}

/// The clock and the pending events, as the model sees them.
#[derive(Debug)]
pub struct Scheduler<E: Copy> {
    queue: EventQueue<E>,
    now: Nanos,
}

impl<E: Copy> Scheduler<E> {
    /// A scheduler at time zero with room for `capacity` pending events.
    pub fn with_capacity(capacity: usize) -> Self {
        Scheduler { queue: EventQueue::with_capacity(capacity), now: 0 }
    }

    /// The current simulated time.
    #[inline]
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Schedules `event` at absolute time `time` (not before now).
    #[inline]
    pub fn at(&mut self, time: Nanos, event: E) {
        debug_assert!(time >= self.now, "scheduled in the past: {time} < {}", self.now);
        self.queue.push(time, event);
    }

    /// Schedules `event` after `delay` nanoseconds.
    #[inline]
    pub fn after(&mut self, delay: Nanos, event: E) {
        self.queue.push(self.now.saturating_add(delay), event);
    }

    /// Number of pending events.
    pub fn pending(&self) -> usize {
        self.queue.len()
    }
}

/// A model together with its scheduler.
#[derive(Debug)]
pub struct Simulation<M: Model> {
    /// The model; read its state after a run.
    pub model: M,
    scheduler: Scheduler<M::Event>,
    events_handled: u64,
}

impl<M: Model> Simulation<M> {
    /// Wraps `model`, reserving room for `event_capacity` pending events.
    pub fn new(model: M, event_capacity: usize) -> Self {
        Simulation { model, scheduler: Scheduler::with_capacity(event_capacity), events_handled: 0 }
    }

    /// The scheduler, to seed the first events before running.
    pub fn scheduler(&mut self) -> &mut Scheduler<M::Event> {
        &mut self.scheduler
    }

    /// The current simulated time.
    pub fn now(&self) -> Nanos {
        self.scheduler.now
    }

    /// Events handled so far.
    pub fn events_handled(&self) -> u64 {
        self.events_handled
    }

    /// Handles every event with time ≤ `horizon` in order, then advances the clock to
    /// `horizon`. Events after the horizon stay pending. May be called repeatedly with
    /// growing horizons. Returns the number of events handled by this call.
    pub fn run_until(&mut self, horizon: Nanos) -> u64 {
        debug_assert!(horizon >= self.scheduler.now, "horizon {horizon} is in the past");
        let start = self.events_handled;
        while self.scheduler.queue.peek_time().is_some_and(|time| time <= horizon) {
            self.step();
        }
        self.scheduler.now = horizon;
        self.events_handled - start
    }

    /// Handles the next pending event if it is due by `horizon`; `false` (and nothing
    /// handled, the clock unchanged) when none is.
    #[inline]
    pub fn step_within(&mut self, horizon: Nanos) -> bool {
        if self.scheduler.queue.peek_time().is_some_and(|time| time <= horizon) {
            self.step();
            true
        } else {
            false
        }
    }

    /// Handles the next pending event, whatever its time; returns that time, or
    /// `None` when nothing is pending. The event stays at the heap's root while it is
    /// handled, so the first event the model schedules replaces it in one walk down
    /// the heap (see [`EventQueue::take_root`]).
    #[inline]
    pub fn step(&mut self) -> Option<Nanos> {
        let (time, event) = self.scheduler.queue.take_root()?;
        debug_assert!(time >= self.scheduler.now, "time went backwards");
        self.scheduler.now = time;
        self.model.handle(time, event, &mut self.scheduler);
        self.scheduler.queue.settle();
        self.events_handled += 1;
        Some(time)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the order in which events arrive.
    struct Recorder {
        seen: Vec<(Nanos, u32)>,
    }

    impl Model for Recorder {
        type Event = u32;
        fn handle(&mut self, now: Nanos, event: u32, scheduler: &mut Scheduler<u32>) {
            self.seen.push((now, event));
            if event < 3 {
                // A follow-up at the same instant runs after everything already due then.
                scheduler.after(0, event + 10);
            }
        }
    }

    #[test]
    fn runs_in_time_then_fifo_order_and_stops_at_the_horizon() {
        let mut sim = Simulation::new(Recorder { seen: vec![] }, 8);
        sim.scheduler().at(5, 1);
        sim.scheduler().at(5, 2);
        sim.scheduler().at(2, 0);
        sim.scheduler().at(9, 7);
        let handled = sim.run_until(6);
        assert_eq!(sim.model.seen, vec![(2, 0), (2, 10), (5, 1), (5, 2), (5, 11), (5, 12)]);
        assert_eq!(handled, 6);
        assert_eq!(sim.now(), 6);
        assert_eq!(sim.scheduler().pending(), 1);
        sim.run_until(9);
        assert_eq!(sim.model.seen.last(), Some(&(9, 7)));
        assert_eq!(sim.events_handled(), 7);
    }
}
