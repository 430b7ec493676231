//! stampede's resilience policy library: the building blocks every model composes
//! and the production middleware (`stampede-tower`) runs, in a crate of their own so
//! production code builds the policies without the simulator's models.
//!
//! Every policy is a plain struct. It takes the current simulated time `now` (and,
//! where it needs randomness, a `&mut RngStream`) as arguments, never reads a
//! clock, allocates nothing per decision, and checks its invariants with
//! `debug_assert!` on every state transition. Each is tested alone here, against
//! the semantics of the library it follows; `docs/src/policies.md` lists parameters,
//! defaults, references and deliberate differences.
//!
//! Layers, each using only the ones before it:
//!
//! * [`kernel`] — time and random streams (the `stampede-kernel` crate, re-exported);
//! * [`log_histogram`], [`running_quantile`] — "the p95 lately", which the hedge and
//!   the adaptive timeout read (the engine's models use them too, through
//!   `stampede_engine::measurement`);
//! * the policies, one module each.
//!
//! `stampede-engine` re-exports this crate as `stampede_engine::policy`: a model's
//! `crate::policy::breaker` is this crate's [`breaker`].

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub use stampede_kernel as kernel;

pub mod log_histogram;
pub mod running_quantile;

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
