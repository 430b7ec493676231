//! Autoscaled services: every sync period a service's autoscaler (the HPA's rule,
//! `policy::autoscale`) reads the metric it follows, time-averaged over the period
//! across the serving instances, and asks for a count. New instances are provisioned
//! (a delay drawn per instance) and then serve, slower for a cold start; removed ones
//! are the ones still provisioning first, then the newest serving, which drain: no new
//! requests, their work finishes.
//!
//! Invariants (asserted): the serving list holds exactly the instances in `Serving`,
//! ascending; serving + provisioning is the count the autoscaler last set.

use crate::kernel::sim::Scheduler;
use crate::kernel::time::Nanos;

use super::entities::Lifecycle;
use super::model::Graph;
use super::params::ScaleMetric;
use super::state::Event;

impl Graph<'_> {
    /// Service `s`'s autoscaler decides; the next decision is one period on.
    pub(super) fn autoscale_sync(&mut self, now: Nanos, s: usize, scheduler: &mut Scheduler<Event>) {
        self.advance(s, now);
        self.close_blocked(s, now);
        let params = self.p.services[s].autoscale.as_ref().expect("an autoscaled service");
        let (metric, workers) = (params.metric, self.p.services[s].workers);
        let state = &mut self.services[s];
        let scaler = state.scaler.as_mut().expect("an autoscaled service");
        scheduler.after(scaler.autoscaler.config().sync_period, Event::AutoscaleSync { service: s as u32 });
        let elapsed = (now - scaler.last_sync).max(1) as f64;
        let (busy, present, queued) = scaler.totals;
        let (busy_then, present_then, queued_then) = scaler.totals_then;
        let working = (busy - busy_then).saturating_sub(state.blocked_total - scaler.blocked_then);
        // Summed over the instances; the autoscaler divides by those ready.
        let usage = match metric {
            ScaleMetric::Cpu => working as f64 / (elapsed * workers as f64),
            ScaleMetric::Utilisation => (busy - busy_then) as f64 / (elapsed * workers as f64),
            ScaleMetric::InFlight => (present - present_then) as f64 / elapsed,
            ScaleMetric::QueueDepth => (queued - queued_then) as f64 / elapsed,
            ScaleMetric::Rps => {
                (scaler.arrivals - scaler.arrivals_then) as f64 / (elapsed / crate::kernel::time::NANOS_PER_SEC as f64)
            }
        };
        (scaler.totals_then, scaler.blocked_then) = (scaler.totals, state.blocked_total);
        (scaler.arrivals_then, scaler.last_sync) = (scaler.arrivals, now);
        let ready = state.serving.as_ref().expect("autoscaled").len() as u32;
        let current = ready + scaler.provisioning;
        let desired = scaler.autoscaler.desired(now, current, ready, usage);
        // The decision on record: the count asked for, and the metric per ready instance.
        let read = if ready == 0 { 0.0 } else { usage / ready as f64 };
        let read_milli = (read * 1_000.0).round().clamp(0.0, i64::MAX as f64 / 2.0) as i64;
        scaler.desired.change(now, desired as i64 - scaler.desired.level() as i64);
        scaler.read_milli.change(now, read_milli - scaler.read_milli.level() as i64);
        let counted = now >= self.p.warmup;
        if desired > current {
            if counted {
                state.results.scale_ups += 1;
            }
            self.provision(s, desired - current, scheduler);
        } else if desired < current {
            if counted {
                state.results.scale_downs += 1;
            }
            self.remove_instances(now, s, current - desired);
        }
        self.check_serving(s);
    }

    /// Starts `count` instances of service `s`: the lowest-numbered ones that are off.
    fn provision(&mut self, s: usize, count: u32, scheduler: &mut Scheduler<Event>) {
        let first = self.services[s].first_instance as usize;
        let total = self.p.services[s].instances as usize;
        let mut started = 0;
        for i in first..first + total {
            if started == count {
                break;
            }
            if self.instances[i].lifecycle != Lifecycle::Off {
                continue;
            }
            let instance = &mut self.instances[i];
            instance.lifecycle = Lifecycle::Provisioning;
            instance.provision_epoch += 1;
            let epoch = instance.provision_epoch;
            let state = &mut self.services[s];
            let scaler = state.scaler.as_mut().expect("autoscaled");
            scaler.provisioning += 1;
            let params = self.p.services[s].autoscale.as_ref().expect("autoscaled");
            let delay = params.provisioning.sample(&mut scaler.provision_rng);
            scheduler.after(delay, Event::InstanceReady { instance: i as u32, epoch });
            started += 1;
        }
        debug_assert_eq!(started, count, "the autoscaler's max is the instances there are");
    }

    /// Removes `count` instances of service `s`: those provisioning first (newest
    /// first), then the newest serving, which drain.
    fn remove_instances(&mut self, now: Nanos, s: usize, count: u32) {
        let first = self.services[s].first_instance as usize;
        let total = self.p.services[s].instances as usize;
        let mut removed = 0;
        for wanted in [Lifecycle::Provisioning, Lifecycle::Serving] {
            for i in (first..first + total).rev() {
                if removed == count {
                    return;
                }
                if self.instances[i].lifecycle != wanted {
                    continue;
                }
                self.instances[i].lifecycle = Lifecycle::Off;
                self.instances[i].provision_epoch += 1;
                let state = &mut self.services[s];
                match wanted {
                    Lifecycle::Provisioning => state.scaler.as_mut().expect("autoscaled").provisioning -= 1,
                    _ => {
                        let serving = state.serving.as_mut().expect("autoscaled");
                        let local = (i - first) as u32;
                        serving.retain(|&k| k != local);
                        state.scaler.as_mut().expect("autoscaled").serving.change(now, -1);
                        self.sync_rings(i);
                    }
                }
                removed += 1;
            }
        }
        debug_assert_eq!(removed, count, "never below what there is");
    }

    /// A provisioned instance is ready: it serves from now, cold for a while.
    pub(super) fn instance_ready(&mut self, now: Nanos, i: usize, epoch: u32) {
        let instance = &self.instances[i];
        if instance.provision_epoch != epoch || instance.lifecycle != Lifecycle::Provisioning {
            return; // cancelled by a scale-down since
        }
        let s = instance.service as usize;
        self.advance(s, now);
        let params = self.p.services[s].autoscale.as_ref().expect("autoscaled");
        let cold_start = params.cold_start;
        let instance = &mut self.instances[i];
        instance.lifecycle = Lifecycle::Serving;
        (instance.cold_from, instance.cold_until) = (now, now + cold_start);
        instance.plain = instance.slowdown == 1.0 && cold_start == 0;
        let state = &mut self.services[s];
        state.scaler.as_mut().expect("autoscaled").provisioning -= 1;
        let local = i as u32 - state.first_instance;
        let serving = state.serving.as_mut().expect("autoscaled");
        let at = serving.partition_point(|&k| k < local);
        serving.insert(at, local);
        state.scaler.as_mut().expect("autoscaled").serving.change(now, 1);
        self.sync_rings(i);
        self.check_serving(s);
    }

    /// The serving list matches the instances' states (debug builds; allocates nothing).
    fn check_serving(&self, s: usize) {
        if cfg!(debug_assertions) {
            let state = &self.services[s];
            let first = state.first_instance as usize;
            let serving = (0..self.p.services[s].instances)
                .filter(|&k| self.instances[first + k as usize].lifecycle == Lifecycle::Serving);
            let listed = state.serving.as_deref().expect("autoscaled");
            assert!(serving.eq(listed.iter().copied()), "the serving list is the instances serving, ascending");
            assert_eq!(state.scaler.as_ref().expect("autoscaled").serving.level(), listed.len() as u64);
        }
    }

    /// The factor instance `i`'s work is slowed by at `now` for a cold start (1 when warm).
    #[inline]
    pub(super) fn cold_factor(&self, now: Nanos, i: usize) -> f64 {
        let instance = &self.instances[i];
        if now >= instance.cold_until {
            return 1.0;
        }
        let s = instance.service as usize;
        let factor = self.p.services[s].autoscale.as_ref().map_or(1.0, |a| a.cold_start_factor);
        let left = (instance.cold_until - now) as f64 / (instance.cold_until - instance.cold_from) as f64;
        1.0 + (factor - 1.0) * left
    }
}
