//! The calibration's own arithmetic: intervals from observed times, metric weights,
//! the residuals' autocorrelation.

use std::collections::BTreeMap;

use super::*;

fn observed(times: &[f64]) -> Observed {
    Observed { times_s: times.to_vec(), metrics: BTreeMap::new() }
}

#[test]
fn rows_become_intervals_the_last_as_long_as_the_one_before() {
    let spans = intervals(&observed(&[0.0, 10.0, 30.0]), 60.0).unwrap();
    assert_eq!(spans, vec![(0.0, 10.0), (10.0, 30.0), (30.0, 50.0)]);
    // Past the horizon, before the start, too few rows: refused, saying what.
    let late = intervals(&observed(&[0.0, 40.0]), 60.0).unwrap_err().to_string();
    assert!(late.contains("40..80 s ends after run.horizon_s = 60"), "{late}");
    assert!(intervals(&observed(&[-1.0, 5.0]), 60.0).unwrap_err().to_string().contains("before the run starts"));
    assert!(intervals(&observed(&[0.0]), 60.0).unwrap_err().to_string().contains("at least two intervals"));
}

#[test]
fn metrics_take_weights() {
    assert_eq!(parse_metric("api.busy").unwrap(), ("api.busy".into(), 1.0));
    assert_eq!(parse_metric("web.page.p99_s:2.5").unwrap(), ("web.page.p99_s".into(), 2.5));
    for bad in ["api.busy:0", "api.busy:-1", "api.busy:x"] {
        assert!(parse_metric(bad).unwrap_err().to_string().contains("weight"), "{bad}");
    }
}

fn metric(observed: &[f64], mean: &[f64]) -> MetricFidelity {
    let replicas: Vec<Vec<Option<f64>>> = vec![mean.iter().map(|&m| Some(m)).collect(); 2];
    let observed: Vec<Option<f64>> = observed.iter().map(|&o| Some(o)).collect();
    MetricFidelity { name: "m".into(), weight: 1.0, fidelity: fidelity(&observed, &replicas), observed }
}

/// Residuals that run in long stretches are positively autocorrelated; alternating
/// ones negatively; the pooled figure centres each metric on its own mean.
#[test]
fn the_residuals_autocorrelation_sees_runs_and_alternation() {
    let mean = [10.0; 8];
    let runs = metric(&[11.0, 11.0, 11.0, 11.0, 9.0, 9.0, 9.0, 9.0], &mean);
    let alternating = metric(&[11.0, 9.0, 11.0, 9.0, 11.0, 9.0, 11.0, 9.0], &mean);
    let high = residual_autocorrelation(std::slice::from_ref(&runs)).unwrap();
    let low = residual_autocorrelation(std::slice::from_ref(&alternating)).unwrap();
    // Runs of four: 6 of 7 neighbouring pairs agree. Alternation: all 7 disagree.
    assert!((high - 5.0 / 8.0).abs() < 0.05, "{high}");
    assert!((low + 7.0 / 8.0).abs() < 0.05, "{low}");
    // A constant offset is the bias, not autocorrelation.
    let offset = metric(&[12.0; 8], &mean);
    assert_eq!(residual_autocorrelation(&[offset]), None);
}
