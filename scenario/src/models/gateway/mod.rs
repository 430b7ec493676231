//! The scenario sections of the `gateway` model (seed 001): `[workload]`, `[stack]`,
//! `[gateway]` (overrides of the fixture's gateway knobs), `[[incidents]]`, `[tiers]`
//! and `[classes]` (overrides of fixture entries) and `[load]` (turns from data), the
//! gateway's warnings and its metric table.
//!
//! The fixture (the shipped one, or `workload.fixture`) supplies tiers, classes, the
//! turn plan and gateway defaults; it is read once when the scenario is loaded, and
//! the engine's classes, plan and metric names are built from it then. The engine's
//! classes are the fixture's, in its order, then `NAME_fallback` for each class whose
//! failed calls can be re-sent to another tier ([`Fixture::resendable`]).

mod build;
pub mod capacity;
pub mod fixture;
pub(crate) mod meter_replay;
mod metrics;
mod presentation;
mod resolved;
mod schema;
mod validate;

use stampede_engine::models::gateway::{Gate, Gateway as GatewayModel, GatewayResults, GatewaySeries};
use stampede_engine::secs_to_nanos;
use stampede_engine::LatencyHistogram;

use super::metrics::{
    defs, intern, intern_series, values, MetricDef, ReplicaOutput, SeriesDef, SeriesKind, TimedLatency, TracedReplica,
};
use super::spec::ModelSpec;
use crate::base::error::Result;
use crate::scenario::RunConfig;

/// The LLM gateway model (seed 001).
pub struct Gateway;

impl ModelSpec for Gateway {
    type Config = GatewayConfig;
    const NAME: &'static str = "gateway";
    const DESCRIPTION: &'static str =
        "LLM gateway: turns follow your fixture's plan of LLM calls over metered tiers, through a reorderable stack of defences";
    const SECTIONS: &'static [&'static str] =
        &["workload", "stack", "gateway", "incidents", "tiers", "classes", "turn", "load"];
    const PATH_FIELDS: &'static [&'static str] = &["workload.fixture"];

    fn inputs(config: &GatewayConfig) -> Vec<(String, String)> {
        let mut files: Vec<(String, String)> =
            config.workload.fixture.iter().map(|path| ("workload.fixture".into(), path.clone())).collect();
        files.extend(crate::inputs::input_files(None, config.load.as_ref()));
        if let Some(resolved) = &config.resolved {
            for (name, tier) in &resolved.fixture.tiers {
                if let Some(spec) = &tier.ttft_s {
                    files.extend(crate::inputs::input_files(Some((&format!("tiers.{name}.ttft_s"), spec)), None));
                }
            }
        }
        files
    }

    fn prepare(config: GatewayConfig) -> Result<GatewayConfig> {
        config.resolve()
    }

    fn validate(config: &GatewayConfig, run: &RunConfig) -> Result<()> {
        config.validate(run)
    }

    fn metrics(config: &GatewayConfig) -> Vec<MetricDef> {
        defs(&config.resolved().table.0)
    }

    fn latencies(config: &GatewayConfig) -> &'static [&'static str] {
        config.resolved().latencies
    }

    fn warnings(config: &GatewayConfig, run: &RunConfig) -> Vec<String> {
        config.warnings(run)
    }

    fn presentation(config: &GatewayConfig, _: &RunConfig) -> super::presentation::Presentation {
        let bulkheads = if config.stack.client == ClientName::Stack && config.stack.gates.contains(&Gate::Bulkhead) {
            let classes = config.classes();
            config
                .class_names()
                .into_iter()
                .zip(classes)
                .map(|(class, params)| presentation::BulkheadSlots {
                    class,
                    slots: params.bulkhead_slots,
                    given: config.stack.bulkhead_slots.contains_key(class),
                })
                .collect()
        } else {
            Vec::new()
        };
        presentation::presentation(&config.resolved().class_names(), &config.incidents, &bulkheads)
    }

    /// Attempts and answered turns, then each tier's attempts (by tier name, sorted).
    fn series(config: &GatewayConfig) -> &'static [SeriesDef] {
        let mut series = GATEWAY_SERIES.to_vec();
        for tier in config.resolved().fixture.tiers.keys() {
            series.push(SeriesDef { name: intern(format!("{tier}.attempt_rps")), kind: SeriesKind::Count });
        }
        intern_series(series)
    }

    fn series_bucket_s(_: &GatewayConfig) -> f64 {
        SERIES_BUCKET_S
    }

    /// Turns, then each class's calls (the classes with latency histograms).
    fn timed_latencies(config: &GatewayConfig) -> Vec<TimedLatency> {
        let turn = TimedLatency { name: "turn", histogram: "turn_s", degraded: false };
        let classes = config.resolved().classes.iter().filter(|c| !c.resent).map(|c| TimedLatency {
            name: intern(format!("{}_call", c.name)),
            histogram: intern(format!("{}_call_s", c.name)),
            degraded: false,
        });
        std::iter::once(turn).chain(classes).collect()
    }

    fn latency_window_s(_: &GatewayConfig, run: &RunConfig) -> f64 {
        latency_window_s(run)
    }

    fn run_replica(
        config: &GatewayConfig,
        run: &RunConfig,
        master_seed: u64,
        replica: u64,
        histograms: &mut [LatencyHistogram],
    ) -> ReplicaOutput {
        let window = secs_to_nanos(latency_window_s(run));
        let model = GatewayModel::new(config.params(run), master_seed, replica, histograms);
        let (results, series, _) = model.with_latency_windows(window).run_all();
        output(config, &results, series)
    }

    const TRACES: bool = true;

    fn trace_replica(config: &GatewayConfig, run: &RunConfig, master_seed: u64, replica: u64) -> Option<TracedReplica> {
        let mut histograms: Vec<_> = config.resolved().latencies.iter().map(|_| LatencyHistogram::new()).collect();
        let window = secs_to_nanos(latency_window_s(run));
        let model = GatewayModel::new(config.params(run), master_seed, replica, &mut histograms);
        let model = model.with_latency_windows(window).traced();
        let (results, series, trace) = model.run_all();
        Some(TracedReplica { output: output(config, &results, series), trace: trace.expect("traced") })
    }
}

/// The width of the gateway's time-series buckets.
pub(super) const SERIES_BUCKET_S: f64 = 1.0;

/// The gateway's latency windows: round, at most 60 of them, in whole 1 s buckets.
fn latency_window_s(run: &RunConfig) -> f64 {
    super::series::default_latency_window_s(run.horizon_s, SERIES_BUCKET_S)
}

const GATEWAY_SERIES: &[SeriesDef] = &[
    SeriesDef { name: "attempt_rps", kind: SeriesKind::Count },
    SeriesDef { name: "goodput_tps", kind: SeriesKind::Count },
];

fn output(config: &GatewayConfig, results: &GatewayResults, series: GatewaySeries) -> ReplicaOutput {
    let counts = |v: Vec<u64>| v.into_iter().map(u128::from).collect();
    ReplicaOutput {
        metrics: values(&config.resolved().table.0, results),
        series: [series.attempts, series.answered].into_iter().chain(series.tier_attempts).map(counts).collect(),
        latency_windows: series.latency,
        ..ReplicaOutput::default()
    }
}

pub use schema::{
    ClientName, GatewayConfig, IncidentName, IncidentSection, LimiterName, StackSection, WorkloadSection,
};
