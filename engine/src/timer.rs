//! Cancellable timers without touching the event queue.
//!
//! Most requests set a timeout and most timeouts never fire: the request finishes
//! first. Removing the timeout from the heap would cost O(log n) and a search;
//! instead the owning entity keeps a [`TimerSlot`], the scheduled event carries the
//! [`TimerTicket`] that arming returned, and cancelling just bumps the slot's
//! generation. When the stale event pops, [`TimerSlot::fire`] says no and the model
//! drops it. Re-arming also invalidates the previous ticket, so at most one ticket
//! per slot is ever live.

/// Proof that a timer was armed at a given generation; carried inside events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimerTicket(u32);

/// A timer's state inside an entity.
#[derive(Clone, Copy, Debug, Default)]
pub struct TimerSlot {
    generation: u32,
    armed: bool,
}

impl TimerSlot {
    /// Arms the timer, invalidating any earlier ticket. Schedule an event carrying
    /// the returned ticket.
    #[inline]
    pub fn arm(&mut self) -> TimerTicket {
        self.generation = self.generation.wrapping_add(1);
        self.armed = true;
        TimerTicket(self.generation)
    }

    /// Cancels the timer: its pending event will be ignored when it pops.
    #[inline]
    pub fn cancel(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        self.armed = false;
    }

    /// Called when a timer event pops: true (and disarms) if `ticket` is the live
    /// one, false if the timer was cancelled or re-armed since.
    #[inline]
    pub fn fire(&mut self, ticket: TimerTicket) -> bool {
        if self.armed && ticket.0 == self.generation {
            self.armed = false;
            true
        } else {
            false
        }
    }

    /// True while a live ticket is outstanding.
    #[inline]
    pub fn is_armed(&self) -> bool {
        self.armed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_and_rearm_invalidate_old_tickets() {
        let mut timer = TimerSlot::default();
        let first = timer.arm();
        timer.cancel();
        assert!(!timer.fire(first));
        let second = timer.arm();
        let third = timer.arm();
        assert!(!timer.fire(second), "re-arming invalidates the earlier ticket");
        assert!(timer.is_armed());
        assert!(timer.fire(third));
        assert!(!timer.fire(third), "a ticket fires once");
        assert!(!timer.is_armed());
    }
}
