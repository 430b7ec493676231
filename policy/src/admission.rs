//! Admission control: the criticality ladder, deadline feasibility and per-tenant
//! fair share — the cheapest "no" in the defence stack.
//!
//! Pressure (0..1, supplied by the model: quota headroom, in-flight concurrency…)
//! picks a rung; each criticality is refused from its own rung up. Defaults follow
//! the LLM-gateway fixture: L1 at 0.80 drops SHEDDABLE, L2 at 0.88 adds
//! SHEDDABLE_PLUS, L3 at 0.95 adds CRITICAL, L4 at the cap (1.0) adds CRITICAL_PLUS.

use crate::kernel::names::Named;
use crate::kernel::time::Nanos;
use crate::Criticality;

/// Rung thresholds and the rung from which each criticality is refused.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ladder {
    /// Pressure at which rungs L1..L4 start (ascending).
    pub rungs: [f64; 4],
    /// For each criticality (CRITICAL_PLUS first), the first rung (1..=4) that refuses it.
    pub refused_from: [u8; 4],
}

impl Default for Ladder {
    fn default() -> Self {
        Ladder { rungs: [0.80, 0.88, 0.95, 1.0], refused_from: [4, 3, 2, 1] }
    }
}

impl Ladder {
    /// The rung (0 = L0, nothing refused … 4) for `pressure`.
    #[inline]
    pub fn rung(&self, pressure: f64) -> u8 {
        self.rungs.iter().take_while(|&&threshold| pressure >= threshold).count() as u8
    }

    /// True if `criticality` is refused at `pressure`.
    #[inline]
    pub fn refuses(&self, criticality: Criticality, pressure: f64) -> bool {
        self.rung(pressure) >= self.refused_from[criticality.index()]
    }
}

/// Why a request was or was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Let in.
    Admitted,
    /// The ladder's rung refuses this criticality.
    Shed {
        /// The rung that refused it (1..=4).
        rung: u8,
    },
    /// The expected wait plus service would overrun the request's deadline.
    Infeasible,
    /// The tenant is over its fair share while the system is under pressure.
    OverFairShare,
}

/// A request as admission sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdmissionRequest {
    /// How important it is: the ladder sheds the least critical first.
    pub criticality: Criticality,
    /// The tenant it belongs to, for fair shares.
    pub tenant: u32,
    /// Absolute deadline.
    pub deadline: Nanos,
    /// The model's estimate of queueing wait plus service time.
    pub expected_latency: Nanos,
}

/// The admission controller: ladder, deadline check and per-tenant fair share.
#[derive(Clone, Debug)]
pub struct AdmissionController {
    ladder: Ladder,
    /// In-flight requests per tenant.
    tenants: Box<[u32]>,
    /// Capacity the fair share divides.
    capacity: u32,
    refusals: [u64; 3],
}

impl AdmissionController {
    /// `tenants` tenants sharing `capacity` in-flight requests.
    pub fn new(ladder: Ladder, tenants: u32, capacity: u32) -> Self {
        assert!(tenants > 0 && capacity > 0);
        assert!(ladder.rungs.windows(2).all(|w| w[0] <= w[1]), "rungs must ascend");
        AdmissionController {
            ladder,
            tenants: vec![0; tenants as usize].into_boxed_slice(),
            capacity,
            refusals: [0; 3],
        }
    }

    /// The ladder.
    pub fn ladder(&self) -> &Ladder {
        &self.ladder
    }

    /// Decides on `request` at `now` under `pressure`. An admitted request counts
    /// against its tenant until [`Self::finished`].
    #[inline]
    pub fn admit(&mut self, now: Nanos, request: AdmissionRequest, pressure: f64) -> Admission {
        let refused_from = self.ladder.refused_from[request.criticality.index()];
        self.admit_from_rung(now, request, pressure, refused_from)
    }

    /// Like [`Self::admit`], but the ladder refuses this request from rung
    /// `refused_from` (1..=4; 5 or more: never) instead of its criticality's rung —
    /// for product ladders that name features rather than criticality levels.
    #[inline]
    pub fn admit_from_rung(
        &mut self,
        now: Nanos,
        request: AdmissionRequest,
        pressure: f64,
        refused_from: u8,
    ) -> Admission {
        let rung = self.ladder.rung(pressure);
        let decision = if rung >= refused_from {
            Admission::Shed { rung }
        } else if now.saturating_add(request.expected_latency) > request.deadline {
            Admission::Infeasible
        } else if pressure >= self.ladder.rungs[0] && self.over_fair_share(request.tenant) {
            Admission::OverFairShare
        } else {
            Admission::Admitted
        };
        match decision {
            Admission::Admitted => self.tenants[request.tenant as usize] += 1,
            Admission::Shed { .. } => self.refusals[0] += 1,
            Admission::Infeasible => self.refusals[1] += 1,
            Admission::OverFairShare => self.refusals[2] += 1,
        }
        decision
    }

    /// An admitted request of `tenant` finished.
    #[inline]
    pub fn finished(&mut self, tenant: u32) {
        let count = &mut self.tenants[tenant as usize];
        debug_assert!(*count > 0, "finished without admission");
        *count = count.saturating_sub(1);
    }

    /// A tenant's fair share: capacity divided among tenants with work in flight
    /// (counting this one), rounded up.
    fn over_fair_share(&self, tenant: u32) -> bool {
        let active = self.tenants.iter().enumerate().filter(|(t, n)| **n > 0 || *t == tenant as usize).count() as u32;
        let share = self.capacity.div_ceil(active.max(1));
        self.tenants[tenant as usize] >= share
    }

    /// Refusals so far: (shed by the ladder, infeasible deadline, over fair share).
    pub fn refusals(&self) -> (u64, u64, u64) {
        (self.refusals[0], self.refusals[1], self.refusals[2])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::time::NANOS_PER_SEC;
    use crate::kernel::Named;

    #[test]
    fn the_ladder_drops_from_the_outside_in() {
        let ladder = Ladder::default();
        let refused = |p: f64| -> Vec<bool> { Criticality::ALL.iter().map(|c| ladder.refuses(*c, p)).collect() };
        assert_eq!(ladder.rung(0.79), 0);
        assert_eq!(refused(0.79), [false, false, false, false]);
        assert_eq!(refused(0.80), [false, false, false, true], "L1 drops SHEDDABLE");
        assert_eq!(refused(0.88), [false, false, true, true], "L2 adds SHEDDABLE_PLUS");
        assert_eq!(refused(0.95), [false, true, true, true], "L3 adds CRITICAL");
        assert_eq!(refused(0.999), [false, true, true, true]);
        assert_eq!(refused(1.0), [true, true, true, true], "L4 at the cap adds CRITICAL_PLUS");
    }

    fn request(criticality: Criticality, tenant: u32, deadline_s: u64, latency_s: u64) -> AdmissionRequest {
        AdmissionRequest {
            criticality,
            tenant,
            deadline: deadline_s * NANOS_PER_SEC,
            expected_latency: latency_s * NANOS_PER_SEC,
        }
    }

    #[test]
    fn infeasible_deadlines_and_fair_share() {
        let mut a = AdmissionController::new(Ladder::default(), 2, 4);
        assert_eq!(a.admit(0, request(Criticality::Critical, 0, 2, 3), 0.1), Admission::Infeasible);
        assert_eq!(a.admit(0, request(Criticality::Critical, 0, 3, 3), 0.1), Admission::Admitted, "exactly on time");
        // Without pressure a tenant may take more than its share…
        for _ in 0..3 {
            assert_eq!(a.admit(0, request(Criticality::Critical, 0, 10, 1), 0.5), Admission::Admitted);
        }
        // …under pressure, with another tenant active, the share is 4 / 2 = 2.
        assert_eq!(a.admit(0, request(Criticality::Critical, 1, 10, 1), 0.85), Admission::Admitted);
        assert_eq!(a.admit(0, request(Criticality::Critical, 0, 10, 1), 0.85), Admission::OverFairShare);
        assert_eq!(a.admit(0, request(Criticality::Critical, 1, 10, 1), 0.85), Admission::Admitted);
        assert_eq!(a.admit(0, request(Criticality::Sheddable, 1, 10, 1), 0.85), Admission::Shed { rung: 1 });
        a.finished(0);
        assert_eq!(a.refusals(), (1, 1, 1));
    }
}
