//! ① Admission: the product ladder refuses each class from its own rung as pressure
//! rises, a call that cannot meet its deadline is refused up front, and a tenant
//! over its fair share is refused under pressure (`policy::admission`).

use crate::kernel::slab::SlabKey;
use crate::kernel::time::Nanos;
use crate::policy::admission::{Admission, AdmissionRequest};
use crate::policy::Criticality;

use super::Entry;
use crate::models::gateway::model::Gateway;
use crate::models::gateway::reason::Reason;
use crate::models::gateway::state::Call;

impl Gateway<'_> {
    pub(in crate::models::gateway) fn enter_admission(&mut self, now: Nanos, key: SlabKey) -> Entry {
        let entry = self.admission_decision(now, self.call(key).into());
        if entry == Entry::Pass {
            self.call_mut(key).admitted = true;
        }
        entry
    }

    /// Whether admission lets `call` in now (on `Pass` the call holds an admission the
    /// caller must mark). It needs no slab key: `start_call` asks before a call is
    /// built when admission is the first gate, so a shed call costs no slab entry and
    /// no walk.
    pub(in crate::models::gateway) fn admission_decision(&mut self, now: Nanos, call: Applicant) -> Entry {
        let class = call.class as usize;
        let rung = self.p.classes[class].shed_from_rung;
        // Pressure only matters to a class on the ladder, or to the tenant share.
        let needs_pressure = rung <= 4 || self.p.tenants > 1;
        let pressure = if needs_pressure { self.pressure(now, call.instance) } else { 0.0 };
        let request = AdmissionRequest {
            criticality: Criticality::CriticalPlus, // the product ladder decides, by class
            tenant: call.tenant as u32,
            deadline: call.deadline,
            expected_latency: self.expected_latency[class],
        };
        match self.admission.admit_from_rung(now, request, pressure, rung) {
            Admission::Admitted => Entry::Pass,
            Admission::Shed { .. } => Entry::Refuse(Reason::AdmissionShed),
            Admission::Infeasible => Entry::Refuse(Reason::AdmissionInfeasible),
            Admission::OverFairShare => Entry::Refuse(Reason::AdmissionFairShare),
        }
    }

    pub(in crate::models::gateway) fn release_admission(&mut self, key: SlabKey) {
        let call = self.call_mut(key);
        if call.admitted {
            call.admitted = false;
            let tenant = call.tenant as u32;
            self.admission.finished(tenant);
        }
    }
}

/// What admission reads of a call, whether or not the call is in the slab yet.
#[derive(Clone, Copy, Debug)]
pub(in crate::models::gateway) struct Applicant {
    pub(in crate::models::gateway) class: u8,
    pub(in crate::models::gateway) instance: u16,
    pub(in crate::models::gateway) tenant: u16,
    pub(in crate::models::gateway) deadline: Nanos,
}

impl From<&Call> for Applicant {
    fn from(call: &Call) -> Self {
        Applicant { class: call.class, instance: call.instance, tenant: call.tenant, deadline: call.deadline }
    }
}
