//! After the provider heals, every limiter the gateway offers lets goodput return to
//! the no-incident level: over 300–360 s, after sonnet was fully out for 20–40 s at 10
//! turns/s (inside the quota), answer goodput is within 5% of the same seeds without
//! the outage — the whole 95% interval of the paired difference, for each limiter.
//! (Before fast rejections were kept out of the no-load latency, Gradient's stayed
//! 85–89% below, its limit at 7; AIMD, growing by one per window, needs about 160 s.)

use stampede_engine::LatencyHistogram;
use stampede_scenario::base::typing::parse_text;
use stampede_scenario::{Overrides, Scenario};

const SCENARIO: &str = r#"
name = "recovery"
model = "gateway"
[run]
horizon_s = 360.0
warmup_s = 300.0
replicas = 24
[workload]
turns_per_s = 10.0
[grid]
"stack.limiter" = ["fixed", "aimd", "gradient", "gradient2"]
[[grid.case]]
label = "healthy"
[[grid.case]]
label = "outage"
incidents = [{ tier = "sonnet", kind = "outage", start_s = 20.0, duration_s = 20.0 }]
"#;

#[test]
fn every_limiter_recovers_after_an_outage() {
    let scenario = Scenario::resolve(parse_text(SCENARIO, "recovery").unwrap(), &Overrides::default()).unwrap();
    let metrics = scenario.model.metrics();
    let goodput = metrics.iter().position(|m| m.name == "answer_goodput_rps").unwrap();
    let limit = metrics.iter().position(|m| m.name == "answer_limit_final").unwrap();
    let points = scenario.grid_points().unwrap();
    let run = |point: &stampede_scenario::GridPoint| -> Vec<(f64, f64)> {
        (0..scenario.run.replicas as u64)
            .map(|replica| {
                let mut histograms: Vec<LatencyHistogram> =
                    point.model.latencies().iter().map(|_| LatencyHistogram::new()).collect();
                let out = point.model.run_replica(&point.run, 1, replica, &mut histograms);
                (out.metrics[goodput], out.metrics[limit])
            })
            .collect()
    };
    let mut report = Vec::new();
    for pair in points.chunks(2) {
        let limiter = pair[0].params[0].1.as_str().unwrap().to_string();
        let (healthy, outage) = (run(&pair[0]), run(&pair[1]));
        let n = healthy.len() as f64;
        let base = healthy.iter().map(|h| h.0).sum::<f64>() / n;
        let diffs: Vec<f64> = healthy.iter().zip(&outage).map(|(h, o)| o.0 - h.0).collect();
        let mean = diffs.iter().sum::<f64>() / n;
        let sd = (diffs.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        let half = 2.07 * sd / n.sqrt(); // Student-t, 23 degrees of freedom
        let limit_after = outage.iter().map(|o| o.1).sum::<f64>() / n;
        report.push(format!(
            "{limiter}: healthy {base:.3}/s, outage − healthy {mean:+.3} ± {half:.3} ({:+.1}% … {:+.1}%), answer's limit at the end {limit_after:.1}",
            100.0 * (mean - half) / base,
            100.0 * (mean + half) / base
        ));
        assert!(base > 1.0, "{}", report.join("\n"));
        assert!(mean - half >= -0.05 * base && mean + half <= 0.05 * base, "{}", report.join("\n"));
    }
    eprintln!("{}", report.join("\n"));
}
