//! The graph's metric table, built once per grid point when the scenario is typed:
//! each metric's declaration (named from the graph) with where its value comes from,
//! so a replica only reads its numbers — no names formatted or interned per replica.

use stampede_engine::models::graph::{Cause, EntryResults, Failure, GraphResults, Refusal};

use super::topology::Topology;
use crate::models::metrics::{intern, Direction, MetricDef, MetricKind};

/// Every metric in column order, declared and read from the same row.
#[derive(Clone, Debug)]
pub struct MetricTable {
    pub defs: Vec<MetricDef>,
    reads: Vec<Read>,
}

/// Derived from the topology, which is compared in its own right.
impl PartialEq for MetricTable {
    fn eq(&self, other: &Self) -> bool {
        self.defs.iter().map(|d| d.name).eq(other.defs.iter().map(|d| d.name))
    }
}

impl MetricTable {
    pub fn new(t: &Topology) -> Self {
        let (defs, reads) = table(t).into_iter().unzip();
        MetricTable { defs, reads }
    }

    /// Service `s`'s own metrics, in column order (its refusals by reason left out:
    /// the report counts them apart).
    pub fn service_metrics(&self, s: usize) -> Vec<&'static str> {
        self.names_where(|read| matches!(read, Read::Service(i, v) if i == s && !matches!(v, ServiceValue::Refused(_))))
    }

    /// Service `s`'s refusals by reason: (metric, reason), in column order.
    pub fn refusal_metrics(&self, s: usize) -> Vec<(&'static str, Refusal)> {
        self.defs
            .iter()
            .zip(&self.reads)
            .filter_map(|(def, read)| match *read {
                Read::Service(i, ServiceValue::Refused(reason)) if i == s => Some((def.name, reason)),
                _ => None,
            })
            .collect()
    }

    /// Entry point `w`'s root causes: (metric, failure name or `degraded`, service), in
    /// column order.
    pub fn cause_metrics(&self, w: usize) -> Vec<(&'static str, &'static str, usize)> {
        self.defs
            .iter()
            .zip(&self.reads)
            .filter_map(|(def, read)| match *read {
                Read::Entry(i, EntryValue::FailedBy(cause)) if i == w => {
                    Some((def.name, cause.failure.name(), cause.service as usize))
                }
                Read::Entry(i, EntryValue::DegradedBy(service)) if i == w => {
                    Some((def.name, "degraded", service as usize))
                }
                _ => None,
            })
            .collect()
    }

    /// Edge `e`'s metrics, in column order.
    pub fn edge_metrics(&self, e: usize) -> Vec<&'static str> {
        self.names_where(|read| matches!(read, Read::Edge(i, _) if i == e))
    }

    fn names_where(&self, keep: impl Fn(Read) -> bool) -> Vec<&'static str> {
        self.defs.iter().zip(&self.reads).filter(|(_, read)| keep(**read)).map(|(def, _)| def.name).collect()
    }

    /// The metrics of one replica's results, in column order.
    pub fn values(&self, results: &GraphResults) -> Vec<f64> {
        self.reads.iter().map(|read| read.value(results)).collect()
    }
}

/// Where a metric's value comes from.
#[derive(Clone, Copy, Debug)]
enum Read {
    Entry(usize, EntryValue),
    /// A call site's figures, as an entry's.
    Site(usize, EntryValue),
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
    /// Failed requests by root cause.
    FailedBy(Cause),
    /// Degraded requests by the service a fallback answered for.
    DegradedBy(u32),
    Mean,
    /// Of requests answered in full.
    Quantile(f64),
    /// Of every request that ended (answered, degraded or failed).
    QuantileAll(f64),
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

impl EntryValue {
    /// This figure of an entry point's (or a call site's) results.
    fn of(self, e: &EntryResults) -> f64 {
        match self {
            EntryValue::Offered => e.offered as f64,
            EntryValue::Goodput => e.goodput_rps,
            EntryValue::SuccessRatio => ratio(e.successes, e.offered),
            EntryValue::DegradedRatio => ratio(e.degraded, e.offered),
            EntryValue::FailedRatio => ratio(e.failed_total(), e.offered),
            EntryValue::Failed(failure) => e.failed_by(failure) as f64,
            EntryValue::FailedBy(cause) => e.failed_by_cause(cause) as f64,
            EntryValue::DegradedBy(service) => e.degraded_by_service(service) as f64,
            EntryValue::Mean => e.latency_mean_s(),
            EntryValue::Quantile(q) => e.latency.quantile(q) / 1e9,
            EntryValue::QuantileAll(q) => e.latency_all.quantile(q) / 1e9,
        }
    }
}

impl Read {
    fn value(self, r: &GraphResults) -> f64 {
        match self {
            Read::Entry(w, value) => value.of(&r.entries[w]),
            Read::Site(s, value) => value.of(&r.sites[s]),
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
        for (s, service) in t.services.iter().enumerate() {
            for failure in Failure::ALL {
                let how = failure.name().replace('_', " ");
                add(
                    format!("{e}.failed_by.{service}.{}", failure.name()),
                    Count,
                    format!(
                        "{e}: failed requests whose root cause was {service} ({how}): the deepest failure that \
                         decided them"
                    ),
                    false,
                    None,
                    r(EntryValue::FailedBy(Cause { service: s as u32, failure })),
                );
            }
            add(
                format!("{e}.degraded_by.{service}"),
                Count,
                format!("{e}: degraded requests whose fallback answered for a failure of {service}"),
                false,
                None,
                r(EntryValue::DegradedBy(s as u32)),
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
                format!("{e}: this replica's {label} latency of requests answered in full (within 0.1%)"),
                false,
                headline,
                r(EntryValue::Quantile(q)),
            );
        }
        for (q, label) in [(0.5, "p50"), (0.99, "p99"), (0.999, "p999")] {
            add(
                format!("{e}.{label}_all_s"),
                Real,
                format!(
                    "{e}: this replica's {label} latency of every request that ended — answered, degraded or failed \
                     (a failure counts the time until its client learned it; within 0.1%)"
                ),
                false,
                None,
                r(EntryValue::QuantileAll(q)),
            );
        }
    }
    for (i, site) in t.sites.iter().enumerate() {
        let r = |v| Read::Site(i, v);
        add(
            format!("{site}.offered"),
            Count,
            format!("{site}: calls this call site made (after warm-up), retries not counted"),
            false,
            None,
            r(EntryValue::Offered),
        );
        for (field, value, what, fraction) in [
            ("success_ratio", EntryValue::SuccessRatio, "answered in full ÷ calls made", true),
            ("degraded_ratio", EntryValue::DegradedRatio, "answered by a fallback (here or below) ÷ calls made", true),
            ("failed_ratio", EntryValue::FailedRatio, "failed ÷ calls made", true),
            ("mean_s", EntryValue::Mean, "mean latency of the calls answered in full", false),
        ] {
            add(format!("{site}.{field}"), Real, format!("{site}: {what}"), fraction, None, r(value));
        }
        for failure in Failure::ALL {
            add(
                format!("{site}.failed_{}", failure.name()),
                Count,
                format!("{site}: calls that failed ({}), as its caller saw them", failure.name().replace('_', " ")),
                false,
                None,
                r(EntryValue::Failed(failure)),
            );
        }
        for (q, label) in [(0.5, "p50"), (0.99, "p99"), (0.999, "p999")] {
            add(
                format!("{site}.{label}_s"),
                Real,
                format!("{site}: this replica's {label} latency of the calls answered in full (within 0.1%)"),
                false,
                None,
                r(EntryValue::Quantile(q)),
            );
        }
        add(
            format!("{site}.p99_all_s"),
            Real,
            format!(
                "{site}: this replica's p99 latency of every call that ended — answered, degraded or failed, as its \
                 caller saw it (within 0.1%)"
            ),
            false,
            None,
            r(EntryValue::QuantileAll(0.99)),
        );
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
            add(format!("{edge}.{field}"), Count, format!("{edge}: {what}"), false, None, r(value));
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
