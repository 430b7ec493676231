//! The LLM gateway (seed 001): a chat product's turns fan out into LLM calls of any
//! number of classes across metered model tiers ([`crate::components::provider`]), and
//! every call passes a configurable stack of defences built from [`crate::policy`].
//!
//! **A turn** follows its [`TurnPlan`]: steps in order, each a call, a parallel group
//! (the turn waits for all) or calls in the background (it does not wait). A call may
//! be made for a share of turns (drawn when the turn arrives), with another class for
//! the rest, and only if an earlier call succeeded. A failed call with a fallback
//! class (the seed's think downgraded to answer, answer re-sent to another tier) is
//! replaced by a call of that class; one answered locally (a flagged answer, the raw
//! query) counts as done; otherwise a required call's failure fails the turn. A turn
//! is answered when its last foreground step is done; background steps after it start
//! then. The seed's turn — guard → rewrite (for its share) → answer, or think for the
//! hard share → title (for its share, after the answer) — is the shipped fixture's plan.
//!
//! **The stack.** `gates` lists the gates outermost first. Each wraps the ones after
//! it, so a gate above the attempt loop ([`Gate::Retry`]) is passed once per call and
//! sees the call's final outcome, and a gate below it is passed once per attempt and
//! sees each attempt (so a quota gate below the loop takes a fresh reservation per
//! attempt, and a breaker below it refuses retries while open). A refusal inside
//! the loop is an attempt failure the loop may retry; a refusal above it ends the
//! call. The edges of seed 001 are the feedback at release: attempt outcomes minus
//! 429s go to the breaker, client-observed time to first token to the limiter,
//! unused `max_tokens` back to the quota meter, and quota pressure to admission.
//!
//! * ① admission: a product ladder (each class is refused from its own rung;
//!   pressure = max(tightest client meter's used fraction, the busiest tier's
//!   attempts in flight ÷ its classes' bulkhead slots)), deadline feasibility against
//!   the class's observed latency, tenant share.
//! * ② bulkhead per class: slots, a bounded queue (LIFO by default), CoDel, a
//!   deadline sweep every 100 ms.
//! * ③ adaptive concurrency per class (or per tier: the pooling bug), fed the time
//!   to first token the client saw (the whole response for a call that is not
//!   streamed), averaged over windows of samples; calls wait for it FIFO or LIFO
//!   (as the bulkhead), up to the bulkhead's queue size and their deadline. Timeouts and
//!   529s are drops; 429s (quota, not congestion) and 500s feed it nothing.
//! * ④ breaker per class; 429s are not failures unless `count_rate_limited`.
//! * ⑤ client quota meters per tier (one fleet-wide set when coordinated, one per
//!   instance when split): reserve `max_tokens`, reconcile on completion (unless
//!   reconciliation is switched off), wait up to the longest wait.
//! * ⑥ the attempt loop: connect / first-token / inter-token / total timeouts,
//!   classification, full-jitter backoff with retry-after as a floor, a retry budget,
//!   no retry of a stream past the delivered fraction, never past the call deadline.
//! * ⑦ fallback: a failed call of a class with a fallback is served its fallback.
//!
//! The **naive client** has none of that: up to N immediate attempts and one global
//! timeout per call.
//!
//! **Money.** An attempt that reached a server slot is billed its input and the
//! output generated until it ended (a client timeout cancels the generation); 429s,
//! 529s and 500s are not billed. Spend on attempts that succeeded is useful; the
//! rest is wasted.
//!
//! Turns arrive (Poisson) until the horizon; the replica then runs until every call
//! has ended, so every counted turn is either answered or failed, and every counted
//! call is served or failed for exactly one reason (asserted).

//!
//! **The code**, one file per lifecycle stage:
//!
//! * [`params`] — what a replica is given; [`reason`] — why a call failed, each
//!   reason classified by an exhaustive `match`; [`results`] — what it reports;
//! * [`state`] — the entities (turn, call, attempt) and the events between them;
//! * [`model`] — the [`Gateway`] struct, construction, the event dispatch, sweeps and
//!   incidents;
//! * [`trace`] — the per-call trace hooks (off by default, one branch each);
//! * [`turn`] — a turn's walk through its plan;
//! * [`call`] — a call's walk down the stack, its refusals and its end;
//! * [`attempt`] — the attempt loop: sending to the provider, how an attempt ends,
//!   retry or give up;
//! * [`gates`] — one file per gate: how a call enters it (pass, refuse with a
//!   reason, or park) and how it is released with the call's feedback. Dispatch is a
//!   `match` over the [`Gate`] enum — no `dyn` on the hot path.

mod attempt;
mod call;
pub mod gate;
pub mod gates;
mod model;
pub mod params;
pub mod reason;
pub mod results;
mod state;
mod trace;
mod turn;

#[cfg(test)]
mod tests;

pub use gate::Gate;
pub use model::{Gateway, GatewaySeries};
pub use params::{
    Arrivals, ClassParams, Client, GatewayParams, Incident, IncidentKind, LimiterScope, PlannedCall, Step, TierParams,
    Timeouts, TurnPlan,
};
pub use reason::{Reason, REASONS};
pub use results::{ClassResults, GatewayResults, TenantResults, MAX_TENANT_RESULTS};
pub use state::Event;
