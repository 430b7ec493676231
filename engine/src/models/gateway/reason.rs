//! Why a counted call ended without being served: exactly one [`Reason`] per failed
//! call. The enum owns its list and its names (the metric-name suffixes); what kind
//! of failure each reason is — a local gate's refusal, a timeout, the provider's
//! answer — is an exhaustive `match`, so a new reason does not compile until it is
//! classified.

use crate::kernel::Named;
use crate::policy::classify::Outcome;

use super::gate::Gate;

stampede_kernel::named_enum! {
    /// Why a counted call ended without being served.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Reason {
        /// The admission ladder shed its class.
        AdmissionShed = "admission_shed",
        /// It could not end before its deadline.
        AdmissionInfeasible = "admission_infeasible",
        /// Its tenant was over its fair share under pressure.
        AdmissionFairShare = "admission_fair_share",
        /// The bulkhead's queue was full.
        QueueFull = "queue_full",
        /// Its deadline passed while it waited for a bulkhead slot.
        QueueDeadline = "queue_deadline",
        /// CoDel dropped it from the bulkhead's queue.
        CoDel = "codel_drop",
        /// The adaptive limiter refused it.
        Limiter = "limiter",
        /// The breaker was open.
        BreakerOpen = "breaker_open",
        /// The client's quota meter had no room within its longest wait.
        LocalQuota = "local_quota",
        /// The last attempt got no server slot within the connect timeout.
        TimeoutConnect = "timeout_connect",
        /// No first token in time.
        TimeoutFirstToken = "timeout_first_token",
        /// A gap between streamed tokens was too long.
        TimeoutInterToken = "timeout_inter_token",
        /// The whole answer took too long.
        TimeoutTotal = "timeout_total",
        /// The caller's own deadline ran out: it says nothing about the provider, so
        /// neither the breaker nor the limiter learns from it.
        TimeoutDeadline = "timeout_deadline",
        /// The provider rate-limited it.
        Http429 = "http_429",
        /// The provider was overloaded (529), or its queue gave up on the call.
        Http529 = "http_529",
        /// The provider answered with an error.
        Http500 = "http_500",
    }
}

/// How many reasons there are (the length of per-reason arrays).
pub const REASONS: usize = <Reason as Named>::ALL.len();

/// Where a failure came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// A local gate refused the call (it never reached the provider on this try).
    Gate(Gate),
    /// The client gave up waiting.
    Timeout,
    /// The provider answered with an error.
    Provider,
}

impl Reason {
    /// Where the failure came from.
    pub fn source(self) -> Source {
        match self {
            Reason::AdmissionShed | Reason::AdmissionInfeasible | Reason::AdmissionFairShare => {
                Source::Gate(Gate::Admission)
            }
            Reason::QueueFull | Reason::QueueDeadline | Reason::CoDel => Source::Gate(Gate::Bulkhead),
            Reason::Limiter => Source::Gate(Gate::Adaptive),
            Reason::BreakerOpen => Source::Gate(Gate::Breaker),
            Reason::LocalQuota => Source::Gate(Gate::Quota),
            Reason::TimeoutConnect
            | Reason::TimeoutFirstToken
            | Reason::TimeoutInterToken
            | Reason::TimeoutTotal
            | Reason::TimeoutDeadline => Source::Timeout,
            Reason::Http429 | Reason::Http529 | Reason::Http500 => Source::Provider,
        }
    }

    /// The caller's budget ran out, not the provider's patience: not a signal about
    /// the provider, so the breaker and the limiter are not taught it.
    pub fn is_callers_deadline(self) -> bool {
        self == Reason::TimeoutDeadline
    }

    /// A refusal by a local gate (as opposed to the provider or a timeout).
    pub fn is_local(self) -> bool {
        matches!(self.source(), Source::Gate(_))
    }

    /// What the retry classifier, the breaker and a loop above the gate make of it.
    pub(super) fn outcome(self) -> Outcome {
        match self.source() {
            Source::Timeout => Outcome::Timeout,
            Source::Provider => match self {
                Reason::Http429 => Outcome::RateLimited,
                Reason::Http500 => Outcome::ServerError,
                _ => Outcome::Overloaded,
            },
            // Local refusals seen by a loop above the gate: back off and retry, as a 529.
            Source::Gate(_) => Outcome::Overloaded,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The local reasons are the gates' and come first, so that per-class tables list
    /// refusals before provider failures.
    #[test]
    fn local_reasons_come_first() {
        let first_remote = Reason::ALL.iter().position(|r| !r.is_local()).unwrap();
        assert!(Reason::ALL[first_remote..].iter().all(|r| !r.is_local()));
        assert_eq!(Reason::ALL[first_remote - 1], Reason::LocalQuota);
    }
}
