//! Connection pools on a graph edge, against queueing theory. A pool of `c`
//! connections in front of a callee with unlimited workers and exponential work is an
//! M/M/c queue of attempts waiting for connections: the share that waits is Erlang C's
//! C(c, a) and the mean wait is C / (cμ − λ). With a bounded pending queue it is an
//! M/M/c/K: the share refused at once (`pool_full`) is the blocking probability. A
//! wait timeout bounds every wait; bad settings are refused naming the field.

mod common;

use common::{replica_metrics, resolve};
use stampede_engine::measurement::theory::{erlang_c, mmck};

const REPLICAS: u64 = 16;
const WORK_MEAN_S: f64 = 0.1;
const CONNECTIONS: u32 = 10;

fn scenario(rate_per_s: f64, horizon_s: f64, pool: &str) -> String {
    format!(
        r#"name = "pool"
model = "graph"
[run]
horizon_s = {horizon_s}
warmup_s = 20.0
replicas = 16
seed = 5
[services.db]
instances = 1
workers = 1000
[services.db.endpoints.query]
work = {{ dist = "exponential", mean_s = {WORK_MEAN_S} }}
[edges."client->db"]
pool = {pool}
[[workload]]
entry = "db.query"
rate_per_s = {rate_per_s}
"#
    )
}

/// Per metric named, its sum over the replicas.
fn sums(text: &str, metrics: &[&str]) -> Vec<f64> {
    let scenario = resolve(text).unwrap();
    let point = scenario.grid_point(0).unwrap();
    let mut totals = vec![0.0; metrics.len()];
    for replica in 0..REPLICAS {
        let values = replica_metrics(&point, scenario.run.seed, replica);
        for (total, metric) in totals.iter_mut().zip(metrics) {
            *total += values.get(*metric).unwrap_or_else(|| panic!("{metric}"));
        }
    }
    totals
}

#[test]
fn a_pool_over_unlimited_workers_waits_as_erlang_c_says() {
    let rate = 80.0; // ρ = 0.8 on 10 connections of 10 per second each
    let theory = erlang_c(rate, 1.0 / WORK_MEAN_S, CONNECTIONS).unwrap();
    let text = scenario(rate, 600.0, &format!("{{ size = {CONNECTIONS} }}"));
    let [waited, wait, full, in_use] = sums(
        &text,
        &[
            "client->db.pool_waited_ratio",
            "client->db.pool_wait_mean_s",
            "client->db.pool_full",
            "client->db.pool_in_use_mean",
        ],
    )[..] else {
        unreachable!()
    };
    let (waited, wait, in_use) = (waited / REPLICAS as f64, wait / REPLICAS as f64, in_use / REPLICAS as f64);
    // Little's law: connections in use = λ × the time each is held = the offered load.
    let offered = rate * WORK_MEAN_S;
    assert!((in_use / offered - 1.0).abs() < 0.02, "{in_use:.3} connections in use against {offered}");
    // Replica means scatter by ~15% (sd); 16 replicas of 580 s put 8% near 3 standard errors.
    assert!(
        (waited - theory.wait_probability).abs() < 0.03,
        "P(wait) {waited:.4} against Erlang C {:.4}",
        theory.wait_probability
    );
    assert!(
        (wait / theory.wait_mean_s - 1.0).abs() < 0.08,
        "mean wait {wait:.5} s against Erlang C {:.5} s",
        theory.wait_mean_s
    );
    assert_eq!(full, 0.0, "1024 places: nobody is refused");
}

#[test]
fn a_bounded_queue_refuses_as_mmck_says() {
    let (rate, pending) = (90.0, 5);
    let theory = mmck(rate, 1.0 / WORK_MEAN_S, CONNECTIONS, CONNECTIONS + pending);
    let text = scenario(rate, 300.0, &format!("{{ size = {CONNECTIONS}, max_pending = {pending} }}"));
    let [full, offered, refused] =
        sums(&text, &["client->db.pool_full", "db.query.offered", "db.query.failed_refused"])[..]
    else {
        unreachable!()
    };
    let blocked = full / offered;
    assert!(
        (blocked / theory.rejected_ratio - 1.0).abs() < 0.08,
        "refused {blocked:.4} against M/M/c/K {:.4}",
        theory.rejected_ratio
    );
    assert_eq!(full, refused, "a pool refusal is the request's failure (no retries here)");
}

#[test]
fn a_wait_timeout_bounds_every_wait() {
    let timeout_s = 0.005;
    let text = scenario(90.0, 120.0, &format!("{{ size = {CONNECTIONS}, wait_timeout_s = {timeout_s} }}"));
    let [timeouts, wait, refused] =
        sums(&text, &["client->db.pool_timeouts", "client->db.pool_wait_mean_s", "db.query.failed_refused"])[..]
    else {
        unreachable!()
    };
    assert!(timeouts > 0.0, "at ρ = 0.9 some waits exceed 5 ms");
    assert!(wait / (REPLICAS as f64) < timeout_s, "no attempt sent after waiting longer than the timeout");
    assert_eq!(timeouts, refused, "a wait that times out fails the request as refused");
}

#[test]
fn bad_pool_settings_are_refused_naming_the_field() {
    for (setting, field) in [
        ("{ size = 0 }", "pool.size = 0: must be at least 1"),
        ("{ wait_timeout_s = -1 }", "pool.wait_timeout_s = -1"),
        ("{ wait_timeout_s = 0 }", "pool.wait_timeout_s = 0"),
        ("{ sizes = 3 }", "unknown field `sizes`"),
    ] {
        let error = resolve(&scenario(10.0, 60.0, setting)).unwrap_err();
        assert_eq!(error.exit_code(), 2);
        let message = error.to_string();
        assert!(message.contains("client->db") && message.contains(field), "{setting}: {message}");
    }
}
