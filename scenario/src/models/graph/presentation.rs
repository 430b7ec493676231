//! What the graph model's report draws: the faults' windows, the topology, the bars
//! per entry point and per service, the failures and slow answers by the service that
//! caused them, and a part per service (its figures, refusals and series). Every
//! metric and series named here is one the model's metric table defines.

use stampede_engine::models::graph::{Refusal, ServiceParams};

use super::super::presentation::{Presentation, Recovery, Section, Segment, TopologyEdge, TopologyService, Window};
use super::metrics::MetricTable;
use super::{build, metric_table, topology, GraphConfig, Topology};
use crate::scenario::RunConfig;

/// The report's sections for a graph: the topology and bars first, then where the
/// failures came from, then a part per service.
pub(super) fn presentation(config: &GraphConfig, run: &RunConfig) -> Presentation {
    let t = topology(config);
    let table = metric_table(config);
    let pairs = |suffix: &str, names: &[String]| -> Vec<(String, String)> {
        names.iter().map(|n| (n.clone(), format!("{n}.{suffix}"))).collect()
    };
    let mut sections = vec![
        topology_section(config, t),
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
    ];
    sections.extend(cause_sections(t, table));
    let (mut own, mut refused) = (table.service_metrics(t.services.len()), table.refusal_metrics(t.services.len()));
    let edge_metrics = table.edge_metrics(t.edges.len());
    for s in 0..t.services.len() {
        let owned = (std::mem::take(&mut own[s]), std::mem::take(&mut refused[s]));
        sections.push(service_part(t, table, s, owned, &edge_metrics));
    }
    Presentation {
        windows: fault_windows(config),
        recovery: Some(Recovery::of_queue_depth(run.warmup_s)),
        sections,
        hints: Vec::new(),
    }
}

/// Each fault's window, labelled with what it does and where.
fn fault_windows(config: &GraphConfig) -> Vec<Window> {
    let window = |f: &super::schema::FaultConfig| {
        let what = match (f.kind.as_str(), f.factor, f.added_s, f.rate) {
            ("slowdown", Some(x), ..) => format!("slowdown ×{x}"),
            ("latency", _, Some(s), _) => format!("latency +{s} s"),
            ("errors", .., Some(r)) => format!("errors {:.0}%", r * 100.0),
            (kind, ..) => kind.to_string(),
        };
        Window { label: format!("{what} on {}", f.target), start_s: f.start_s, end_s: f.start_s + f.duration_s }
    };
    config.faults.iter().map(window).collect()
}

/// Whether a fault targets `target` (a service, an edge, or one instance of a service).
fn faulted(config: &GraphConfig, target: &str) -> bool {
    config.faults.iter().any(|f| f.target == target || f.target.split('#').next() == Some(target))
}

/// The graph drawn: services coloured by utilisation, calls labelled with attempts.
fn topology_section(config: &GraphConfig, t: &Topology) -> Section {
    let services = t
        .services
        .iter()
        .zip(&t.params.services)
        .map(|(name, p)| TopologyService {
            name: name.clone(),
            detail: format!("{} × {} workers", instance_count(p), p.workers),
            colour_by: format!("{name}.utilisation"),
            faulted: faulted(config, name),
        })
        .collect();
    let edges = t
        .edges
        .iter()
        .zip(&t.params.edges)
        .map(|(name, p)| TopologyEdge {
            from: p.from.map(|s| t.services[s as usize].clone()),
            to: t.services[p.to as usize].clone(),
            call_site: build::call_site_label(name).unwrap_or_default(),
            attempts: format!("{name}.attempts"),
            calls: format!("{name}.calls"),
            failed: format!("{name}.failed"),
            faulted: faulted(config, name) || faulted(config, &build::link_of(name)),
        })
        .collect();
    Section::Topology {
        title: "The graph: services coloured by utilisation, calls labelled with attempts per entry request and the \
                share that failed"
            .into(),
        services,
        edges,
        entries: t.entries.iter().map(|e| format!("{e}.offered")).collect(),
    }
}

/// Each entry point's failed and degraded requests by root cause, its failures by the
/// service that caused them, and its slow answers by the service that made them slow.
fn cause_sections(t: &Topology, table: &MetricTable) -> [Section; 3] {
    let mut causes_of = table.cause_metrics(t.entries.len());
    let causes = t.entries.iter().enumerate().map(|(w, entry)| {
        let segments = std::mem::take(&mut causes_of[w])
            .into_iter()
            .map(|(metric, how, s)| Segment {
                metric: metric.to_string(),
                label: t.services[s].clone(),
                stage: how.replace('_', " "),
            })
            .collect();
        (entry.clone(), segments)
    });
    let root_causes = Section::Outcomes {
        title: "Where failures came from: each entry point's failed and degraded requests by root cause — the service \
                whose failure decided them (the deepest one), and how it failed"
            .into(),
        groups: causes.collect(),
    };
    let mut culprits_of = table.culprit_metrics(t.entries.len());
    let (mut failed, mut slow) = (Vec::new(), Vec::new());
    for (w, entry) in t.entries.iter().enumerate() {
        let (mut caused, mut slowed) = (Vec::new(), Vec::new());
        for (metric, how, s) in std::mem::take(&mut culprits_of[w]) {
            let segment = Segment { metric: metric.to_string(), label: t.services[s].clone(), stage: how.into() };
            if how == "caused" {
                caused.push(segment)
            } else {
                slowed.push(segment)
            }
        }
        failed.push((entry.clone(), caused));
        slow.push((entry.clone(), slowed));
    }
    [
        root_causes,
        Section::Outcomes {
            title: "What caused the failures: each entry point's failed requests by the service that caused them — \
                    where they failed, or what the failing resource was waiting on (workers blocked on calls to \
                    it), followed down"
                .into(),
            groups: failed,
        },
        Section::Outcomes {
            title: "What made answers slow: each entry point's slow requests (above its slo_s, or its running p99) \
                    by the service that caused most of their time"
                .into(),
            groups: slow,
        },
    ]
}

/// Service `s`'s part: its own figures, then the calls it receives and the calls it
/// makes (their client policies at work), the attempts it turned away and why, and
/// its series. `owned` is its metrics and refusals from the metric table.
fn service_part(
    t: &Topology,
    table: &MetricTable,
    s: usize,
    owned: (Vec<&'static str>, Vec<(&'static str, Refusal)>),
    edge_metrics: &[Vec<&'static str>],
) -> Section {
    let (own, refused) = owned;
    let name = &t.services[s];
    let endpoints: Vec<&str> = t
        .endpoints
        .iter()
        .filter_map(|e| e.strip_prefix(name.as_str()).and_then(|rest| rest.strip_prefix('.')))
        .collect();
    let into = t.params.edges.iter().enumerate().filter(|(_, e)| e.to as usize == s);
    let out_of = t.params.edges.iter().enumerate().filter(|(_, e)| e.from == Some(s as u32));
    let edges = into.chain(out_of).flat_map(|(e, _)| edge_metrics[e].iter().copied());
    let metrics = own.into_iter().chain(edges).map(String::from).collect();
    let refusals = refused
        .into_iter()
        .map(|(metric, reason)| Segment {
            metric: metric.to_string(),
            label: reason.name().replace('_', " "),
            stage: "refused".into(),
        })
        .collect();
    let series = service_series(t, table, s, &endpoints);
    Section::Part {
        name: name.clone(),
        detail: part_detail(&t.params.services[s], name, table, &endpoints, &series),
        metrics,
        refusals,
        series,
    }
}

/// Service `s`'s series: queue and busy workers, then those of the mechanisms it has
/// on (autoscaling, caches, health checks), the instances its callers eject, and the
/// pools of the calls it makes.
fn service_series(t: &Topology, table: &MetricTable, s: usize, endpoints: &[&str]) -> Vec<String> {
    let name = &t.services[s];
    let mut series = vec![format!("{name}.queue_depth"), format!("{name}.busy")];
    if table.has(name, "autoscale") {
        series.extend(["instances", "desired_instances", "scale_metric"].map(|s| format!("{name}.{s}")));
    }
    for endpoint in endpoints {
        let full = format!("{name}.{endpoint}");
        if table.has(&full, "cache") {
            series.extend(["cache_hits", "cache_misses"].map(|s| format!("{full}.{s}")));
        }
    }
    if table.has(name, "health_check") {
        series.push(format!("{name}.unhealthy"));
    }
    for (edge, edge_name) in t.params.edges.iter().zip(&t.edges) {
        if edge.to as usize == s && table.has(edge_name, "outlier") {
            series.push(format!("{edge_name}.ejected"));
        }
        if edge.from == Some(s as u32) && table.has(edge_name, "pool") {
            series.extend(["pool_in_use", "pool_waiting"].map(|s| format!("{edge_name}.{s}")));
        }
    }
    series
}

/// The sentence above a service's part: what it is, and what its series show.
fn part_detail(p: &ServiceParams, name: &str, table: &MetricTable, endpoints: &[&str], series: &[String]) -> String {
    let autoscaled = table.has(name, "autoscale");
    let cached = series.iter().any(|s| s.ends_with(".cache_hits"));
    let drawn = match (autoscaled, cached) {
        (true, true) => ", instances serving, and cache hits and misses",
        (true, false) => " and instances serving",
        (false, true) => ", and cache hits and misses",
        (false, false) => "",
    };
    let mechanisms =
        series.iter().any(|s| s.ends_with(".unhealthy") || s.ends_with(".ejected") || s.contains(".pool_"));
    format!(
        "The service {name}: {} instance{} × {} workers, endpoints {}. Its figures per grid point (the calls into it \
         and the calls it makes below its own), the attempts it turned away and why, and its queue and busy \
         workers{drawn} over time{}.",
        instance_count(p),
        if p.instances == 1 && p.autoscale.is_none() { "" } else { "s" },
        p.workers,
        endpoints.join(", "),
        if mechanisms {
            " (with the instances marked unhealthy or ejected and the connection pools' use, where those mechanisms \
             are on)"
        } else {
            ""
        }
    )
}

/// A service's instances as the report says them: its count, or its autoscaler's range.
fn instance_count(p: &ServiceParams) -> String {
    match &p.autoscale {
        None => p.instances.to_string(),
        Some(a) => format!("{}–{} (autoscaled, {} at the start)", a.config.min, a.config.max, a.initial),
    }
}
