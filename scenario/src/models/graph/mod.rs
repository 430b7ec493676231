//! The `graph` model: the user's own service graph (see `schema.rs` for the sections,
//! `build.rs` for how names become indices), its metrics named from the graph
//! (`api.checkout.p99_s`, `payments.utilisation`, `api->payments.retries`), its
//! series per service, and what its report draws (`presentation.rs`).

pub mod build;
pub(crate) mod metrics;
mod presentation;
pub(crate) mod schema;
mod splitting;
pub(crate) mod topology;

use std::sync::Arc;

use stampede_engine::kernel::splitting::Splittable;
use stampede_engine::models::graph::{Graph as GraphModel, GraphParams, GraphResults, GraphSeries};
use stampede_engine::{secs_to_nanos, LatencyHistogram};

use super::metrics::{
    intern, intern_names, intern_series, MetricDef, ReplicaOutput, SeriesDef, SeriesKind, TimedLatency, TracedReplica,
};
use super::presentation::Presentation;
use super::rare::Probe;
use super::spec::ModelSpec;
use crate::base::error::{Error, Result};
use crate::scenario::RunConfig;
pub use schema::GraphConfig;
pub use topology::Topology;

/// The service-graph model.
pub struct Graph;

impl ModelSpec for Graph {
    type Config = GraphConfig;
    const NAME: &'static str = "graph";
    const DESCRIPTION: &'static str =
        "your own service graph: services, endpoints and calls, with timeouts, retries, budgets, breakers, hedges, limits and faults";
    const SECTIONS: &'static [&'static str] = &["services", "edges", "workload", "faults", "series", "graph"];

    fn inputs(config: &GraphConfig) -> Vec<(String, String)> {
        let mut files = Vec::new();
        let mut add = |path: String, spec: &crate::inputs::DistributionSpec| {
            if let Some(file) = spec.file() {
                files.push((format!("{path}.file"), file.to_string()));
            }
        };
        for (name, service) in &config.services {
            if let Some(provisioning) = service.autoscale.as_ref().map(|a| &a.provisioning) {
                add(format!("services.{name}.autoscale.provisioning"), provisioning);
            }
            for (ep, endpoint) in &service.endpoints {
                let path = format!("services.{name}.endpoints.{ep}");
                if let Some(work) = &endpoint.work {
                    add(format!("{path}.work"), work);
                }
                for (step_path, step) in schema::every_step(&endpoint.steps, &path) {
                    if let Some(work) = &step.work {
                        add(format!("{step_path}.work"), work);
                    }
                }
            }
        }
        for (name, edge) in &config.edges {
            if let Some(network) = &edge.network {
                add(format!("edges.\"{name}\".network"), network);
            }
        }
        for (w, workload) in config.workload.iter().enumerate() {
            let load = crate::inputs::input_files(None, workload.load.as_ref());
            files.extend(load.into_iter().map(|(path, file)| (format!("workload[{w}].{path}"), file)));
        }
        files
    }

    fn prepare(mut config: GraphConfig) -> Result<GraphConfig> {
        let topology = build::build(&config)?;
        config.metric_table = Some(Arc::new(metrics::MetricTable::new(&topology, &[])));
        config.topology = Some(Arc::new(topology));
        // A bucket left out widens for a graph of many series (see `series`'s module).
        let series = Self::series(&config).len();
        config.series.widen_default_bucket(series);
        Ok(config)
    }

    fn optional_columns(config: &GraphConfig) -> Vec<&'static str> {
        metrics::mechanisms(topology(config))
    }

    fn with_optional_columns(mut config: GraphConfig, groups: &[&'static str]) -> GraphConfig {
        config.metric_table = Some(Arc::new(metrics::MetricTable::new(topology(&config), groups)));
        config
    }

    fn validate(config: &GraphConfig, run: &RunConfig) -> Result<()> {
        for (i, fault) in config.faults.iter().enumerate() {
            if !(fault.start_s.is_finite() && fault.start_s >= 0.0 && fault.start_s < run.horizon_s) {
                return Err(Error::bad_input(format!(
                    "faults[{i}].start_s = {}: must be within the run (0 to run.horizon_s = {})",
                    fault.start_s, run.horizon_s
                )));
            }
            if fault.kind != "flush" {
                crate::base::checks::positive(
                    &format!("faults[{i}].duration_s"),
                    fault.duration_s,
                    "a positive number of seconds",
                )?;
            }
        }
        // Events per replica from every open workload together: a `[load]` by its
        // mean rate over the horizon (a schedule must not bypass the bound).
        let mut total_rate = 0.0;
        for (w, workload) in config.workload.iter().enumerate() {
            let rate_path = format!("workload[{w}].rate_per_s");
            let rate = match &workload.load {
                Some(load) => {
                    let pick = crate::inputs::load::Pick { field: "endpoint_column", value: &workload.entry };
                    match crate::inputs::load::entry_arrivals(
                        Some(load),
                        workload.rate_per_s,
                        &rate_path,
                        None,
                        Some(pick),
                    ) {
                        Ok(Some(process)) => crate::inputs::load::mean_rate(&process, run.horizon_s),
                        Ok(None) => workload.rate_per_s.unwrap_or(0.0),
                        Err(e) => return Err(e.context(format!("workload[{w}]"))),
                    }
                }
                None => workload.rate_per_s.unwrap_or(0.0),
            };
            crate::base::checks::events_within_budget(run.horizon_s, &format!("workload[{w}]'s rate"), rate)?;
            total_rate += rate;
        }
        crate::base::checks::events_within_budget(run.horizon_s, "the workloads' rates together", total_rate)?;
        config.series.validate(run)
    }

    fn metrics(config: &GraphConfig) -> Vec<MetricDef> {
        metric_table(config).defs.clone()
    }

    fn attribution(config: &GraphConfig) -> Vec<crate::models::metrics::Attribution> {
        let t = topology(config);
        let table = metric_table(config);
        table
            .cause_metrics(t.entries.len())
            .into_iter()
            .zip(table.culprit_metrics(t.entries.len()))
            .map(|(mut causes, culprits)| {
                causes.extend(culprits);
                causes
            })
            .enumerate()
            .flat_map(|(w, causes)| {
                let entry = intern(t.entries[w].clone());
                let services = &t.services;
                causes.into_iter().map(move |(metric, reason, service)| crate::models::metrics::Attribution {
                    metric,
                    entry,
                    service: intern(services[service].clone()),
                    reason,
                })
            })
            .collect()
    }

    fn latencies(config: &GraphConfig) -> &'static [&'static str] {
        let t = topology(config);
        let endings = ["", "_degraded", "_failed", "_all"];
        let names = t.entries.iter().flat_map(|e| endings.map(|ending| intern(format!("{e}.latency{ending}_s"))));
        intern_names(names.collect())
    }

    fn series(config: &GraphConfig) -> &'static [SeriesDef] {
        let t = topology(config);
        let mut series = vec![SeriesDef { name: "queue_depth", kind: SeriesKind::Area }];
        for s in &t.services {
            series.push(SeriesDef { name: intern(format!("{s}.queue_depth")), kind: SeriesKind::Area });
            series.push(SeriesDef { name: intern(format!("{s}.busy")), kind: SeriesKind::Area });
        }
        for e in &t.entries {
            series.push(SeriesDef { name: intern(format!("{e}.goodput_rps")), kind: SeriesKind::Count });
        }
        let table = metric_table(config);
        for s in t.services.iter().filter(|s| table.has(s, "autoscale")) {
            series.push(SeriesDef { name: intern(format!("{s}.instances")), kind: SeriesKind::Area });
            series.push(SeriesDef { name: intern(format!("{s}.desired_instances")), kind: SeriesKind::Area });
            series.push(SeriesDef { name: intern(format!("{s}.scale_metric")), kind: SeriesKind::Area });
        }
        for e in t.endpoints.iter().filter(|e| table.has(e, "cache")) {
            series.push(SeriesDef { name: intern(format!("{e}.cache_hits")), kind: SeriesKind::Count });
            series.push(SeriesDef { name: intern(format!("{e}.cache_misses")), kind: SeriesKind::Count });
        }
        for s in t.services.iter().filter(|s| table.has(s, "health_check")) {
            series.push(SeriesDef { name: intern(format!("{s}.unhealthy")), kind: SeriesKind::Area });
        }
        for e in t.edges.iter().filter(|e| table.has(e, "outlier")) {
            series.push(SeriesDef { name: intern(format!("{e}.ejected")), kind: SeriesKind::Area });
        }
        for e in t.edges.iter().filter(|e| table.has(e, "pool")) {
            series.push(SeriesDef { name: intern(format!("{e}.pool_in_use")), kind: SeriesKind::Area });
            series.push(SeriesDef { name: intern(format!("{e}.pool_waiting")), kind: SeriesKind::Area });
        }
        intern_series(series)
    }

    fn timed_latencies(config: &GraphConfig) -> Vec<TimedLatency> {
        let t = topology(config);
        let timed = |e: &String| TimedLatency {
            name: intern(e.clone()),
            histogram: intern(format!("{e}.latency_s")),
            degraded: true,
        };
        t.entries.iter().map(timed).collect()
    }

    fn latency_window_s(config: &GraphConfig, run: &RunConfig) -> f64 {
        // One kind per entry point kept over time.
        config.series.latency_window_s(run.horizon_s, topology(config).entries.len())
    }

    fn series_bucket_s(config: &GraphConfig) -> f64 {
        config.series.bucket_s()
    }

    fn presentation(config: &GraphConfig, run: &RunConfig) -> Presentation {
        presentation::presentation(config, run)
    }

    fn run_replica(
        config: &GraphConfig,
        run: &RunConfig,
        master_seed: u64,
        replica: u64,
        histograms: &mut [LatencyHistogram],
    ) -> ReplicaOutput {
        let window = secs_to_nanos(Self::latency_window_s(config, run));
        let model = GraphModel::new(params(config, run), master_seed, replica, histograms);
        let (results, series) = model.with_latency_windows(window).run();
        output(config, &results, series)
    }

    const TRACES: bool = true;

    fn trace_replica(config: &GraphConfig, run: &RunConfig, master_seed: u64, replica: u64) -> Option<TracedReplica> {
        let t = topology(config);
        let mut histograms: Vec<LatencyHistogram> = t.entries.iter().map(|_| LatencyHistogram::new()).collect();
        let endpoints = t.endpoints.iter().map(|e| intern(e.clone())).collect();
        let services = t.services.iter().map(|s| intern(s.clone())).collect();
        let names = stampede_engine::models::graph::TraceNames::new(endpoints, services, intern);
        let window = secs_to_nanos(Self::latency_window_s(config, run));
        let model = GraphModel::new(params(config, run), master_seed, replica, &mut histograms);
        let model = model.with_latency_windows(window).traced(names);
        let (results, series, trace) = model.run_traced();
        Some(TracedReplica { output: output(config, &results, series), trace: trace.expect("traced") })
    }

    fn quantities(config: &GraphConfig) -> Vec<String> {
        splitting::quantities(topology(config))
    }

    fn end_score(_: &GraphConfig) -> Option<&'static str> {
        // A storm, an unrecovered run and a slow minute all rise with the attempts out.
        Some("attempts_in_flight")
    }

    fn splittable(
        config: &GraphConfig,
        run: &RunConfig,
        master_seed: u64,
        probe: Probe,
    ) -> Option<Box<dyn Splittable>> {
        let histograms = Self::latencies(config).len();
        let params = params(config, run);
        Some(Box::new(splitting::GraphSplitting {
            config: Arc::new(config.clone()),
            params,
            histograms,
            master_seed,
            probe,
        }))
    }
}

fn topology(config: &GraphConfig) -> &Topology {
    config.topology.as_deref().expect("prepare builds the topology")
}

fn metric_table(config: &GraphConfig) -> &metrics::MetricTable {
    config.metric_table.as_deref().expect("prepare builds the metric table")
}

/// The engine's parameters for one replica.
pub fn params(config: &GraphConfig, run: &RunConfig) -> GraphParams {
    let mut params = topology(config).params.clone();
    params.warmup = secs_to_nanos(run.warmup_s);
    params.horizon = secs_to_nanos(run.horizon_s);
    params.bucket = secs_to_nanos(config.series.bucket_s()).max(1);
    params.recovery_hold = secs_to_nanos(config.series.recovery_hold_s);
    params
}

fn output(config: &GraphConfig, results: &GraphResults, mut series: GraphSeries) -> ReplicaOutput {
    let (t, table) = (topology(config), metric_table(config));
    let metrics = table.values(results);
    let bucket_ns = secs_to_nanos(config.series.bucket_s()).max(1) as u128;
    let buckets = series.queued_area.first().map_or(0, Vec::len);
    let mut out = vec![(0..buckets).map(|b| series.queued_area.iter().map(|s| s[b]).sum()).collect()];
    for (queued, busy) in series.queued_area.into_iter().zip(series.busy_area) {
        out.push(queued);
        out.push(busy);
    }
    for successes in series.successes {
        out.push(successes.into_iter().map(u128::from).collect());
    }
    for (s, instances) in series.instances_area.into_iter().enumerate() {
        if table.has(&t.services[s], "autoscale") {
            // A point that does not scale this service serves with all of its instances.
            let fixed = || vec![t.params.services[s].instances as u128 * bucket_ns; buckets];
            let scaled = !instances.is_empty();
            out.push(if scaled { instances } else { fixed() });
            // Its autoscaler's decisions: the count asked for, and the metric read per
            // ready instance (kept × 1,000; NaN-free zeros where it does not scale).
            let (desired, read) = (&mut series.desired_area[s], &mut series.scale_read_milli_area[s]);
            out.push(if scaled { std::mem::take(desired) } else { fixed() });
            out.push(if scaled {
                std::mem::take(read).into_iter().map(|a| a / 1_000).collect()
            } else {
                vec![0; buckets]
            });
        }
    }
    for (e, (hits, misses)) in
        series.cache_hits.into_iter().zip(series.cache_misses).enumerate().take(t.endpoints.len())
    {
        if table.has(&t.endpoints[e], "cache") {
            // A point without this cache has none: every request is a miss.
            let lookups = || vec![0; buckets];
            out.push(if hits.is_empty() { lookups() } else { hits.into_iter().map(u128::from).collect() });
            out.push(if misses.is_empty() { lookups() } else { misses.into_iter().map(u128::from).collect() });
        }
    }
    // A mechanism off at this point (on at another) reads 0 throughout.
    let or_zeros = |area: Vec<u128>| if area.is_empty() { vec![0; buckets] } else { area };
    for (s, area) in series.unhealthy_area.into_iter().enumerate() {
        if table.has(&t.services[s], "health_check") {
            out.push(or_zeros(area));
        }
    }
    for (e, area) in series.ejected_area.into_iter().enumerate() {
        if table.has(&t.edges[e], "outlier") {
            out.push(or_zeros(area));
        }
    }
    for (e, (in_use, waiting)) in series.pool_in_use_area.into_iter().zip(series.pool_waiting_area).enumerate() {
        if table.has(&t.edges[e], "pool") {
            out.push(or_zeros(in_use));
            out.push(or_zeros(waiting));
        }
    }
    ReplicaOutput { metrics, latency_windows: series.latency, series: out, counts: Vec::new() }
}
