//! Backoff between attempts: constant, exponential, and the three jitters of the
//! AWS Architecture Blog's "Exponential Backoff and Jitter" (full, equal,
//! decorrelated). A server's retry-after is a floor the result never undercuts.

use crate::kernel::rng::RngStream;
use crate::kernel::time::Nanos;

/// A backoff rule. `attempt` counts retries from 0 (the wait before the first retry).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Backoff {
    /// The same delay every time.
    Constant {
        /// The delay.
        delay: Nanos,
    },
    /// min(cap, base·2ⁿ): no jitter, so clients that failed together retry together.
    Exponential {
        /// The first retry's delay.
        base: Nanos,
        /// The longest delay.
        cap: Nanos,
    },
    /// U(0, min(cap, base·2ⁿ)).
    FullJitter {
        /// The first retry's ceiling.
        base: Nanos,
        /// The longest ceiling.
        cap: Nanos,
    },
    /// t/2 + U(0, t/2) with t = min(cap, base·2ⁿ).
    EqualJitter {
        /// The first retry's ceiling.
        base: Nanos,
        /// The longest ceiling.
        cap: Nanos,
    },
    /// min(cap, U(base, 3·previous)), with previous = base before the first retry.
    Decorrelated {
        /// The shortest delay.
        base: Nanos,
        /// The longest delay.
        cap: Nanos,
    },
}

stampede_kernel::named_enum! {
    /// The [`Backoff`] rules by name, without their durations: what a configuration
    /// chooses before it gives a base and a cap.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum BackoffKind {
        /// [`Backoff::Constant`].
        Constant = "constant",
        /// [`Backoff::Exponential`].
        Exponential = "exponential",
        /// [`Backoff::FullJitter`].
        FullJitter = "full_jitter",
        /// [`Backoff::EqualJitter`].
        EqualJitter = "equal_jitter",
        /// [`Backoff::Decorrelated`].
        Decorrelated = "decorrelated",
    }
}

impl BackoffKind {
    /// The rule with its durations (`Constant` waits `base` every time).
    pub fn with(self, base: Nanos, cap: Nanos) -> Backoff {
        match self {
            BackoffKind::Constant => Backoff::Constant { delay: base },
            BackoffKind::Exponential => Backoff::Exponential { base, cap },
            BackoffKind::FullJitter => Backoff::FullJitter { base, cap },
            BackoffKind::EqualJitter => Backoff::EqualJitter { base, cap },
            BackoffKind::Decorrelated => Backoff::Decorrelated { base, cap },
        }
    }
}

/// min(cap, base·2ⁿ) without overflow.
fn capped_exponential(base: Nanos, cap: Nanos, attempt: u32) -> Nanos {
    let factor = 1u64.checked_shl(attempt.min(63)).unwrap_or(u64::MAX);
    base.saturating_mul(factor).min(cap)
}

/// Uniform integer in [low, high].
fn uniform_between(rng: &mut RngStream, low: Nanos, high: Nanos) -> Nanos {
    debug_assert!(low <= high);
    if high == low {
        return low;
    }
    let span = high - low;
    if span == u64::MAX {
        rng.next_u64()
    } else {
        low + rng.below(span + 1)
    }
}

impl Backoff {
    /// The wait before retry number `attempt` (0-based). `previous` is the wait chosen
    /// before the previous retry (decorrelated jitter needs it; others ignore it).
    /// `retry_after` is the server's requested delay, a floor.
    #[inline]
    pub fn delay(&self, attempt: u32, previous: Nanos, retry_after: Option<Nanos>, rng: &mut RngStream) -> Nanos {
        let own = match *self {
            Backoff::Constant { delay } => delay,
            Backoff::Exponential { base, cap } => capped_exponential(base, cap, attempt),
            Backoff::FullJitter { base, cap } => uniform_between(rng, 0, capped_exponential(base, cap, attempt)),
            Backoff::EqualJitter { base, cap } => {
                let t = capped_exponential(base, cap, attempt);
                t / 2 + uniform_between(rng, 0, t - t / 2)
            }
            Backoff::Decorrelated { base, cap } => {
                let previous = if attempt == 0 { base } else { previous.max(base) };
                uniform_between(rng, base, previous.saturating_mul(3).max(base)).min(cap)
            }
        };
        let delay = own.max(retry_after.unwrap_or(0));
        debug_assert!(retry_after.is_none_or(|floor| delay >= floor), "retry-after undercut");
        delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::rng::StreamPurpose;
    use crate::kernel::time::{secs_to_nanos, NANOS_PER_SEC};

    fn rng() -> RngStream {
        RngStream::derive(1, 0, StreamPurpose::named("test.backoff"))
    }

    const BASE: Nanos = NANOS_PER_SEC;
    const CAP: Nanos = 20 * NANOS_PER_SEC;

    #[test]
    fn the_cap_holds_for_every_kind_and_attempt() {
        let mut rng = rng();
        let kinds = [
            Backoff::Exponential { base: BASE, cap: CAP },
            Backoff::FullJitter { base: BASE, cap: CAP },
            Backoff::EqualJitter { base: BASE, cap: CAP },
            Backoff::Decorrelated { base: BASE, cap: CAP },
        ];
        for kind in kinds {
            let mut previous = 0;
            for attempt in 0..100 {
                previous = kind.delay(attempt, previous, None, &mut rng);
                assert!(previous <= CAP, "{kind:?} attempt {attempt}: {previous}");
            }
        }
        assert_eq!(Backoff::Exponential { base: BASE, cap: CAP }.delay(3, 0, None, &mut rng), 8 * BASE);
        assert_eq!(Backoff::Exponential { base: BASE, cap: CAP }.delay(200, 0, None, &mut rng), CAP);
    }

    #[test]
    fn full_jitter_spreads_and_no_jitter_synchronises() {
        let mut rng = rng();
        let full = Backoff::FullJitter { base: BASE, cap: CAP };
        let mut draws: Vec<Nanos> = (0..400).map(|_| full.delay(4, 0, None, &mut rng)).collect();
        assert!(draws.iter().all(|&d| d <= 16 * BASE));
        draws.sort_unstable();
        draws.dedup();
        assert!(draws.len() > 300, "only {} distinct values", draws.len());
        // 400 clients that failed together, without jitter, all come back at once.
        let plain = Backoff::Exponential { base: BASE, cap: CAP };
        let mut same: Vec<Nanos> = (0..400).map(|_| plain.delay(4, 0, None, &mut rng)).collect();
        same.dedup();
        assert_eq!(same, vec![16 * BASE]);
    }

    #[test]
    fn equal_jitter_keeps_half_and_decorrelated_stays_in_its_band() {
        let mut rng = rng();
        let equal = Backoff::EqualJitter { base: BASE, cap: CAP };
        for _ in 0..1000 {
            let d = equal.delay(2, 0, None, &mut rng);
            assert!((2 * BASE..=4 * BASE).contains(&d), "{d}");
        }
        let decorrelated = Backoff::Decorrelated { base: BASE, cap: CAP };
        let mut previous = 0;
        for attempt in 0..50 {
            let d = decorrelated.delay(attempt, previous, None, &mut rng);
            let upper = if attempt == 0 { 3 * BASE } else { (3 * previous.max(BASE)).min(CAP) };
            assert!(d >= BASE.min(CAP) && d <= upper.max(BASE), "attempt {attempt}: {d} not in [base, {upper}]");
            previous = d;
        }
    }

    #[test]
    fn retry_after_is_never_undercut() {
        let mut rng = rng();
        let floor = secs_to_nanos(7.5);
        for kind in [
            Backoff::Constant { delay: BASE },
            Backoff::FullJitter { base: BASE, cap: CAP },
            Backoff::EqualJitter { base: BASE, cap: CAP },
            Backoff::Decorrelated { base: BASE, cap: CAP },
        ] {
            for attempt in 0..20 {
                assert!(kind.delay(attempt, BASE, Some(floor), &mut rng) >= floor);
            }
        }
        // A retry-after above the cap still wins: the server knows when it has room.
        assert_eq!(Backoff::Constant { delay: BASE }.delay(0, 0, Some(60 * BASE), &mut rng), 60 * BASE);
    }
}
