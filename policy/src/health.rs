//! Active health checking: a checker probes every host each `interval`; a host whose
//! probes fail `unhealthy_threshold` times in a row (refused, errored, or unanswered
//! within `timeout`) is marked unhealthy and the balancer stops sending it traffic; one
//! that then passes `healthy_threshold` probes in a row is healthy again (Envoy's
//! `health_checks` and Kubernetes' readiness probe, by their names).
//!
//! Panic mode (Envoy's `healthy_panic_threshold`): when fewer than that percentage of
//! hosts are healthy, the balancer ignores health and uses them all — a checker that
//! marks every host down (because all are overloaded, so probes time out) must not
//! take the whole service out.
//!
//! The checker decides nothing about when probes go or how they are served: its owner
//! sends them and reports each result with [`HealthChecker::record`].
//!
//! Invariants (asserted): the unhealthy count equals the hosts marked unhealthy; a
//! host's run of passes or failures only grows while it is in the state it opposes.

use crate::kernel::time::Nanos;

/// How hosts are checked.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HealthCheckConfig {
    /// Between one probe of a host and the next.
    pub interval: Nanos,
    /// A probe unanswered this long has failed.
    pub timeout: Nanos,
    /// Failed probes in a row that mark a healthy host unhealthy.
    pub unhealthy_threshold: u32,
    /// Passed probes in a row that mark an unhealthy host healthy.
    pub healthy_threshold: u32,
    /// Below this percentage of healthy hosts, health is ignored (panic mode).
    pub panic_threshold_percent: f64,
}

#[derive(Clone, Copy, Debug, Default)]
struct Host {
    unhealthy: bool,
    /// Probes in a row against its state: failures while healthy, passes while not.
    run: u32,
}

/// A change of a host's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HealthChange {
    /// It was marked unhealthy.
    Unhealthy,
    /// It was marked healthy again.
    Healthy,
}

/// The health of a set of hosts, as one checker sees it.
#[derive(Clone, Debug)]
pub struct HealthChecker {
    config: HealthCheckConfig,
    hosts: Box<[Host]>,
    unhealthy: u32,
}

impl HealthChecker {
    /// Every one of `hosts` healthy.
    pub fn new(config: HealthCheckConfig, hosts: u32) -> Self {
        assert!(config.unhealthy_threshold >= 1 && config.healthy_threshold >= 1 && config.interval > 0);
        HealthChecker { config, hosts: vec![Host::default(); hosts as usize].into(), unhealthy: 0 }
    }

    /// Its configuration.
    pub fn config(&self) -> HealthCheckConfig {
        self.config
    }

    /// A probe of `host` passed (`ok`) or failed; returns the change it made, if any.
    pub fn record(&mut self, host: u32, ok: bool) -> Option<HealthChange> {
        let h = &mut self.hosts[host as usize];
        // A probe that agrees with the host's state breaks the run against it.
        if ok != h.unhealthy {
            h.run = 0;
            return None;
        }
        h.run += 1;
        let threshold = if h.unhealthy { self.config.healthy_threshold } else { self.config.unhealthy_threshold };
        if h.run < threshold {
            return None;
        }
        h.run = 0;
        h.unhealthy = !h.unhealthy;
        let change = if h.unhealthy {
            self.unhealthy += 1;
            HealthChange::Unhealthy
        } else {
            self.unhealthy -= 1;
            HealthChange::Healthy
        };
        debug_assert_eq!(self.unhealthy as usize, self.hosts.iter().filter(|h| h.unhealthy).count());
        Some(change)
    }

    /// Whether `host` is marked unhealthy.
    pub fn is_unhealthy(&self, host: u32) -> bool {
        self.hosts[host as usize].unhealthy
    }

    /// Hosts marked unhealthy.
    pub fn unhealthy_count(&self) -> u32 {
        self.unhealthy
    }

    /// Panic mode: so few hosts are healthy that the balancer uses every one.
    pub fn panicking(&self) -> bool {
        let healthy = (self.hosts.len() as u32 - self.unhealthy) as f64;
        healthy * 100.0 < self.config.panic_threshold_percent * self.hosts.len() as f64
    }

    /// Whether the balancer may send `host` traffic: healthy, or in panic mode.
    pub fn usable(&self, host: u32) -> bool {
        !self.is_unhealthy(host) || self.panicking()
    }
}

/// When a probe of host `k` of `hosts` is first due: spread over the first interval so
/// the hosts are not all probed at one instant.
pub fn first_probe(config: &HealthCheckConfig, host: u32, hosts: u32) -> Nanos {
    (config.interval as u128 * (host as u128 + 1) / hosts.max(1) as u128) as Nanos
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checker(hosts: u32) -> HealthChecker {
        HealthChecker::new(
            HealthCheckConfig {
                interval: 10,
                timeout: 1,
                unhealthy_threshold: 3,
                healthy_threshold: 2,
                panic_threshold_percent: 50.0,
            },
            hosts,
        )
    }

    #[test]
    fn failures_in_a_row_mark_unhealthy_and_passes_in_a_row_bring_it_back() {
        let mut c = checker(4);
        assert_eq!(c.record(1, false), None);
        assert_eq!(c.record(1, false), None);
        assert_eq!(c.record(1, true), None, "a pass breaks the run");
        assert_eq!(c.record(1, false), None);
        assert_eq!(c.record(1, false), None);
        assert_eq!(c.record(1, false), Some(HealthChange::Unhealthy));
        assert!(!c.usable(1) && c.usable(0));
        assert_eq!(c.record(1, true), None);
        assert_eq!(c.record(1, false), None, "a failure breaks the run back");
        assert_eq!(c.record(1, true), None);
        assert_eq!(c.record(1, true), Some(HealthChange::Healthy));
        assert_eq!(c.unhealthy_count(), 0);
    }

    #[test]
    fn below_the_panic_threshold_every_host_is_used() {
        let mut c = checker(4);
        for host in 0..3 {
            for _ in 0..3 {
                c.record(host, false);
            }
        }
        assert_eq!(c.unhealthy_count(), 3);
        assert!(c.panicking(), "1 of 4 healthy is under 50%");
        assert!((0..4).all(|h| c.usable(h)));
        c.record(2, true);
        c.record(2, true);
        assert!(!c.panicking(), "2 of 4 healthy is not under 50%");
        assert!(!c.usable(0) && c.usable(2));
    }

    #[test]
    fn first_probes_spread_over_the_interval() {
        let config = checker(1).config();
        let firsts: Vec<Nanos> = (0..5).map(|k| first_probe(&config, k, 5)).collect();
        assert_eq!(firsts, [2, 4, 6, 8, 10]);
    }
}
