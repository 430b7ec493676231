//! The one error a layer adds: a request it refused without calling the service.

use stampede_policy::bulkhead::Dropped;
use stampede_policy::Criticality;

/// Why a layer refused a request before it reached the service. It travels as a
/// [`crate::BoxError`], like tower's own `Overloaded`; `downcast_ref::<Rejected>()`
/// tells a refusal from the service's own errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejected {
    /// The circuit breaker is open (or half-open with its probes taken).
    BreakerOpen,
    /// The concurrency limit (fixed or adaptive) is reached.
    ConcurrencyLimit,
    /// The priority shedder shed a request of this criticality.
    Shed(Criticality),
    /// The token bucket is empty.
    RateLimited,
    /// The bulkhead's slots are taken and its queue is full.
    BulkheadFull,
    /// The client-side quota meter would not have room within its longest wait.
    Quota,
    /// The request waited in the bulkhead's queue and was dropped: CoDel, or its
    /// longest wait passed.
    BulkheadDropped(Dropped),
    /// The admission ladder sheds this request's class at the current rung.
    AdmissionShed {
        /// The ladder's rung when it refused (1..=4).
        rung: u8,
    },
    /// The request could not end before its deadline: now plus the expected latency
    /// is past it.
    AdmissionInfeasible,
    /// Under pressure, the request's tenant holds its fair share already.
    AdmissionFairShare,
}

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rejected::BreakerOpen => write!(f, "refused: the circuit breaker is open"),
            Rejected::ConcurrencyLimit => write!(f, "refused: the concurrency limit is reached"),
            Rejected::Shed(criticality) => write!(f, "refused: a {criticality:?} request was shed under load"),
            Rejected::RateLimited => write!(f, "refused: the rate limit's token bucket is empty"),
            Rejected::BulkheadFull => write!(f, "refused: the bulkhead's slots are taken and its queue is full"),
            Rejected::Quota => write!(f, "refused: the client-side quota has no room within its longest wait"),
            Rejected::BulkheadDropped(Dropped::CoDel) => {
                write!(f, "refused: CoDel dropped the request from the bulkhead's queue")
            }
            Rejected::BulkheadDropped(Dropped::DeadlineExpired) => {
                write!(f, "refused: the request waited its longest wait in the bulkhead's queue")
            }
            Rejected::AdmissionShed { rung } => {
                write!(f, "refused: admission's ladder sheds this class at rung L{rung}")
            }
            Rejected::AdmissionInfeasible => {
                write!(f, "refused: the request cannot end before its deadline (admission's expected latency)")
            }
            Rejected::AdmissionFairShare => {
                write!(f, "refused: under pressure, the tenant already holds its fair share")
            }
        }
    }
}

impl std::error::Error for Rejected {}
