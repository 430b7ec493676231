//! Active health checks of a service's instances: every `interval` its checker sends
//! each instance a probe — a request to the probe endpoint, which waits in the queue
//! and takes a worker like any other (health-check traffic costs work). A probe passes
//! if answered in full within `timeout`; refused (down, queue full, shed), errored or
//! late, it fails. The checker's verdicts steer every balancer that calls the service.
//!
//! A probe is an attempt along no edge (`PROBE_EDGE`) of no call (`PROBE_CALL`): the
//! server code serves it unchanged, and the client code hands its answer or timeout
//! here. Probes are not counted among a service's arrivals or refusals.

use crate::kernel::sim::Scheduler;
use crate::kernel::slab::SlabKey;
use crate::kernel::time::Nanos;
use crate::kernel::timer::TimerSlot;
use crate::policy::health::HealthChange;

use super::entities::Lifecycle;
use super::model::{measured_s, Graph};
use super::state::{Attempt, Event, PROBE_CALL, PROBE_EDGE};

impl Graph<'_> {
    /// Instance `i`'s probe is due: send it, and schedule the next.
    pub(super) fn probe_due(&mut self, now: Nanos, i: usize, scheduler: &mut Scheduler<Event>) {
        let s = self.instances[i].service as usize;
        let service = &mut self.services[s];
        let config = service.health.as_ref().expect("probes only where checks are on").config();
        scheduler.after(config.interval, Event::ProbeDue { instance: i as u32 });
        if self.instances[i].lifecycle != Lifecycle::Serving {
            return; // an autoscaled instance not running (or not ready) is not probed
        }
        if now >= self.p.warmup {
            service.results.health_checks += 1;
        }
        let mut timer = TimerSlot::default();
        let ticket = timer.arm();
        let attempt = self.attempts.insert(Attempt {
            call: PROBE_CALL,
            edge: PROBE_EDGE,
            instance: i as u32,
            endpoint: service.probe_endpoint,
            sent: now,
            deadline: Nanos::MAX,
            criticality: 0,
            depth: 0,
            key: 0,
            counted: false,
            hedge: false,
            granted: false,
            timer,
            permit: None,
            routed: false,
            job: None,
            caller_waiting: true,
            in_flight: true,
            next: None,
            cause: None,
            time_culprit: s as u32,
        });
        scheduler.after(config.timeout, Event::AttemptTimeout { attempt, ticket });
        // Through the queue like any arrival (attempt_arrives keeps one call site).
        scheduler.after(0, Event::Arrives { attempt });
    }

    /// A probe was answered (`passed`: in full) or timed out: the checker learns it.
    pub(super) fn probe_ended(&mut self, now: Nanos, attempt: SlabKey, passed: bool) {
        let a = self.attempts.get_mut(attempt).expect("a live probe");
        debug_assert!(a.caller_waiting && a.edge == PROBE_EDGE);
        a.caller_waiting = false;
        a.timer.cancel();
        let i = a.instance;
        let s = self.instances[i as usize].service as usize;
        let (warmup, horizon) = (self.p.warmup, self.p.horizon);
        let service = &mut self.services[s];
        let local = i - service.first_instance;
        let counted = now >= warmup;
        if !passed && counted {
            service.results.health_check_failures += 1;
        }
        match service.health.as_mut().expect("a probe's service checks").record(local, passed) {
            Some(HealthChange::Unhealthy) => {
                service.unhealthy_since[local as usize] = now;
                if counted {
                    service.results.unhealthy_marks += 1;
                }
            }
            Some(HealthChange::Healthy) => {
                let since = std::mem::replace(&mut service.unhealthy_since[local as usize], Nanos::MAX);
                service.results.unhealthy_s += measured_s(since, now, warmup, horizon);
                service.unhealthy.as_mut().expect("checks have their series").add_span(since, now);
            }
            None => {}
        }
        self.drop_attempt_if_done(attempt);
    }

    /// At the end: instances still unhealthy count up to `now`.
    pub(super) fn close_unhealthy(&mut self, now: Nanos) {
        for s in 0..self.services.len() {
            for k in 0..self.services[s].unhealthy_since.len() {
                let since = std::mem::replace(&mut self.services[s].unhealthy_since[k], Nanos::MAX);
                if since != Nanos::MAX {
                    let state = &mut self.services[s];
                    state.results.unhealthy_s += measured_s(since, now, self.p.warmup, self.p.horizon);
                    state.unhealthy.as_mut().expect("checks have their series").add_span(since, now);
                }
            }
        }
    }
}
