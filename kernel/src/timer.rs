//! Cancellable timers without touching the event queue.
//!
//! Most requests set a timeout and most timeouts never fire: the request finishes
//! first. Removing the timeout from the heap would cost O(log n) and a search;
//! instead the owning entity keeps a [`TimerSlot`], the scheduled event carries the
//! [`TimerTicket`] that arming returned, and cancelling just bumps the slot's
//! generation. When the stale event pops, [`TimerSlot::fire`] says no and the model
//! drops it. Re-arming also invalidates the previous ticket, so at most one ticket
//! per slot is ever live.
//!
//! A [`Ticket`] is the other shape: one entity schedules *several* events that
//! stay valid together (an attempt's end and its first token), and a later
//! reschedule makes all of them stale at once. It never disarms on firing; events
//! carry a [`TicketStamp`] and check it with [`Ticket::matches`].

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
        if self.is_live(ticket) {
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

    /// True if `ticket` is the live one: its timer would fire (without firing it).
    #[inline]
    pub fn is_live(&self, ticket: TimerTicket) -> bool {
        self.armed && ticket.0 == self.generation
    }
}

/// The stamp a [`Ticket`] hands out; carried inside events (4 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TicketStamp(u32);

/// A generation counter shared by every event an entity scheduled since its last
/// [`Ticket::renew`]: all of them match until the next renew, however many fire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ticket {
    generation: u32,
}

impl Ticket {
    /// Invalidates every stamp handed out so far and returns the new one.
    #[inline]
    pub fn renew(&mut self) -> TicketStamp {
        self.generation = self.generation.wrapping_add(1);
        TicketStamp(self.generation)
    }

    /// The current stamp, for another event that belongs with the last renew.
    #[inline]
    pub fn current(&self) -> TicketStamp {
        TicketStamp(self.generation)
    }

    /// True if `stamp` was handed out since the last renew.
    #[inline]
    pub fn matches(&self, stamp: TicketStamp) -> bool {
        stamp.0 == self.generation
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_is_shared_until_renewed() {
        let mut ticket = Ticket::default();
        let first = ticket.renew();
        let also_first = ticket.current();
        assert!(ticket.matches(first) && ticket.matches(also_first), "several events share one stamp");
        assert!(ticket.matches(first), "matching does not consume the stamp");
        let second = ticket.renew();
        assert!(!ticket.matches(first) && !ticket.matches(also_first), "a renew makes every older stamp stale");
        assert!(ticket.matches(second));
    }

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
