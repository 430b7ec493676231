//! The resilience policy library: the building blocks every model composes.
//!
//! Every policy is a plain struct. It takes the current simulated time `now` (and,
//! where it needs randomness, a `&mut RngStream`) as arguments, never reads a
//! clock, allocates nothing per decision, and checks its invariants with
//! `debug_assert!` on every state transition. Each is tested alone here, against
//! the semantics of the library it follows; `docs/src/policies.md` lists parameters,
//! defaults, references and deliberate differences.

pub mod adaptive_timeout;
pub mod admission;
pub mod autoscale;
pub mod backoff;
pub mod breaker;
pub mod bulkhead;
pub mod classify;
pub mod codel;
pub mod health;
pub mod hedge;
pub mod limiter;
pub mod outlier;
pub mod pool;
pub mod quota;
pub mod retry;
pub mod retry_budget;
pub mod shedder;
pub mod token_bucket;

stampede_kernel::named_enum! {
    /// How much a request matters, most protected first (Google's criticality levels).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub enum Criticality {
        /// Never shed by policy: only refused when there is no room at all.
        CriticalPlus = "critical_plus",
        /// The default for user-facing requests: shed only after the sheddable ones.
        Critical = "critical",
        /// Shed before critical requests, after sheddable ones.
        SheddablePlus = "sheddable_plus",
        /// Shed first.
        Sheddable = "sheddable",
    }
}
