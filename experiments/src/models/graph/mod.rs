//! The `graph` model: the user's own service graph (see `schema.rs` for the sections,
//! `build.rs` for how names become indices), its metrics named from the graph
//! (`api.checkout.p99_s`, `payments.utilisation`, `edge.api->payments.retries`), its
//! series per service, and what its report draws.

pub mod build;
pub mod schema;
pub mod topology;

use std::sync::Arc;

use stampede_engine::models::graph::{Failure, Graph as GraphModel, GraphParams, GraphResults, GraphSeries, Refusal};
use stampede_engine::{secs_to_nanos, LatencyHistogram};

use super::metrics::{
    intern, intern_names, intern_series, Direction, MetricDef, MetricKind, ReplicaOutput, SeriesDef, SeriesKind,
    TracedReplica,
};
use super::presentation::{Presentation, Recovery, Section, TopologyEdge, TopologyService, Window};
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
            for (ep, endpoint) in &service.endpoints {
                let path = format!("services.{name}.endpoints.{ep}");
                if let Some(work) = &endpoint.work {
                    add(format!("{path}.work"), work);
                }
                for (k, step) in endpoint.steps.iter().enumerate() {
                    if let Some(work) = &step.work {
                        add(format!("{path}.steps[{k}].work"), work);
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
        config.topology = Some(Arc::new(build::build(&config)?));
        Ok(config)
    }

    fn validate(config: &GraphConfig, run: &RunConfig) -> Result<()> {
        for (i, fault) in config.faults.iter().enumerate() {
            if !(fault.start_s.is_finite() && fault.start_s >= 0.0 && fault.start_s < run.horizon_s) {
                return Err(Error::bad_input(format!(
                    "faults[{i}].start_s = {}: must be within the run (0 to run.horizon_s = {})",
                    fault.start_s, run.horizon_s
                )));
            }
            crate::base::checks::positive(
                &format!("faults[{i}].duration_s"),
                fault.duration_s,
                "a positive number of seconds",
            )?;
        }
        for (w, workload) in config.workload.iter().enumerate() {
            if let Some(rate) = workload.rate_per_s {
                crate::base::checks::events_within_budget(run.horizon_s, &format!("workload[{w}].rate_per_s"), rate)?;
            }
        }
        config.series.validate(run)
    }

    fn metrics(config: &GraphConfig) -> Vec<MetricDef> {
        table(topology(config)).into_iter().map(|(def, _)| def).collect()
    }

    fn latencies(config: &GraphConfig) -> &'static [&'static str] {
        let t = topology(config);
        intern_names(t.entries.iter().map(|e| intern(format!("{e}.latency_s"))).collect())
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
        intern_series(series)
    }

    fn series_bucket_s(config: &GraphConfig) -> f64 {
        config.series.bucket_s
    }

    fn presentation(config: &GraphConfig, run: &RunConfig) -> Presentation {
        let t = topology(config);
        let windows = config
            .faults
            .iter()
            .map(|f| {
                let what = match (f.kind.as_str(), f.factor, f.added_s, f.rate) {
                    ("slowdown", Some(x), ..) => format!("slowdown ×{x}"),
                    ("latency", _, Some(s), _) => format!("latency +{s} s"),
                    ("errors", .., Some(r)) => format!("errors {:.0}%", r * 100.0),
                    (kind, ..) => kind.to_string(),
                };
                Window { label: format!("{what} on {}", f.target), start_s: f.start_s, end_s: f.start_s + f.duration_s }
            })
            .collect();
        let pairs = |suffix: &str, names: &[String]| -> Vec<(String, String)> {
            names.iter().map(|n| (n.clone(), format!("{n}.{suffix}"))).collect()
        };
        let faulted = |target: &str| {
            config.faults.iter().any(|f| f.target == target || f.target.split('#').next() == Some(target))
        };
        let services = t
            .services
            .iter()
            .enumerate()
            .map(|(s, name)| {
                let p = &t.params.services[s];
                TopologyService {
                    name: name.clone(),
                    detail: format!("{} × {} workers", p.instances, p.workers),
                    colour_by: format!("{name}.utilisation"),
                    faulted: faulted(name),
                }
            })
            .collect();
        let edges = t
            .edges
            .iter()
            .enumerate()
            .map(|(e, name)| {
                let p = &t.params.edges[e];
                TopologyEdge {
                    from: p.from.map(|s| t.services[s as usize].clone()),
                    to: t.services[p.to as usize].clone(),
                    attempts: format!("edge.{name}.attempts"),
                    calls: format!("edge.{name}.calls"),
                    failed: format!("edge.{name}.failed"),
                    faulted: faulted(name),
                }
            })
            .collect();
        Presentation {
            windows,
            recovery: Some(Recovery::of_queue_depth(run.warmup_s)),
            sections: vec![
                Section::Topology {
                    title: "The graph: services coloured by utilisation, calls labelled with attempts per entry request and the share that failed".into(),
                    services,
                    edges,
                    entries: t.entries.iter().map(|e| format!("{e}.offered")).collect(),
                },
                Section::MetricBars {
                    title: "Success per entry point: answered in full ÷ offered".into(),
                    y_label: "success ratio".into(),
                    metrics: pairs("success_ratio", &t.entries),
                },
                Section::MetricBars {
                    title: "Amplification: attempts reaching each service ÷ entry requests".into(),
                    y_label: "attempts per entry request".into(),
                    metrics: pairs("amplification_ratio", &t.services),
                },
                Section::MetricBars {
                    title: "Utilisation: busy workers ÷ workers, per service".into(),
                    y_label: "utilisation".into(),
                    metrics: pairs("utilisation", &t.services),
                },
            ],
        }
    }

    fn run_replica(
        config: &GraphConfig,
        run: &RunConfig,
        master_seed: u64,
        replica: u64,
        histograms: &mut [LatencyHistogram],
    ) -> ReplicaOutput {
        let t = topology(config);
        let (results, series) = GraphModel::new(params(config, run), master_seed, replica, histograms).run();
        output(t, &results, series)
    }

    const TRACES: bool = true;

    fn trace_replica(config: &GraphConfig, run: &RunConfig, master_seed: u64, replica: u64) -> Option<TracedReplica> {
        let t = topology(config);
        let mut histograms: Vec<LatencyHistogram> = t.entries.iter().map(|_| LatencyHistogram::new()).collect();
        let endpoints = t.endpoints.iter().map(|e| intern(e.clone())).collect();
        let services = t.services.iter().map(|s| intern(s.clone())).collect();
        let model =
            GraphModel::new(params(config, run), master_seed, replica, &mut histograms).traced(endpoints, services);
        let (results, series, trace) = model.run_traced();
        Some(TracedReplica { output: output(t, &results, series), trace: trace.expect("traced") })
    }
}

fn topology(config: &GraphConfig) -> &Topology {
    config.topology.as_deref().expect("prepare builds the topology")
}

/// The engine's parameters for one replica.
pub fn params(config: &GraphConfig, run: &RunConfig) -> GraphParams {
    let mut params = topology(config).params.clone();
    params.warmup = secs_to_nanos(run.warmup_s);
    params.horizon = secs_to_nanos(run.horizon_s);
    params.bucket = secs_to_nanos(config.series.bucket_s).max(1);
    params.recovery_hold = secs_to_nanos(config.series.recovery_hold_s);
    params
}

fn output(t: &Topology, results: &GraphResults, series: GraphSeries) -> ReplicaOutput {
    let metrics = table(t).iter().map(|(_, read)| read.value(results)).collect();
    let buckets = series.queued_area.first().map_or(0, Vec::len);
    let mut out = vec![(0..buckets).map(|b| series.queued_area.iter().map(|s| s[b]).sum()).collect()];
    for (queued, busy) in series.queued_area.into_iter().zip(series.busy_area) {
        out.push(queued);
        out.push(busy);
    }
    for successes in series.successes {
        out.push(successes.into_iter().map(u128::from).collect());
    }
    ReplicaOutput { metrics, series: out, counts: Vec::new() }
}

/// Where a metric's value comes from.
#[derive(Clone, Copy, Debug)]
enum Read {
    Entry(usize, EntryValue),
    Service(usize, ServiceValue),
    Edge(usize, EdgeValue),
    RecoveredRatio,
    RecoveryS,
    Events,
}

#[derive(Clone, Copy, Debug)]
enum EntryValue {
    Offered,
    Goodput,
    SuccessRatio,
    DegradedRatio,
    FailedRatio,
    Failed(Failure),
    Mean,
    Quantile(f64),
}

#[derive(Clone, Copy, Debug)]
enum ServiceValue {
    Utilisation,
    QueueMean,
    InFlightMean,
    Arrivals,
    Amplification,
    Refused(Refusal),
    WastedRatio,
    Cancelled,
    LimitFinal,
}

#[derive(Clone, Copy, Debug)]
enum EdgeValue {
    Calls,
    Attempts,
    Retries,
    Hedges,
    HedgeWins,
    Timeouts,
    BudgetDenials,
    BreakerRefusals,
    BreakerTrips,
    Failed,
    Fallbacks,
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        f64::NAN
    } else {
        part as f64 / whole as f64
    }
}

impl Read {
    fn value(self, r: &GraphResults) -> f64 {
        match self {
            Read::Entry(w, value) => {
                let e = &r.entries[w];
                match value {
                    EntryValue::Offered => e.offered as f64,
                    EntryValue::Goodput => e.goodput_rps,
                    EntryValue::SuccessRatio => ratio(e.successes, e.offered),
                    EntryValue::DegradedRatio => ratio(e.degraded, e.offered),
                    EntryValue::FailedRatio => ratio(e.failed_total(), e.offered),
                    EntryValue::Failed(failure) => e.failed_by(failure) as f64,
                    EntryValue::Mean => e.latency_mean_s(),
                    EntryValue::Quantile(q) => e.latency.quantile(q) / 1e9,
                }
            }
            Read::Service(s, value) => {
                let service = &r.services[s];
                match value {
                    ServiceValue::Utilisation => service.utilisation,
                    ServiceValue::QueueMean => service.queue_mean,
                    ServiceValue::InFlightMean => service.present_mean,
                    ServiceValue::Arrivals => service.arrivals as f64,
                    ServiceValue::Amplification => ratio(service.arrivals, r.entries.iter().map(|e| e.offered).sum()),
                    ServiceValue::Refused(refusal) => service.refused_by(refusal) as f64,
                    ServiceValue::WastedRatio => {
                        if service.busy_s > 0.0 {
                            service.wasted_s / service.busy_s
                        } else {
                            0.0
                        }
                    }
                    ServiceValue::Cancelled => service.cancelled as f64,
                    ServiceValue::LimitFinal => service.limit_final,
                }
            }
            Read::Edge(e, value) => {
                let edge = &r.edges[e];
                (match value {
                    EdgeValue::Calls => edge.calls,
                    EdgeValue::Attempts => edge.attempts,
                    EdgeValue::Retries => edge.retries,
                    EdgeValue::Hedges => edge.hedges,
                    EdgeValue::HedgeWins => edge.hedge_wins,
                    EdgeValue::Timeouts => edge.timeouts,
                    EdgeValue::BudgetDenials => edge.budget_denials,
                    EdgeValue::BreakerRefusals => edge.breaker_refusals,
                    EdgeValue::BreakerTrips => edge.breaker_trips,
                    EdgeValue::Failed => edge.failed,
                    EdgeValue::Fallbacks => edge.fallbacks,
                }) as f64
            }
            Read::RecoveredRatio => {
                if r.recovered {
                    1.0
                } else {
                    0.0
                }
            }
            Read::RecoveryS => r.recovery_s,
            Read::Events => r.events as f64,
        }
    }
}

fn def(name: String, kind: MetricKind, description: String, fraction: bool, headline: Option<Direction>) -> MetricDef {
    let mut def = MetricDef::new(intern(name), kind, intern(description), fraction);
    if let Some(direction) = headline {
        def.headline = true;
        def.direction = direction;
    }
    def
}

/// Every metric of the graph with where its value comes from, in column order: per
/// entry point, per service, per edge, then the whole graph's.
fn table(t: &Topology) -> Vec<(MetricDef, Read)> {
    use MetricKind::{Count, Real};
    let mut rows = Vec::new();
    let mut add = |name: String, kind, description: String, fraction, headline, read| {
        rows.push((def(name, kind, description, fraction, headline), read));
    };
    for (w, e) in t.entries.iter().enumerate() {
        let r = |v| Read::Entry(w, v);
        add(
            format!("{e}.offered"),
            Count,
            format!("requests sent to {e} (after warm-up)"),
            false,
            None,
            r(EntryValue::Offered),
        );
        add(
            format!("{e}.goodput_rps"),
            Real,
            format!("{e}: requests answered in full per second"),
            false,
            Some(Direction::Higher),
            r(EntryValue::Goodput),
        );
        add(
            format!("{e}.success_ratio"),
            Real,
            format!("{e}: answered in full ÷ offered"),
            true,
            Some(Direction::Higher),
            r(EntryValue::SuccessRatio),
        );
        add(
            format!("{e}.degraded_ratio"),
            Real,
            format!("{e}: answered with a fallback somewhere in the tree ÷ offered"),
            true,
            None,
            r(EntryValue::DegradedRatio),
        );
        add(
            format!("{e}.failed_ratio"),
            Real,
            format!("{e}: failed ÷ offered"),
            true,
            Some(Direction::Lower),
            r(EntryValue::FailedRatio),
        );
        for failure in Failure::ALL {
            let why = match failure {
                Failure::Timeout => "timed out (the client's timeout or deadline)",
                Failure::Refused => "refused by the entry service",
                Failure::Error => "answered with an error (a failure below, or an error fault)",
                Failure::BreakerOpen => "refused by the client's own breaker",
            };
            add(
                format!("{e}.failed_{}", failure.name()),
                Count,
                format!("{e}: requests that failed, {why}"),
                false,
                None,
                r(EntryValue::Failed(failure)),
            );
        }
        add(
            format!("{e}.mean_s"),
            Real,
            format!("{e}: mean latency of requests answered in full"),
            false,
            None,
            r(EntryValue::Mean),
        );
        for (q, label, headline) in [(0.5, "p50", None), (0.99, "p99", Some(Direction::Lower)), (0.999, "p999", None)] {
            add(
                format!("{e}.{label}_s"),
                Real,
                format!("{e}: this replica's {label} latency of requests answered in full (±3.2%)"),
                false,
                headline,
                r(EntryValue::Quantile(q)),
            );
        }
    }
    for (s, name) in t.services.iter().enumerate() {
        let r = |v| Read::Service(s, v);
        add(
            format!("{name}.utilisation"),
            Real,
            format!("{name}: busy workers ÷ workers, time-averaged"),
            true,
            None,
            r(ServiceValue::Utilisation),
        );
        add(
            format!("{name}.queue_depth_mean"),
            Real,
            format!("{name}: requests waiting for a worker, time-averaged over its instances"),
            false,
            None,
            r(ServiceValue::QueueMean),
        );
        add(
            format!("{name}.in_flight_mean"),
            Real,
            format!("{name}: requests present (waiting, working, or waiting on calls), time-averaged"),
            false,
            None,
            r(ServiceValue::InFlightMean),
        );
        add(
            format!("{name}.arrivals"),
            Count,
            format!("{name}: attempts that reached it, retries and hedges included"),
            false,
            None,
            r(ServiceValue::Arrivals),
        );
        add(
            format!("{name}.amplification_ratio"),
            Real,
            format!("{name}: attempts reaching it ÷ entry requests"),
            false,
            None,
            r(ServiceValue::Amplification),
        );
        for refusal in Refusal::ALL {
            add(
                format!("{name}.refused_{}", refusal.name()),
                Count,
                format!("{name}: attempts refused ({})", refusal.name().replace('_', " ")),
                false,
                None,
                r(ServiceValue::Refused(refusal)),
            );
        }
        add(
            format!("{name}.wasted_work_ratio"),
            Real,
            format!("{name}: busy time on requests whose caller had given up ÷ busy time"),
            true,
            None,
            r(ServiceValue::WastedRatio),
        );
        add(
            format!("{name}.cancelled"),
            Count,
            format!("{name}: requests cancelled because their caller gave up"),
            false,
            None,
            r(ServiceValue::Cancelled),
        );
        add(
            format!("{name}.limit_final"),
            Real,
            format!("{name}: the concurrency limiters' limits at the end, summed over instances (0 without)"),
            false,
            None,
            r(ServiceValue::LimitFinal),
        );
    }
    for (i, edge) in t.edges.iter().enumerate() {
        let r = |v| Read::Edge(i, v);
        for (field, value, what) in [
            ("calls", EdgeValue::Calls, "calls made"),
            ("attempts", EdgeValue::Attempts, "attempts sent, retries and hedges included"),
            ("retries", EdgeValue::Retries, "retries sent"),
            ("hedges", EdgeValue::Hedges, "hedges sent"),
            ("hedge_wins", EdgeValue::HedgeWins, "calls answered first by a hedge"),
            ("timeouts", EdgeValue::Timeouts, "attempts timed out"),
            ("budget_denials", EdgeValue::BudgetDenials, "retries and hedges the retry budget refused"),
            ("breaker_refusals", EdgeValue::BreakerRefusals, "attempts the breaker refused"),
            ("breaker_trips", EdgeValue::BreakerTrips, "times the breaker opened"),
            ("failed", EdgeValue::Failed, "calls that failed (fallbacks excluded)"),
            ("fallbacks", EdgeValue::Fallbacks, "calls answered by the fallback"),
        ] {
            add(format!("edge.{edge}.{field}"), Count, format!("{edge}: {what}"), false, None, r(value));
        }
    }
    add(
        "recovered_ratio".into(),
        Real,
        "1 if the graph's queues returned to their band after the last fault, else 0".into(),
        true,
        Some(Direction::Higher),
        Read::RecoveredRatio,
    );
    add(
        "recovery_s".into(),
        Real,
        "seconds from the last fault's end to recovery; NaN (excluded from the mean) when not recovered".into(),
        false,
        Some(Direction::Lower),
        Read::RecoveryS,
    );
    add("events".into(), Count, "events handled, warm-up included".into(), false, None, Read::Events);
    rows
}
