//! Closed-form queueing results that the models are validated against.
//!
//! These are the textbook steady-state formulas for M/M/c (Erlang C) and
//! M/M/c/K. The tests in `models::mmc` and the integration tests compare
//! simulated estimates with them; the `capacity` arithmetic of later models can
//! reuse them.

/// Steady-state measures of a queue, in seconds and customers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QueueMeasures {
    /// P(an admitted customer waits at all).
    pub wait_probability: f64,
    /// Mean wait in queue, Wq.
    pub wait_mean_s: f64,
    /// Mean time in system, W = Wq + 1/μ.
    pub response_mean_s: f64,
    /// Mean number waiting, Lq.
    pub queue_length_mean: f64,
    /// Mean number in system, L.
    pub in_system_mean: f64,
    /// Mean fraction of servers busy.
    pub utilization: f64,
    /// Admitted (and, in steady state, completed) customers per second.
    pub throughput_rps: f64,
    /// Fraction of arrivals refused because the system was full.
    pub rejected_ratio: f64,
}

/// Erlang C: M/M/c with an infinite queue. `None` when unstable (λ ≥ cμ).
pub fn erlang_c(arrival_rate: f64, service_rate: f64, servers: u32) -> Option<QueueMeasures> {
    let c = servers as f64;
    let offered = arrival_rate / service_rate; // a, in Erlangs
    let rho = offered / c;
    if rho >= 1.0 || servers == 0 {
        return None;
    }
    // Σ_{k<c} a^k/k! and a^c/c!, built term by term to avoid overflow.
    let mut term = 1.0;
    let mut partial_sum = 0.0;
    for k in 0..servers {
        partial_sum += term;
        term *= offered / (k as f64 + 1.0);
    }
    let tail = term / (1.0 - rho);
    let wait_probability = tail / (partial_sum + tail);
    let wait_mean_s = wait_probability / (c * service_rate - arrival_rate);
    let response_mean_s = wait_mean_s + 1.0 / service_rate;
    Some(QueueMeasures {
        wait_probability,
        wait_mean_s,
        response_mean_s,
        queue_length_mean: arrival_rate * wait_mean_s,
        in_system_mean: arrival_rate * response_mean_s,
        utilization: rho,
        throughput_rps: arrival_rate,
        rejected_ratio: 0.0,
    })
}

/// The smallest `n` with P(N ≤ n) ≥ `p` for N ~ Poisson(`mean`): the calls in flight
/// an M/G/∞ system (any service-time shape: Little's law's mean, Poisson's spread) stays
/// within a share `p` of the time. Summed from the mode outward (its probability from
/// Stirling's series), so no term underflows before it stops mattering.
pub fn poisson_quantile(mean: f64, p: f64) -> u64 {
    assert!(mean >= 0.0 && mean.is_finite() && (0.0..1.0).contains(&p), "a mean and a probability");
    if mean == 0.0 {
        return 0;
    }
    let mode = mean.floor() as u64;
    let at_mode = (mode as f64 * mean.ln() - mean - ln_factorial(mode)).exp();
    // P(N < mode), summed downward until the terms vanish.
    let (mut below, mut term) = (0.0, at_mode);
    for k in (1..=mode).rev() {
        term *= k as f64 / mean;
        below += term;
        if term < 1e-17 * below {
            break;
        }
    }
    let (mut cdf, mut term, mut n) = (below + at_mode, at_mode, mode);
    while cdf < p {
        n += 1;
        term *= mean / n as f64;
        cdf += term;
        if term == 0.0 {
            break; // p within rounding of 1
        }
    }
    n
}

/// ln(n!): exact products below 20, Stirling's series (error < 10⁻¹²) above.
fn ln_factorial(n: u64) -> f64 {
    if n < 20 {
        return (2..=n).map(|k| k as f64).product::<f64>().ln();
    }
    let x = n as f64;
    x * x.ln() - x + 0.5 * (2.0 * std::f64::consts::PI * x).ln() + 1.0 / (12.0 * x) - 1.0 / (360.0 * x.powi(3))
}

/// M/M/c/K: `capacity` (K ≥ c) customers at most in the system, arrivals beyond it refused.
pub fn mmck(arrival_rate: f64, service_rate: f64, servers: u32, capacity: u32) -> QueueMeasures {
    assert!(servers >= 1 && capacity >= servers, "need 1 <= c <= K");
    let c = servers as f64;
    let offered = arrival_rate / service_rate;
    // Unnormalised p_n, n = 0..=K.
    let mut weights = Vec::with_capacity(capacity as usize + 1);
    let mut weight = 1.0;
    for n in 0..=capacity {
        weights.push(weight);
        let next = n + 1;
        weight *= if next <= servers { offered / next as f64 } else { offered / c };
    }
    let total: f64 = weights.iter().sum();
    let p: Vec<f64> = weights.iter().map(|w| w / total).collect();
    let blocking = p[capacity as usize];
    let admitted_rate = arrival_rate * (1.0 - blocking);
    let in_system_mean: f64 = p.iter().enumerate().map(|(n, pn)| n as f64 * pn).sum();
    let queue_length_mean: f64 = p.iter().enumerate().map(|(n, pn)| (n as f64 - c).max(0.0) * pn).sum();
    let waiting_states: f64 = p[servers as usize..capacity as usize].iter().sum();
    QueueMeasures {
        // PASTA: an admitted arrival sees state n < K with probability p_n / (1 - p_K).
        wait_probability: waiting_states / (1.0 - blocking),
        wait_mean_s: queue_length_mean / admitted_rate,
        response_mean_s: in_system_mean / admitted_rate,
        queue_length_mean,
        in_system_mean,
        utilization: (in_system_mean - queue_length_mean) / c,
        throughput_rps: admitted_rate,
        rejected_ratio: blocking,
    }
}

#[cfg(test)]
mod tests {

    /// Poisson quantiles against tables (R's qpois): small means summed exactly,
    /// large ones from the mode without underflow (e^−1000 is 0 in f64).
    #[test]
    fn poisson_quantiles_match_the_tables() {
        for (mean, p, expected) in [
            (0.5, 0.99, 3),
            (3.0, 0.5, 3),
            (3.0, 0.99, 8),
            (10.0, 0.99, 18),
            (22.2, 0.99, 34),
            (100.0, 0.99, 124),
            (1000.0, 0.99, 1074),
            (5000.0, 0.5, 5000),
        ] {
            assert_eq!(poisson_quantile(mean, p), expected, "qpois({p}, {mean})");
        }
        assert_eq!(poisson_quantile(0.0, 0.99), 0);
    }
    use super::*;

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() <= tolerance
    }

    #[test]
    fn erlang_c_matches_published_values() {
        // M/M/1: P(wait) = ρ, Wq = ρ / (μ - λ).
        let m = erlang_c(0.5, 1.0, 1).unwrap();
        assert!(close(m.wait_probability, 0.5, 1e-12));
        assert!(close(m.wait_mean_s, 1.0, 1e-12));
        // Textbook: a = 2 Erlangs on 3 servers gives C(3, 2) = 4/9.
        let m = erlang_c(2.0, 1.0, 3).unwrap();
        assert!(close(m.wait_probability, 4.0 / 9.0, 1e-12), "{}", m.wait_probability);
        // Call-centre example: a = 10 Erlangs, 12 agents → C ≈ 0.4494.
        let m = erlang_c(10.0, 1.0, 12).unwrap();
        assert!(close(m.wait_probability, 0.4494, 1e-4), "{}", m.wait_probability);
        assert!(erlang_c(2.0, 1.0, 2).is_none());
    }

    #[test]
    fn mmck_limits() {
        // Erlang B with c = K = 1: blocking = a / (1 + a).
        let m = mmck(1.0, 1.0, 1, 1);
        assert!(close(m.rejected_ratio, 0.5, 1e-12));
        assert!(close(m.wait_probability, 0.0, 1e-12));
        // A huge K approaches Erlang C.
        let finite = mmck(1.6, 1.0, 2, 400);
        let infinite = erlang_c(1.6, 1.0, 2).unwrap();
        assert!(close(finite.wait_mean_s, infinite.wait_mean_s, 1e-9));
        assert!(close(finite.wait_probability, infinite.wait_probability, 1e-9));
        // Little's law holds inside the formulas.
        let m = mmck(3.0, 1.0, 2, 5);
        assert!(close(m.in_system_mean, m.throughput_rps * m.response_mean_s, 1e-12));
    }
}

/// The Pollaczek–Khinchine mean wait in queue of an M/G/1 FIFO queue:
/// Wq = λ·E[S²] / (2(1 − ρ)) with ρ = λ·E[S] and E[S²] = E[S]²·(1 + c²), where c²
/// is the service time's squared coefficient of variation. `None` when ρ ≥ 1.
pub fn pollaczek_khinchine_wait(arrival_rate: f64, service_mean_s: f64, service_scv: f64) -> Option<f64> {
    let rho = arrival_rate * service_mean_s;
    if !(0.0..1.0).contains(&rho) {
        return None;
    }
    let second_moment = service_mean_s * service_mean_s * (1.0 + service_scv);
    Some(arrival_rate * second_moment / (2.0 * (1.0 - rho)))
}

#[cfg(test)]
mod pk_tests {
    use super::*;

    /// With exponential service (c² = 1) P-K is Erlang C with one server.
    #[test]
    fn pollaczek_khinchine_with_exponential_service_is_erlang_c() {
        let pk = pollaczek_khinchine_wait(0.8, 1.0, 1.0).unwrap();
        let erlang = erlang_c(0.8, 1.0, 1).unwrap().wait_mean_s;
        assert!((pk - erlang).abs() < 1e-12, "{pk} vs {erlang}");
        // Deterministic service halves the wait (M/D/1).
        assert!((pollaczek_khinchine_wait(0.8, 1.0, 0.0).unwrap() - erlang / 2.0).abs() < 1e-12);
        assert_eq!(pollaczek_khinchine_wait(1.0, 1.0, 1.0), None);
    }
}
