//! Horizontal autoscaling by the Kubernetes HPA's algorithm. Every sync period the
//! owner measures a metric over the ready instances and asks for a replica count:
//!
//! 1. `ratio = (usage / ready) / target`; within `tolerance` of 1 the count stays.
//! 2. Otherwise `desired = ceil(usage / target)` — the HPA's `ceil(ratio × ready)`. When
//!    scaling up while instances are still starting, they count as using nothing (the
//!    HPA's conservative rule): no scale-up if `usage / (target × current)` is within
//!    tolerance or below 1.
//! 3. Stabilisation: the recommendation is held between the lowest recommendation of
//!    the scale-up window and the highest of the scale-down window (300 s by default:
//!    a scale-down happens only once the load has stayed low for five minutes).
//! 4. Rate limit (the HPA's default `scaleUp` policies, `selectPolicy: Max`): at most
//!    `max(2 × current, current + 4)` per sync; then clamped to `[min, max]`.
//!
//! Plain struct: the owner passes `now`; nothing here knows about instances.
//!
//! Invariants (asserted): `min ≤ desired ≤ max`; the history holds only recommendations
//! inside the longer window.

use std::collections::VecDeque;

use crate::kernel::time::Nanos;

/// The HPA's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AutoscaleConfig {
    /// The metric's target per ready instance.
    pub target: f64,
    /// Fewest instances.
    pub min: u32,
    /// Most instances.
    pub max: u32,
    /// Between two decisions (the HPA's `--horizontal-pod-autoscaler-sync-period`, 15 s).
    pub sync_period: Nanos,
    /// A usage ratio this close to 1 changes nothing (0.1).
    pub tolerance: f64,
    /// Scale-down stabilisation window (`behavior.scaleDown.stabilizationWindowSeconds`, 300 s).
    pub scale_down_window: Nanos,
    /// Scale-up stabilisation window (`behavior.scaleUp.stabilizationWindowSeconds`, 0).
    pub scale_up_window: Nanos,
}

/// The HPA's state for one scaled workload: its recent recommendations.
#[derive(Clone, Debug)]
pub struct Autoscaler {
    config: AutoscaleConfig,
    history: VecDeque<(Nanos, u32)>,
}

impl Autoscaler {
    /// No recommendation yet.
    pub fn new(config: AutoscaleConfig) -> Self {
        assert!(1 <= config.min && config.min <= config.max && config.target > 0.0 && config.sync_period > 0);
        let window = config.scale_down_window.max(config.scale_up_window);
        let capacity = (window / config.sync_period) as usize + 2;
        Autoscaler { config, history: VecDeque::with_capacity(capacity) }
    }

    /// Its settings.
    pub fn config(&self) -> AutoscaleConfig {
        self.config
    }

    /// The instance count to have, given `current` instances (ready or starting), of
    /// which `ready` serve, and `usage`, the metric summed over the ready ones.
    pub fn desired(&mut self, now: Nanos, current: u32, ready: u32, usage: f64) -> u32 {
        let c = self.config;
        let recommendation = self.recommend(current, ready, usage).clamp(c.min, c.max);
        let window = c.scale_down_window.max(c.scale_up_window);
        while self.history.front().is_some_and(|&(at, _)| now.saturating_sub(at) > window) {
            self.history.pop_front();
        }
        self.history.push_back((now, recommendation));
        let within = |span: Nanos| self.history.iter().filter(move |&&(at, _)| now - at <= span).map(|&(_, r)| r);
        let up_floor = within(c.scale_up_window).min().expect("this one is within");
        let down_ceiling = within(c.scale_down_window).max().expect("this one is within");
        let mut desired = current;
        if desired < up_floor {
            desired = up_floor;
        }
        if desired > down_ceiling {
            desired = down_ceiling;
        }
        let up_limit = current.saturating_mul(2).max(current.saturating_add(4));
        let desired = desired.min(up_limit).clamp(c.min, c.max);
        debug_assert!(c.min <= desired && desired <= c.max);
        desired
    }

    /// Steps 1 and 2: the raw recommendation.
    fn recommend(&self, current: u32, ready: u32, usage: f64) -> u32 {
        let c = self.config;
        if ready == 0 || !usage.is_finite() {
            return current;
        }
        let ratio = usage / (c.target * ready as f64);
        if (ratio - 1.0).abs() <= c.tolerance {
            return current;
        }
        let desired = (usage / c.target).ceil().max(0.0) as u32;
        if desired > current && ready < current {
            // Starting instances count as using nothing: scale up only if, with them,
            // usage is still above target.
            let with_starting = usage / (c.target * current as f64);
            if with_starting <= 1.0 + c.tolerance {
                return current;
            }
        }
        desired
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Nanos = 1_000_000_000;

    fn hpa(down_window_s: u64) -> Autoscaler {
        Autoscaler::new(AutoscaleConfig {
            target: 0.5,
            min: 1,
            max: 20,
            sync_period: 15 * S,
            tolerance: 0.1,
            scale_down_window: down_window_s * S,
            scale_up_window: 0,
        })
    }

    #[test]
    fn desired_is_ceil_of_usage_over_target_outside_the_tolerance() {
        let mut a = hpa(0);
        // 4 ready at 0.9 each against 0.5: ceil(3.6 / 0.5) = 8 (the HPA's ceil(1.8 × 4)).
        assert_eq!(a.desired(0, 4, 4, 3.6), 8);
        // Within 10%: 4 at 0.54 (ratio 1.08) stays.
        assert_eq!(a.desired(15 * S, 4, 4, 2.16), 4);
        // Down: 4 at 0.2 → ceil(0.8 / 0.5) = 2.
        assert_eq!(a.desired(30 * S, 4, 4, 0.8), 2);
    }

    #[test]
    fn scale_up_is_limited_to_double_or_plus_four() {
        let mut a = hpa(0);
        assert_eq!(a.desired(0, 2, 2, 10.0), 6, "2 + 4 beats 2 × 2");
        assert_eq!(a.desired(15 * S, 6, 6, 10.0), 12, "6 × 2 beats 6 + 4");
        assert_eq!(a.desired(30 * S, 12, 12, 100.0), 20, "at most max");
    }

    #[test]
    fn starting_instances_hold_a_scale_up_back() {
        let mut a = hpa(0);
        // 4 instances, 2 of them still starting; the 2 ready run at 0.9: alone they ask
        // for ceil(1.8 / 0.5) = 4, which is what there is.
        assert_eq!(a.desired(0, 4, 2, 1.8), 4);
        // At 1.3 each they ask for 6, and even counting the starting ones at 0 the
        // usage (2.6 / (0.5 × 4) = 1.3) is above target: up.
        assert_eq!(a.desired(15 * S, 4, 2, 2.6), 6);
    }

    #[test]
    fn scale_down_waits_for_the_stabilisation_window() {
        let mut a = hpa(300);
        assert_eq!(a.desired(0, 8, 8, 3.6), 8);
        // Load falls: the recommendation is 2, but 8 was recommended within 300 s.
        for k in 1..=20 {
            assert_eq!(a.desired(k * 15 * S, 8, 8, 0.8), 8, "at {} s", k * 15);
        }
        // 315 s after the last high recommendation it goes.
        assert_eq!(a.desired(21 * 15 * S, 8, 8, 0.8), 2);
    }

    #[test]
    fn the_history_stays_within_its_window() {
        let mut a = hpa(300);
        for k in 0..1000 {
            a.desired(k * 15 * S, 4, 4, 2.0);
        }
        assert!(a.history.len() <= 22, "{}", a.history.len());
    }
}
