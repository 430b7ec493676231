//! Outlier detection by consecutive failures: Envoy's `consecutive_5xx` ejection.
//!
//! A client keeps, per upstream host, how many attempts in a row failed. When a host
//! reaches `consecutive_failures`, it is ejected — the balancer skips it — for
//! `base_ejection × times ejected` (capped at `max_ejection`), unless that would eject
//! more than `max_ejection_percent` of the hosts (at least one host may always be
//! ejected, as Envoy does). An ejected host comes back when its time is up; its
//! failure count starts again from zero.
//!
//! Deliberate differences from Envoy: a host returns the moment its ejection time is
//! up (Envoy checks at its `interval`, 10 s by default, so a host may stay out up to
//! one interval longer); the success-rate and failure-percentage detectors are not
//! modelled; every failure the client sees counts (timeouts, refusals and errors: Envoy
//! counts locally originated failures with the 5xx unless told to split them).
//!
//! Invariants (asserted in debug builds): the ejected count equals the hosts whose
//! ejection has not ended; an ejection never starts above the cap.

use crate::kernel::time::Nanos;

/// Outlier detection's parameters (Envoy's names and defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OutlierConfig {
    /// Failures in a row that eject a host (Envoy's `consecutive_5xx`, default 5).
    pub consecutive_failures: u32,
    /// The first ejection's length; the n-th lasts n times this (default 30 s).
    pub base_ejection: Nanos,
    /// The longest an ejection lasts (default 300 s).
    pub max_ejection: Nanos,
    /// The most hosts ejected at once, as a percentage (default 10; at least one host).
    pub max_ejection_percent: f64,
}

/// One host's record.
#[derive(Clone, Copy, Debug, Default)]
struct Host {
    consecutive: u32,
    /// When its ejection ends; 0 when it is not ejected.
    ejected_until: Nanos,
    times_ejected: u32,
}

/// Outlier detection over one client's view of a set of hosts.
#[derive(Clone, Debug)]
pub struct OutlierDetector {
    config: OutlierConfig,
    hosts: Box<[Host]>,
    ejected: u32,
    /// The most hosts ejected at once.
    cap: u32,
}

/// An ejection that started: the host and its window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ejection {
    /// The host ejected.
    pub host: u32,
    /// When it was ejected.
    pub from: Nanos,
    /// When it comes back.
    pub until: Nanos,
}

impl OutlierDetector {
    /// Detection over `hosts` hosts, none ejected.
    pub fn new(config: OutlierConfig, hosts: u32) -> Self {
        assert!(config.consecutive_failures >= 1, "at least one failure ejects");
        assert!(0 < config.base_ejection && config.base_ejection <= config.max_ejection, "0 < base ≤ max ejection");
        assert!((0.0..=100.0).contains(&config.max_ejection_percent), "a percentage");
        let cap = ((f64::from(hosts) * config.max_ejection_percent / 100.0).floor() as u32).max(1);
        OutlierDetector { config, hosts: vec![Host::default(); hosts as usize].into_boxed_slice(), ejected: 0, cap }
    }

    /// Whether `host` is ejected at `now`; an ejection whose time is up ends here.
    #[inline]
    pub fn is_ejected(&mut self, now: Nanos, host: u32) -> bool {
        let h = &mut self.hosts[host as usize];
        if h.ejected_until == 0 {
            return false;
        }
        if now < h.ejected_until {
            return true;
        }
        h.ejected_until = 0;
        h.consecutive = 0;
        debug_assert!(self.ejected > 0, "an ejected host was counted");
        self.ejected -= 1;
        false
    }

    /// Learns how an attempt to `host` ended at `now`; returns the ejection it caused.
    pub fn record(&mut self, now: Nanos, host: u32, failed: bool) -> Option<Ejection> {
        if self.is_ejected(now, host) {
            // Answers from before the ejection, still arriving: they change nothing.
            return None;
        }
        let h = &mut self.hosts[host as usize];
        if !failed {
            h.consecutive = 0;
            return None;
        }
        h.consecutive += 1;
        if h.consecutive < self.config.consecutive_failures || self.ejected >= self.cap {
            return None;
        }
        h.times_ejected += 1;
        let length = self.config.base_ejection.saturating_mul(u64::from(h.times_ejected)).min(self.config.max_ejection);
        h.ejected_until = now + length.max(1);
        h.consecutive = 0;
        self.ejected += 1;
        debug_assert!(self.ejected <= self.cap, "never more than the cap ejected");
        Some(Ejection { host, from: now, until: h.ejected_until })
    }

    /// Hosts ejected now (as of the last look at each).
    pub fn ejected(&self) -> u32 {
        self.ejected
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Nanos = 1_000_000_000;

    fn config() -> OutlierConfig {
        OutlierConfig {
            consecutive_failures: 3,
            base_ejection: 30 * S,
            max_ejection: 300 * S,
            max_ejection_percent: 10.0,
        }
    }

    /// Envoy's rule: `consecutive_5xx` failures in a row eject, a success in between
    /// resets the count, and each further ejection lasts one base time longer.
    #[test]
    fn failures_in_a_row_eject_for_a_growing_time() {
        let mut d = OutlierDetector::new(config(), 4);
        assert_eq!(d.record(1, 0, true), None);
        assert_eq!(d.record(2, 0, false), None, "a success resets the count");
        assert_eq!(d.record(3, 0, true), None);
        assert_eq!(d.record(4, 0, true), None);
        assert_eq!(d.record(5, 0, true), Some(Ejection { host: 0, from: 5, until: 5 + 30 * S }));
        assert!(d.is_ejected(6, 0) && !d.is_ejected(6, 1));
        assert_eq!(d.record(7, 0, true), None, "answers from before the ejection change nothing");
        assert!(!d.is_ejected(5 + 30 * S, 0), "back when its time is up");
        assert_eq!(d.ejected(), 0);
        let t = 100 * S;
        for k in 0..2 {
            assert_eq!(d.record(t + k, 0, true), None);
        }
        assert_eq!(d.record(t + 2, 0, true).map(|e| e.until - e.from), Some(60 * S), "the second ejection: 2 × base");
    }

    /// At most max_ejection_percent of the hosts at once, and at least one.
    #[test]
    fn the_cap_holds_and_one_host_may_always_go() {
        let mut d = OutlierDetector::new(config(), 4);
        for host in 0..2 {
            for t in 0..3 {
                d.record(t, host, true);
            }
        }
        assert!(d.is_ejected(10, 0) && !d.is_ejected(10, 1), "10% of 4 hosts is one host");
        let mut wide = OutlierDetector::new(OutlierConfig { max_ejection_percent: 50.0, ..config() }, 4);
        for host in 0..4 {
            for t in 0..3 {
                wide.record(t, host, true);
            }
        }
        assert_eq!(wide.ejected(), 2, "50% of 4");
        let mut long = OutlierDetector::new(OutlierConfig { max_ejection: 45 * S, ..config() }, 1);
        let mut lengths = Vec::new();
        let mut t = 0;
        for _ in 0..3 {
            for _ in 0..3 {
                if let Some(e) = long.record(t, 0, true) {
                    lengths.push(e.until - e.from);
                    t = e.until;
                }
                t += 1;
            }
        }
        assert_eq!(lengths, [30 * S, 45 * S, 45 * S], "capped at max_ejection");
    }
}
