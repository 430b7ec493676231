//! Cache endpoints against theory and in the failure they are known for. Under
//! independent Zipf requests an LRU cache's hit ratio matches Che's approximation; a
//! TTL cache's hit ratio for a key requested at Poisson rate λ is λT / (1 + λT). A flush
//! under load sends every miss to the origin: without single flight the origin drowns
//! in misses it answers too late to refill anything and the cache stays cold (a
//! metastable failure); with it the origin sees one fetch per key and the cache
//! recovers. Serving stale entries hides an origin's errors. Bad settings are refused.

mod common;

use common::{replica_output, resolve};

/// A client calling `front.get`, which caches `db.get`'s answers.
#[allow(clippy::too_many_arguments)]
fn scenario(horizon_s: f64, warmup_s: f64, cache: &str, db: &str, edge: &str, workload: &str, faults: &str) -> String {
    format!(
        r#"name = "cache"
model = "graph"
[run]
horizon_s = {horizon_s}
warmup_s = {warmup_s}
replicas = 4
seed = 21
[services.front]
workers = 100000
[services.front.endpoints.get]
cache = {cache}
steps = [{{ call = "db.get" }}]
[services.db]
{db}
[services.db.endpoints.get]
[edges."front->db"]
{edge}
[[workload]]
entry = "front.get"
{workload}
[series]
bucket_s = 1.0
{faults}"#
    )
}

/// The mean over replicas of each metric named, and of each series named.
fn run(text: &str, replicas: u64, metrics: &[&str], series: &[&str]) -> (Vec<f64>, Vec<Vec<f64>>) {
    let scenario = resolve(text).unwrap();
    let point = scenario.grid_point(0).unwrap();
    let mut values = vec![0.0; metrics.len()];
    let mut curves: Vec<Vec<f64>> = vec![Vec::new(); series.len()];
    for r in 0..replicas {
        let (m, s) = replica_output(&point, scenario.run.seed, r);
        for (v, name) in values.iter_mut().zip(metrics) {
            *v += m.get(*name).unwrap_or_else(|| panic!("{name}")) / replicas as f64;
        }
        for (curve, name) in curves.iter_mut().zip(series) {
            let points = s.get(*name).unwrap_or_else(|| panic!("{name}"));
            curve.resize(points.len(), 0.0);
            for (c, &p) in curve.iter_mut().zip(points) {
                *c += p as f64 / replicas as f64;
            }
        }
    }
    (values, curves)
}

/// Che's approximation of an LRU cache of `capacity` under independent requests with
/// popularities `p`: the characteristic time t solves Σ (1 − e^(−p t)) = capacity, and
/// the hit ratio is Σ p (1 − e^(−p t)).
fn che(p: &[f64], capacity: f64) -> f64 {
    let filled = |t: f64| p.iter().map(|&q| 1.0 - (-q * t).exp()).sum::<f64>();
    let (mut lo, mut hi) = (0.0, 1.0);
    while filled(hi) < capacity {
        hi *= 2.0;
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if filled(mid) < capacity {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    p.iter().map(|&q| q * (1.0 - (-q * lo).exp())).sum()
}

#[test]
fn an_lru_cache_under_zipf_requests_hits_as_che_approximates() {
    let (keys, s) = (5000u64, 0.8);
    let weights: Vec<f64> = (1..=keys).map(|k| (k as f64).powf(-s)).collect();
    let total: f64 = weights.iter().sum();
    let p: Vec<f64> = weights.iter().map(|w| w / total).collect();
    for capacity in [100u32, 500] {
        let text = scenario(
            60.0,
            20.0,
            &format!("{{ capacity = {capacity} }}"),
            "workers = 100000",
            "",
            &format!("rate_per_s = 4000.0\nkeys = {keys}\nzipf_s = {s}"),
            "",
        );
        let (values, _) = run(&text, 4, &["front.get.cache_hit_ratio"], &[]);
        let theory = che(&p, capacity as f64);
        assert!(
            (values[0] / theory - 1.0).abs() < 0.02,
            "capacity {capacity}: hit ratio {:.4} against Che's {theory:.4}",
            values[0]
        );
    }
}

#[test]
fn a_ttl_cache_hits_lambda_t_over_one_plus_lambda_t() {
    // 100 keys at 100 requests/s: each key at λ = 1/s.
    for ttl in [0.5, 2.0] {
        let text = scenario(
            400.0,
            20.0,
            &format!("{{ capacity = 1000, ttl_s = {ttl} }}"),
            "workers = 100000",
            "",
            "rate_per_s = 100.0\nkeys = 100",
            "",
        );
        let (values, _) = run(&text, 4, &["front.get.cache_hit_ratio"], &[]);
        let theory = ttl / (1.0 + ttl);
        assert!((values[0] / theory - 1.0).abs() < 0.02, "TTL {ttl}: hit ratio {:.4} against {theory:.4}", values[0]);
    }
}

/// 100 keys at 4,000 requests/s (ramped up over 10 s); the origin serves 100/s and its
/// callers give up after 0.5 s. At 30 s the cache is flushed.
fn flushed(coalesce: bool) -> (Vec<f64>, Vec<Vec<f64>>) {
    let text = scenario(
        60.0,
        0.0,
        &format!("{{ capacity = 1000, coalesce = {coalesce} }}"),
        "workers = 5",
        "timeout_s = 0.5",
        "load = { rate = [[0, 0], [10, 4000]], interpolate = \"linear\" }\nkeys = 100",
        "[[faults]]\ntarget = \"front\"\nkind = \"flush\"\nstart_s = 30.0\n",
    )
    .replace(
        "[services.db.endpoints.get]",
        "[services.db.endpoints.get]\nwork = { dist = \"constant\", value_s = 0.05 }",
    );
    run(&text, 2, &["front.get.cache_coalesced"], &["front.get.cache_hits", "front.get.cache_misses"])
}

#[test]
fn a_flush_without_single_flight_stays_cold_and_with_it_recovers() {
    let share = |curves: &[Vec<f64>], from: usize, to: usize| {
        let hits: f64 = curves[0][from..to].iter().sum();
        let misses: f64 = curves[1][from..to].iter().sum();
        hits / (hits + misses)
    };
    let (_, plain) = flushed(false);
    assert!(share(&plain, 20, 30) > 0.99, "warm before the flush: {}", share(&plain, 20, 30));
    // The misses (4,000/s) queue at an origin that serves 100/s: after the first few
    // dozen, every answer comes after its caller gave up, nothing more is refilled, and
    // the misses go on. With single flight the origin sees at most one fetch per key.
    // The keys filled in the first half second stay hot (about 40 of 100); the rest
    // never come back: 30 s later the hit ratio has not moved.
    let (early, late) = (share(&plain, 35, 45), share(&plain, 50, 60));
    assert!(late < 0.6, "without single flight most keys stay cold: {late}");
    assert!((late - early).abs() < 0.05, "and it does not recover: {early} then {late}");
    let (coalesced, with) = flushed(true);
    assert!(share(&with, 35, 60) > 0.99, "with single flight it refills at once: {}", share(&with, 35, 60));
    assert!(coalesced[0] > 0.0, "misses waited on fetches in flight");
}

#[test]
fn serving_stale_hides_an_origin_outage() {
    // 10 keys, a 1 s TTL; the origin errors on everything from 20 to 40 s.
    let failed = |serve_stale: bool| {
        let text = scenario(
            60.0,
            10.0,
            &format!("{{ capacity = 100, ttl_s = 1.0, serve_stale = {serve_stale} }}"),
            "workers = 100000",
            "",
            "rate_per_s = 200.0\nkeys = 10",
            "[[faults]]\ntarget = \"db\"\nkind = \"errors\"\nrate = 1.0\nstart_s = 20.0\nduration_s = 20.0\n",
        );
        run(&text, 2, &["front.get.failed_ratio", "front.get.cache_stale_served"], &[]).0
    };
    let (plain, stale) = (failed(false), failed(true));
    assert!(plain[0] > 0.005, "each key's fetch fails once a second: {plain:?}");
    assert_eq!(stale[0], 0.0, "every failed fetch answered stale: {stale:?}");
    assert!(stale[1] > 0.0);
}

#[test]
fn bad_cache_settings_are_refused_naming_the_field() {
    let base =
        |cache: &str, workload: &str, faults: &str| scenario(10.0, 0.0, cache, "workers = 1", "", workload, faults);
    for (text, field) in [
        (base("{ capacity = 0 }", "rate_per_s = 1.0", ""), "cache.capacity = 0: must be at least 1"),
        (base("{ capacity = 5, ttl_s = 0 }", "rate_per_s = 1.0", ""), "cache.ttl_s = 0"),
        (
            base("{ capacity = 5 }", "rate_per_s = 1.0", "").replace("steps = [{ call = \"db.get\" }]", ""),
            "front.endpoints.get.cache: a cache needs an origin",
        ),
        (base("{ capacity = 5 }", "rate_per_s = 1.0\nzipf_s = -1", ""), "zipf_s = -1"),
        (
            base(
                "{ capacity = 5 }",
                "rate_per_s = 1.0",
                "[[faults]]\ntarget = \"db\"\nkind = \"flush\"\nstart_s = 1.0\n",
            ),
            "db has no endpoint with a cache",
        ),
        (
            base(
                "{ capacity = 5 }",
                "rate_per_s = 1.0",
                "[[faults]]\ntarget = \"front->db\"\nkind = \"flush\"\nstart_s = 1.0\n",
            ),
            "empties a service's caches; an edge has none",
        ),
    ] {
        let error = resolve(&text).unwrap_err();
        assert_eq!(error.exit_code(), 2, "{field}");
        assert!(error.to_string().contains(field), "{field}: {error}");
    }
}
