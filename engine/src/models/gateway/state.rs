//! The gateway's entities and events. A turn owns its place in the plan; a call owns its place
//! in the stack (`pos`) and what it holds of each gate (a permit, a reservation, a
//! slot); an attempt owns its provider-side state and the ticket that keeps its
//! scheduled events valid. All live in slabs inside [`super::Gateway`], addressed by
//! small `Copy` keys; events carry keys, never references.

use crate::components::provider::{CallSpec, ServicePlan};
use crate::kernel::slab::SlabKey;
use crate::kernel::time::Nanos;
use crate::kernel::timer::{Ticket, TicketStamp};
use crate::measurement::trace::Tracer;
use crate::policy::breaker::{BreakerState, Permit};
use crate::policy::quota::Reservation;

use super::reason::Reason;

/// Events (16 bytes).
#[derive(Clone, Copy, Debug)]
pub enum Event {
    /// A turn arrives.
    TurnArrival,
    /// A replayed call of stream `stream` ([`super::GatewayParams::call_arrivals`]) arrives.
    CallArrival {
        /// The replayed stream (its index).
        stream: u16,
    },
    /// An attempt's precomputed end (stale unless `stamp` matches its ticket).
    AttemptEnd {
        /// The attempt.
        attempt: SlabKey,
        /// Its ticket's stamp when scheduled.
        stamp: TicketStamp,
    },
    /// A streamed attempt's first token reaches the client (same stamp as its end).
    FirstToken {
        /// The attempt.
        attempt: SlabKey,
        /// Its ticket's stamp when scheduled.
        stamp: TicketStamp,
    },
    /// A call resumes its walk down the stack (after a backoff or a quota wait).
    Resume {
        /// The call.
        call: SlabKey,
    },
    /// The periodic sweep: limiter and bulkhead queues' deadlines and CoDel.
    Sweep,
    /// An incident starts or ends.
    Incident {
        /// The incident (its index).
        index: u16,
        /// Whether it starts (else it ends).
        starts: bool,
    },
}

/// A turn walking its plan. Bit `i` of `drawn` and `succeeded` is planned call `i`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Turn {
    pub(super) arrived_at: Nanos,
    pub(super) counted: bool,
    pub(super) instance: u16,
    pub(super) tenant: u16,
    /// The next step to start.
    pub(super) step: u8,
    /// Calls of the current step still running, plus one while the step is starting
    /// them (a call can end before the next is started).
    pub(super) pending: u8,
    /// A required call of the current step failed: the turn fails when it is over.
    pub(super) failed: bool,
    /// The arrival's draws: the planned call is made (else its `otherwise`, if any).
    pub(super) drawn: u32,
    pub(super) succeeded: u32,
    /// A call of the turn failed and was served its fallback (another class, the same
    /// call on another tier, or a local answer): the answer is degraded.
    pub(super) degraded: bool,
    /// What its foreground calls' attempts cost, USD (counted turns only).
    pub(super) usd: f64,
}

/// Where a call comes from: its turn (none for a background call), the planned call it
/// serves, and the turn's gateway instance and tenant.
#[derive(Clone, Copy, Debug)]
pub(super) struct Origin {
    pub(super) turn: Option<SlabKey>,
    pub(super) slot: u8,
    pub(super) instance: u16,
    pub(super) tenant: u16,
}

/// How an attempt ends, decided when the provider answers or starts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ending {
    Success,
    Failed(Reason),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AttemptState {
    /// Answered at the door (429, 529): never held a slot or a place in the queue.
    Refused,
    /// Waiting for a server slot.
    Queued,
    Started,
    /// The client left while it was queued; the provider will find out when it starts it.
    Abandoned,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Attempt {
    pub(super) call: SlabKey,
    pub(super) spec: CallSpec,
    pub(super) tier: u8,
    pub(super) state: AttemptState,
    /// Renewed whenever the attempt's end is (re)scheduled: its end and first-token
    /// events share one stamp, and a reschedule makes both stale.
    pub(super) ticket: Ticket,
    pub(super) sent_at: Nanos,
    /// The client's deadline for this attempt's whole response, and what it is: the
    /// attempt's total timeout, or the caller's deadline when that comes first.
    pub(super) give_up_at: Nanos,
    pub(super) give_up_reason: Reason,
    pub(super) ending: Ending,
    pub(super) retry_after: Option<Nanos>,
    pub(super) plan: Option<ServicePlan>,
    /// Its time to first token went to the limiter when the token arrived.
    pub(super) sampled: bool,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Call {
    pub(super) class: u8,
    pub(super) turn: Option<SlabKey>,
    /// The planned call it serves (its turn's plan index; a fallback keeps its slot).
    pub(super) slot: u8,
    pub(super) instance: u16,
    pub(super) tenant: u16,
    pub(super) counted: bool,
    pub(super) started_at: Nanos,
    pub(super) deadline: Nanos,
    pub(super) input: u64,
    /// Input tokens served from the prompt cache (0 on a miss).
    pub(super) cached: u64,
    pub(super) output: u64,
    /// Next gate to pass.
    pub(super) pos: u8,
    /// Attempts sent to the provider.
    pub(super) attempts: u32,
    /// Passes through the attempt loop: attempts sent plus refusals by gates inside
    /// the loop (a retry into an open breaker is a try). `max_attempts` bounds these.
    pub(super) tries: u32,
    pub(super) admitted: bool,
    pub(super) bulkhead: bool,
    pub(super) limiter: bool,
    pub(super) permit: Option<Permit>,
    pub(super) reservation: Option<Reservation>,
    /// The meter the reservation was taken from (a coordinator outage may change
    /// which meter serves the call before it gives the reservation back).
    pub(super) meter: u16,
    pub(super) quota_waited: Nanos,
    pub(super) previous_backoff: Nanos,
    /// The attempt in flight.
    pub(super) attempt: Option<SlabKey>,
}

/// What an attempt (or a local refusal) tells the gates it passed.
#[derive(Clone, Copy, Debug)]
pub(super) struct Feedback {
    pub(super) ending: Ending,
    /// The attempt reached the provider (so it has a latency and an outcome).
    pub(super) reached_provider: bool,
    /// Client-observed time to first token (the whole response when not streamed).
    pub(super) sample: Nanos,
    pub(super) duration: Nanos,
    /// Output tokens the provider generated.
    pub(super) output_used: u64,
    /// The limiter already learnt this attempt's time to first token.
    pub(super) sampled: bool,
}

/// A traced replica's rows and what the hooks compare against.
pub(super) struct GatewayTrace {
    pub(super) rows: Tracer,
    /// Each class's breaker state when last looked at.
    pub(super) breakers: Vec<BreakerState>,
}
