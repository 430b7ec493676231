//! In-process tests of the layers above the models: resolving scenarios, grid
//! expansion, validation messages and verify — without launching the binary.

use crate::scenario::builtin::{load_scenario_source, BUILTINS};
use crate::{Overrides, Scenario};
use stampede_engine::LatencyHistogram;

/// Every built-in scenario's model reports exactly the metrics and series it declares.
#[test]
fn models_report_what_they_declare() {
    for (name, _) in BUILTINS {
        let overrides = Overrides { sets: vec![("run.horizon_s".into(), toml::Value::Float(6.0))], grids: vec![] };
        let mut source = load_scenario_source(name).unwrap();
        if let Some(toml::Value::Table(run)) = source.get_mut("run") {
            run.insert("warmup_s".into(), toml::Value::Float(0.5));
        }
        let scenario = Scenario::resolve(source, &overrides).unwrap();
        let point = &scenario.grid_points().unwrap()[0];
        let mut histograms: Vec<LatencyHistogram> =
            point.model.latencies().iter().map(|_| LatencyHistogram::new()).collect();
        let output = point.model.run_replica(&point.run, 1, 0, &mut histograms);
        assert_eq!(output.metrics.len(), point.model.metrics().len(), "{name}: metrics");
        assert_eq!(output.series.len(), point.model.series().len(), "{name}: series");
        let names: std::collections::HashSet<&str> = point.model.metrics().iter().map(|m| m.name).collect();
        assert_eq!(names.len(), point.model.metrics().len(), "{name}: duplicate metric names");
    }
}
