//! Priority load shedding over bounded in-flight concurrency, and Little's-law sizing.
//!
//! A request of criticality `c` is admitted while in-flight utilisation is below
//! `c`'s mark: the lowest criticalities are shed first as load rises, CRITICAL_PLUS
//! only when the pool is full. Invariant: in-flight ≤ max (asserted).

use crate::kernel::names::Named;
use crate::Criticality;

/// Utilisation marks at which each criticality starts being shed, indexed by
/// [`Criticality::index`] (CRITICAL_PLUS first).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShedMarks(pub [f64; 4]);

impl Default for ShedMarks {
    /// CRITICAL_PLUS only when full, CRITICAL at 95%, SHEDDABLE_PLUS at 85%, SHEDDABLE at 75%.
    fn default() -> Self {
        ShedMarks([1.0, 0.95, 0.85, 0.75])
    }
}

/// Bounded concurrency with priority shedding.
#[derive(Clone, Debug)]
pub struct PriorityShedder {
    max_in_flight: u32,
    in_flight: u32,
    marks: ShedMarks,
    shed: [u64; 4],
}

impl PriorityShedder {
    /// A pool of `max_in_flight` with the given marks (each in (0, 1]).
    pub fn new(max_in_flight: u32, marks: ShedMarks) -> Self {
        assert!(max_in_flight > 0, "max_in_flight must be positive");
        assert!(marks.0.iter().all(|m| *m > 0.0 && *m <= 1.0), "marks must be in (0, 1]");
        PriorityShedder { max_in_flight, in_flight: 0, marks, shed: [0; 4] }
    }

    /// Admits (and counts in flight) or sheds a request.
    #[inline]
    pub fn try_admit(&mut self, criticality: Criticality) -> bool {
        let utilisation = self.in_flight as f64 / self.max_in_flight as f64;
        let admit = self.in_flight < self.max_in_flight && utilisation < self.marks.0[criticality.index()];
        if admit {
            self.in_flight += 1;
        } else {
            self.shed[criticality.index()] += 1;
        }
        debug_assert!(self.in_flight <= self.max_in_flight);
        admit
    }

    /// An admitted request finished.
    #[inline]
    pub fn release(&mut self) {
        debug_assert!(self.in_flight > 0, "release without admit");
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// Requests in flight.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Requests shed so far, per criticality.
    pub fn shed(&self) -> [u64; 4] {
        self.shed
    }
}

/// Little's law: the mean number in a system is arrival rate × mean time in it (L = λW).
pub fn littles_law_in_flight(arrival_rate_per_s: f64, mean_latency_s: f64) -> f64 {
    arrival_rate_per_s * mean_latency_s
}

/// A concurrency pool sized by Little's law with `headroom` (1.2 = 20% spare), rounded up.
pub fn pool_size(arrival_rate_per_s: f64, mean_latency_s: f64, headroom: f64) -> u32 {
    (littles_law_in_flight(arrival_rate_per_s, mean_latency_s) * headroom).ceil().max(1.0) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::Named;
    use proptest::prelude::*;

    #[test]
    fn sheds_from_the_bottom_up_and_protects_the_top_until_full() {
        let mut s = PriorityShedder::new(100, ShedMarks::default());
        for _ in 0..75 {
            assert!(s.try_admit(Criticality::Sheddable));
        }
        assert!(!s.try_admit(Criticality::Sheddable), "SHEDDABLE stops at 75%");
        assert!(s.try_admit(Criticality::SheddablePlus));
        while s.try_admit(Criticality::SheddablePlus) {}
        assert_eq!(s.in_flight(), 85);
        while s.try_admit(Criticality::Critical) {}
        assert_eq!(s.in_flight(), 95);
        while s.try_admit(Criticality::CriticalPlus) {}
        assert_eq!(s.in_flight(), 100, "CRITICAL_PLUS only refused when full");
        assert_eq!(s.shed(), [1, 1, 1, 1]);
        s.release();
        assert!(s.try_admit(Criticality::CriticalPlus));
    }

    #[test]
    fn littles_law_sizing() {
        // 1,000 requests/s at 9 s each keep 9,000 in flight.
        assert_eq!(littles_law_in_flight(1000.0, 9.0), 9000.0);
        assert_eq!(pool_size(21.51, 9.0, 1.0), 194);
        assert_eq!(pool_size(0.0, 1.0, 1.5), 1);
    }

    proptest! {
        #[test]
        fn never_exceeds_its_pool(ops in proptest::collection::vec(0usize..5, 1..500)) {
            let mut s = PriorityShedder::new(10, ShedMarks::default());
            for op in ops {
                if op == 4 { if s.in_flight() > 0 { s.release(); } } else { s.try_admit(Criticality::ALL[op]); }
                prop_assert!(s.in_flight() <= 10);
            }
        }
    }
}
