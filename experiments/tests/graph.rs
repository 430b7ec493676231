//! The graph model against the dependency model: `graph-dependency` is
//! `dependency-slowdown` written as a graph, and every figure the two share agrees
//! within the interval of their difference, for every protection policy. A graph that
//! propagated the client's deadline into the dependency call (a different policy)
//! moves utilisation by 2% and fails this test; see the scenario's note.

use stampede_engine::LatencyHistogram;
use stampede_experiments::scenario::builtin::load_scenario_source;
use stampede_experiments::{Overrides, Scenario};

const REPLICAS: u64 = 60;

/// Per grid point, per replica, the metrics named in `metrics`, each summed (a metric
/// spelled `a+b+c` is the sum of three).
fn figures(name: &str, metrics: &[&str]) -> Vec<Vec<Vec<f64>>> {
    let scenario = Scenario::resolve(load_scenario_source(name).unwrap(), &Overrides::default()).unwrap();
    let seed = scenario.run.seed;
    scenario
        .grid_points()
        .unwrap()
        .iter()
        .map(|point| {
            let names: Vec<&str> = point.model.metrics().iter().map(|m| m.name).collect();
            (0..REPLICAS)
                .map(|replica| {
                    let mut histograms: Vec<LatencyHistogram> =
                        point.model.latencies().iter().map(|_| LatencyHistogram::new()).collect();
                    let output = point.model.run_replica(&point.run, seed, replica, &mut histograms);
                    metrics
                        .iter()
                        .map(|spec| {
                            spec.split('+')
                                .map(|m| {
                                    let index =
                                        names.iter().position(|n| *n == m).unwrap_or_else(|| panic!("{name}: {m}"));
                                    output.metrics[index]
                                })
                                .sum()
                        })
                        .collect()
                })
                .collect()
        })
        .collect()
}

fn mean_and_se(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, (var / n).sqrt())
}

#[test]
fn graph_dependency_equals_the_dependency_model_for_every_protection_policy() {
    let graph = figures(
        "graph-dependency",
        &[
            "service.handle.goodput_rps",
            "service.utilisation",
            "service.refused_queue_full",
            "service.refused_shed",
            "recovery_s",
        ],
    );
    let dependency = figures(
        "dependency-slowdown",
        &[
            "goodput_high_rps+goodput_normal_rps+goodput_low_rps",
            "pool_saturation_ratio",
            "queue_full",
            "shed",
            "recovery_s",
        ],
    );
    let labels = ["goodput", "utilisation", "queue full", "shed", "recovery"];
    let policies = ["none", "breaker", "shedder", "both"];
    assert_eq!(graph.len(), 4);
    assert_eq!(dependency.len(), 4);
    let mut compared = 0;
    for (p, policy) in policies.iter().enumerate() {
        for (m, label) in labels.iter().enumerate() {
            let column = |runs: &Vec<Vec<Vec<f64>>>| runs[p].iter().map(|r| r[m]).collect::<Vec<f64>>();
            let (g, g_se) = mean_and_se(&column(&graph));
            let (d, d_se) = mean_and_se(&column(&dependency));
            if g == 0.0 && d == 0.0 {
                continue; // no shedding without a shedder, no recovery time with a breaker
            }
            // 3.29 standard errors of the difference: a 99.9% interval, so that twenty
            // comparisons together stay above 98%.
            let bound = 3.29 * (g_se * g_se + d_se * d_se).sqrt();
            assert!((g - d).abs() <= bound, "{policy}, {label}: graph {g} ± {g_se}, dependency {d} ± {d_se}");
            // The test can fail: each interval is tight next to the figure.
            assert!(
                bound < 0.12 * d.abs().max(g.abs()),
                "{policy}, {label}: ±{bound} is too wide to compare {g} and {d}"
            );
            compared += 1;
        }
    }
    assert_eq!(compared, 13, "figures compared");
}
