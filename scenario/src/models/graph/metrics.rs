//! The graph's metric table, built once per grid point when the scenario is typed:
//! each metric's declaration (named from the graph) with where its value comes from,
//! so a replica only reads its numbers — no names formatted or interned per replica.

use stampede_engine::models::graph::{
    CacheResults, Cause, EdgeResults, EntryResults, Failure, GraphResults, Refusal, ServiceResults,
};

use super::topology::Topology;
use crate::models::metrics::{intern, Direction, MetricDef, MetricKind};

/// Every metric in column order, declared and read from the same row.
#[derive(Clone, Debug)]
pub struct MetricTable {
    pub defs: Vec<MetricDef>,
    reads: Vec<Read>,
    /// The mechanism groups written (see [`mechanisms`]).
    groups: Vec<&'static str>,
}

/// Derived from the topology, which is compared in its own right.
impl PartialEq for MetricTable {
    fn eq(&self, other: &Self) -> bool {
        self.defs.iter().map(|d| d.name).eq(other.defs.iter().map(|d| d.name))
    }
}

impl MetricTable {
    /// The table of `t`, with the columns of every mechanism group in `groups` (see
    /// [`mechanisms`]) as well as its own.
    pub fn new(t: &Topology, groups: &[&'static str]) -> Self {
        let mut all = mechanisms(t);
        all.extend(groups.iter().filter(|g| !all.contains(g)).copied().collect::<Vec<_>>());
        let (defs, reads) = table(t, &all).into_iter().unzip();
        MetricTable { defs, reads, groups: all }
    }

    /// Whether `scope` (a service or an edge) writes `mechanism`'s columns
    /// (`has("api", "autoscale")`).
    pub fn has(&self, scope: &str, mechanism: &str) -> bool {
        has_group(&self.groups, scope, mechanism)
    }

    /// Each of `services` services' own metrics, in column order (its refusals by
    /// reason left out: the report counts them apart). One pass over the metrics for
    /// all of them: a 5,000-service graph has 232,000 (a pass per service took seconds).
    pub fn service_metrics(&self, services: usize) -> Vec<Vec<&'static str>> {
        self.grouped(services, |read| match read {
            Read::Service(i, v) if !matches!(v, ServiceValue::Refused(_)) => Some(i),
            _ => None,
        })
        .map(|_, def, _| def.name)
    }

    /// Each of `services` services' refusals by reason: (metric, reason), in column order.
    pub fn refusal_metrics(&self, services: usize) -> Vec<Vec<(&'static str, Refusal)>> {
        self.grouped(services, |read| match read {
            Read::Service(i, ServiceValue::Refused(_)) => Some(i),
            _ => None,
        })
        .map(|_, def, read| match read {
            Read::Service(_, ServiceValue::Refused(reason)) => (def.name, reason),
            _ => unreachable!("grouped by refusal"),
        })
    }

    /// Each of `entries` entry points' root causes: (metric, failure name or
    /// `degraded`, service), in column order.
    pub fn cause_metrics(&self, entries: usize) -> Vec<Vec<(&'static str, &'static str, usize)>> {
        self.grouped(entries, |read| match read {
            Read::Entry(i, EntryValue::FailedBy(_) | EntryValue::DegradedBy(_)) => Some(i),
            _ => None,
        })
        .map(|_, def, read| match read {
            Read::Entry(_, EntryValue::FailedBy(cause)) => (def.name, cause.failure.name(), cause.service as usize),
            Read::Entry(_, EntryValue::DegradedBy(service)) => (def.name, "degraded", service as usize),
            _ => unreachable!("grouped by cause"),
        })
    }

    /// Each of `entries` entry points' culprits: (metric, `caused` or `slow`, service),
    /// in column order — the failed or slow requests each service caused.
    pub fn culprit_metrics(&self, entries: usize) -> Vec<Vec<(&'static str, &'static str, usize)>> {
        self.grouped(entries, |read| match read {
            Read::Entry(i, EntryValue::CausedBy(_) | EntryValue::SlowCausedBy(_)) => Some(i),
            _ => None,
        })
        .map(|_, def, read| match read {
            Read::Entry(_, EntryValue::CausedBy(service)) => (def.name, "caused", service as usize),
            Read::Entry(_, EntryValue::SlowCausedBy(service)) => (def.name, "slow", service as usize),
            _ => unreachable!("grouped by culprit"),
        })
    }

    /// Each of `edges` edges' metrics, in column order.
    pub fn edge_metrics(&self, edges: usize) -> Vec<Vec<&'static str>> {
        self.grouped(edges, |read| match read {
            Read::Edge(i, _) => Some(i),
            _ => None,
        })
        .map(|_, def, _| def.name)
    }

    /// The metrics' indices by the entity `owner` says they belong to (of `count`).
    fn grouped(&self, count: usize, owner: impl Fn(Read) -> Option<usize>) -> Grouped<'_> {
        let mut groups = vec![Vec::new(); count];
        for (m, read) in self.reads.iter().enumerate() {
            if let Some(i) = owner(*read) {
                groups[i].push(m);
            }
        }
        Grouped { table: self, groups }
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
    /// A cache endpoint's.
    Cache(usize, CacheValue),
    RecoveredRatio,
    RecoveryS,
    Events,
}

/// Metric indices per entity, from [`MetricTable::grouped`].
struct Grouped<'t> {
    table: &'t MetricTable,
    groups: Vec<Vec<usize>>,
}

impl Grouped<'_> {
    /// Each group's metrics as `f(entity, def, read)` gives them.
    fn map<T>(self, f: impl Fn(usize, &MetricDef, Read) -> T) -> Vec<Vec<T>> {
        let table = self.table;
        let groups = self.groups.into_iter().enumerate();
        groups.map(|(i, group)| group.into_iter().map(|m| f(i, &table.defs[m], table.reads[m])).collect()).collect()
    }
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
    /// Failed requests by the service that caused them.
    CausedBy(u32),
    /// Answered requests above the SLO (or the running p99).
    Slow,
    /// Slow requests by the service that caused most of their time.
    SlowCausedBy(u32),
    Mean,
    /// Of requests answered in full.
    Quantile(f64),
    /// Of every request that ended (answered, degraded or failed).
    QuantileAll(f64),
}

#[derive(Clone, Copy, Debug)]
enum ServiceValue {
    Utilisation,
    CpuUtilisation,
    QueueMean,
    InFlightMean,
    Arrivals,
    Amplification,
    Refused(Refusal),
    WastedRatio,
    Cancelled,
    LimitFinal,
    HealthChecks,
    HealthCheckFailures,
    UnhealthyMarks,
    UnhealthyS,
    InstancesMean,
    ScaleUps,
    ScaleDowns,
}

#[derive(Clone, Copy, Debug)]
enum CacheValue {
    HitRatio,
    Lookups,
    Hits,
    Coalesced,
    StaleServed,
    Fills,
    Evictions,
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
    Ejections,
    EjectedS,
    PoolWaitMean,
    PoolWaitedRatio,
    PoolFull,
    PoolTimeouts,
    PoolInUseMean,
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
            EntryValue::CausedBy(service) => e.caused_by(service) as f64,
            EntryValue::Slow => e.slow as f64,
            EntryValue::SlowCausedBy(service) => e.slow_caused_by(service) as f64,
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
            Read::Service(s, value) => value.of(&r.services[s], r),
            Read::Cache(e, value) => value.of(r.caches.get(e).copied().unwrap_or_default()),
            Read::Edge(e, value) => value.of(&r.edges[e]),
            Read::RecoveredRatio => f64::from(u8::from(r.recovered)),
            Read::RecoveryS => r.recovery_s,
            Read::Events => r.events as f64,
        }
    }
}

impl ServiceValue {
    /// This figure of `service`, one of `r`'s (amplification divides by all entry requests).
    fn of(self, service: &ServiceResults, r: &GraphResults) -> f64 {
        match self {
            ServiceValue::Utilisation => service.utilisation,
            ServiceValue::CpuUtilisation => service.cpu_utilisation,
            ServiceValue::QueueMean => service.queue_mean,
            ServiceValue::InFlightMean => service.present_mean,
            ServiceValue::Arrivals => service.arrivals as f64,
            ServiceValue::Amplification => ratio(service.arrivals, r.entries.iter().map(|e| e.offered).sum()),
            ServiceValue::Refused(refusal) => service.refused_by(refusal) as f64,
            ServiceValue::WastedRatio if service.busy_s > 0.0 => service.wasted_s / service.busy_s,
            ServiceValue::WastedRatio => 0.0,
            ServiceValue::Cancelled => service.cancelled as f64,
            ServiceValue::LimitFinal => service.limit_final,
            ServiceValue::HealthChecks => service.health_checks as f64,
            ServiceValue::HealthCheckFailures => service.health_check_failures as f64,
            ServiceValue::UnhealthyMarks => service.unhealthy_marks as f64,
            ServiceValue::UnhealthyS => service.unhealthy_s,
            ServiceValue::InstancesMean => service.instances_mean,
            ServiceValue::ScaleUps => service.scale_ups as f64,
            ServiceValue::ScaleDowns => service.scale_downs as f64,
        }
    }
}

impl CacheValue {
    fn of(self, cache: CacheResults) -> f64 {
        match self {
            CacheValue::HitRatio => ratio(cache.hits, cache.lookups),
            CacheValue::Lookups => cache.lookups as f64,
            CacheValue::Hits => cache.hits as f64,
            CacheValue::Coalesced => cache.coalesced as f64,
            CacheValue::StaleServed => cache.stale_served as f64,
            CacheValue::Fills => cache.fills as f64,
            CacheValue::Evictions => cache.evictions as f64,
        }
    }
}

impl EdgeValue {
    fn of(self, edge: &EdgeResults) -> f64 {
        match self {
            EdgeValue::EjectedS => edge.ejected_s,
            EdgeValue::PoolInUseMean => edge.pool_in_use_mean,
            EdgeValue::PoolWaitMean if edge.pool_acquired == 0 => f64::NAN,
            EdgeValue::PoolWaitMean => edge.pool_wait_s / edge.pool_acquired as f64,
            EdgeValue::PoolWaitedRatio => ratio(edge.pool_waited, edge.pool_acquired),
            EdgeValue::Calls => edge.calls as f64,
            EdgeValue::Attempts => edge.attempts as f64,
            EdgeValue::Retries => edge.retries as f64,
            EdgeValue::Hedges => edge.hedges as f64,
            EdgeValue::HedgeWins => edge.hedge_wins as f64,
            EdgeValue::Timeouts => edge.timeouts as f64,
            EdgeValue::BudgetDenials => edge.budget_denials as f64,
            EdgeValue::BreakerRefusals => edge.breaker_refusals as f64,
            EdgeValue::BreakerTrips => edge.breaker_trips as f64,
            EdgeValue::Failed => edge.failed as f64,
            EdgeValue::Fallbacks => edge.fallbacks as f64,
            EdgeValue::Ejections => edge.ejections as f64,
            EdgeValue::PoolFull => edge.pool_full as f64,
            EdgeValue::PoolTimeouts => edge.pool_timeouts as f64,
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

fn has_group(groups: &[&'static str], scope: &str, mechanism: &str) -> bool {
    groups.iter().any(|g| g.strip_suffix(mechanism).and_then(|g| g.strip_suffix('.')) == Some(scope))
}

/// The mechanism groups `t` turns on, each named by its scope and the mechanism
/// (`api->db.outlier`): their columns are written only where some grid point has them.
pub fn mechanisms(t: &Topology) -> Vec<&'static str> {
    let mut groups = Vec::new();
    for (s, service) in t.params.services.iter().enumerate() {
        if service.health_check.is_some() {
            groups.push(intern(format!("{}.health_check", t.services[s])));
        }
        if service.autoscale.is_some() {
            groups.push(intern(format!("{}.autoscale", t.services[s])));
        }
    }
    for (e, endpoint) in t.params.endpoints.iter().enumerate().take(t.endpoints.len()) {
        if endpoint.cache.is_some() {
            groups.push(intern(format!("{}.cache", t.endpoints[e])));
        }
    }
    for (e, edge) in t.params.edges.iter().enumerate() {
        if edge.outlier.is_some() {
            groups.push(intern(format!("{}.outlier", t.edges[e])));
        }
        if edge.pool.is_some() {
            groups.push(intern(format!("{}.pool", t.edges[e])));
        }
    }
    groups
}

/// Every metric of the graph with where its value comes from, in column order: per
/// entry point, per service, per edge (with its mechanisms' in `groups`), then the
/// whole graph's.
fn table(t: &Topology, groups: &[&'static str]) -> Vec<(MetricDef, Read)> {
    let mut rows = Vec::new();
    let mut add = |scope: &str, row: &Row<Read>| {
        let name = row.name.replace("{}", scope);
        rows.push((def(name, row.kind, row.about.replace("{}", scope), row.fraction, row.headline), row.value));
    };
    for (w, entry) in t.entries.iter().enumerate() {
        for row in entry_rows(&t.services, &t.reachable_services(w), &t.culprit_services(w)) {
            add(entry, &row.map(|v| Read::Entry(w, v)));
        }
    }
    for (e, endpoint) in t.endpoints.iter().enumerate() {
        if has_group(groups, endpoint, "cache") {
            for row in &CACHE_ROWS {
                add(endpoint, &row.map(|v| Read::Cache(e, v)));
            }
        }
    }
    for (i, site) in t.sites.iter().enumerate() {
        for row in site_rows() {
            add(site, &row.map(|v| Read::Site(i, v)));
        }
    }
    for (s, service) in t.services.iter().enumerate() {
        for row in service_rows() {
            add(service, &row.map(|v| Read::Service(s, v)));
        }
        let mechanisms: [(&str, &[Row<ServiceValue>]); 2] =
            [("health_check", &HEALTH_CHECK_ROWS), ("autoscale", &AUTOSCALE_ROWS)];
        for (mechanism, rows) in mechanisms {
            if has_group(groups, service, mechanism) {
                for row in rows {
                    add(service, &row.map(|v| Read::Service(s, v)));
                }
            }
        }
    }
    for (i, edge) in t.edges.iter().enumerate() {
        for row in &EDGE_ROWS {
            add(edge, &row.map(|v| Read::Edge(i, v)));
        }
        let mechanisms: [(&str, &[Row<EdgeValue>]); 2] = [("outlier", &OUTLIER_ROWS), ("pool", &POOL_ROWS)];
        for (mechanism, rows) in mechanisms {
            if has_group(groups, edge, mechanism) {
                for row in rows {
                    add(edge, &row.map(|v| Read::Edge(i, v)));
                }
            }
        }
    }
    for row in &GRAPH_ROWS {
        add("", row);
    }
    rows
}

/// One metric of a scope (an entry point, a call site, a service, an edge): its name
/// and description with `{}` for the scope's name, and where its value comes from.
#[derive(Clone, Debug)]
struct Row<V> {
    name: &'static str,
    kind: MetricKind,
    about: &'static str,
    fraction: bool,
    headline: Option<Direction>,
    value: V,
}

impl<V: Copy> Row<V> {
    /// The same metric, its value read through `value` (which scope, which index).
    fn map<W>(&self, value: impl Fn(V) -> W) -> Row<W> {
        Row {
            name: self.name,
            kind: self.kind,
            about: self.about,
            fraction: self.fraction,
            headline: self.headline,
            value: value(self.value),
        }
    }
}

const fn count<V>(name: &'static str, about: &'static str, value: V) -> Row<V> {
    Row { name, kind: MetricKind::Count, about, fraction: false, headline: None, value }
}

const fn real<V>(name: &'static str, about: &'static str, value: V) -> Row<V> {
    Row { name, kind: MetricKind::Real, about, fraction: false, headline: None, value }
}

const fn fraction<V>(name: &'static str, about: &'static str, value: V) -> Row<V> {
    Row { name, kind: MetricKind::Real, about, fraction: true, headline: None, value }
}

const fn headline<V: Copy>(row: Row<V>, direction: Direction) -> Row<V> {
    let Row { name, kind, about, fraction, value, .. } = row;
    Row { name, kind, about, fraction, headline: Some(direction), value }
}

/// The quantiles a replica reports, as (q, label).
const QUANTILES: [(f64, &str); 3] = [(0.5, "p50"), (0.99, "p99"), (0.999, "p999")];

/// An entry point's metrics; `services` name the root causes, of which those in
/// `reachable` (indices, ascending) get columns, and of its culprits those in
/// `culprits` (see [`super::topology::Topology::culprit_services`]).
fn entry_rows(services: &[String], reachable: &[u32], culprits: &[u32]) -> Vec<Row<EntryValue>> {
    use EntryValue as V;
    let mut rows = vec![
        count("{}.offered", "requests sent to {} (after warm-up)", V::Offered),
        headline(real("{}.goodput_rps", "{}: requests answered in full per second", V::Goodput), Direction::Higher),
        headline(fraction("{}.success_ratio", "{}: answered in full ÷ offered", V::SuccessRatio), Direction::Higher),
        fraction("{}.degraded_ratio", "{}: answered with a fallback somewhere in the tree ÷ offered", V::DegradedRatio),
        headline(fraction("{}.failed_ratio", "{}: failed ÷ offered", V::FailedRatio), Direction::Lower),
    ];
    for failure in Failure::ALL {
        let why = match failure {
            Failure::Timeout => "timed out (the client's timeout or deadline)",
            Failure::Refused => "refused by the entry service",
            Failure::Error => "answered with an error (a failure below, or an error fault)",
            Failure::BreakerOpen => "refused by the client's own breaker",
        };
        let name = intern(format!("{{}}.failed_{}", failure.name()));
        rows.push(count(name, intern(format!("{{}}: requests that failed, {why}")), V::Failed(failure)));
    }
    for &s in reachable {
        let service = &services[s as usize];
        for failure in Failure::ALL {
            let how = failure.name().replace('_', " ");
            let name = intern(format!("{{}}.failed_by.{service}.{}", failure.name()));
            let about = intern(format!(
                "{{}}: failed requests whose root cause was {service} ({how}): the deepest failure that decided them"
            ));
            rows.push(count(name, about, V::FailedBy(Cause::at(s, failure))));
        }
        let about = intern(format!("{{}}: degraded requests whose fallback answered for a failure of {service}"));
        rows.push(count(intern(format!("{{}}.degraded_by.{service}")), about, V::DegradedBy(s)));
    }
    rows.push(count(
        "{}.slow",
        "{}: requests answered (in full or degraded) above the workload's slo_s, or above the entry's running p99 \
         without one",
        V::Slow,
    ));
    for &s in culprits {
        let service = &services[s as usize];
        let about = intern(format!(
            "{{}}: failed requests that {service} caused — where they failed, or what the failing resource was \
             waiting on (workers blocked on calls to it, recursively)"
        ));
        rows.push(count(intern(format!("{{}}.caused_by.{service}")), about, V::CausedBy(s)));
        let about = intern(format!("{{}}: slow requests most of whose time {service} caused"));
        rows.push(count(intern(format!("{{}}.slow_caused_by.{service}")), about, V::SlowCausedBy(s)));
    }
    rows.push(real("{}.mean_s", "{}: mean latency of requests answered in full", V::Mean));
    for (q, label) in QUANTILES {
        let about = intern(format!("{{}}: this replica's {label} latency of requests answered in full (within 0.1%)"));
        let row = real(intern(format!("{{}}.{label}_s")), about, V::Quantile(q));
        rows.push(if label == "p99" { headline(row, Direction::Lower) } else { row });
    }
    for (q, label) in QUANTILES {
        let about = intern(format!(
            "{{}}: this replica's {label} latency of every request that ended — answered, degraded or failed \
             (a failure counts the time until its client learned it; within 0.1%)"
        ));
        rows.push(real(intern(format!("{{}}.{label}_all_s")), about, V::QuantileAll(q)));
    }
    rows
}

/// A call site's metrics, as an entry point's seen by its caller.
fn site_rows() -> Vec<Row<EntryValue>> {
    use EntryValue as V;
    let mut rows = vec![
        count("{}.offered", "{}: calls this call site made (after warm-up), retries not counted", V::Offered),
        fraction("{}.success_ratio", "{}: answered in full ÷ calls made", V::SuccessRatio),
        fraction("{}.degraded_ratio", "{}: answered by a fallback (here or below) ÷ calls made", V::DegradedRatio),
        fraction("{}.failed_ratio", "{}: failed ÷ calls made", V::FailedRatio),
        real("{}.mean_s", "{}: mean latency of the calls answered in full", V::Mean),
    ];
    for failure in Failure::ALL {
        let how = failure.name().replace('_', " ");
        let about = intern(format!("{{}}: calls that failed ({how}), as its caller saw them"));
        rows.push(count(intern(format!("{{}}.failed_{}", failure.name())), about, V::Failed(failure)));
    }
    for (q, label) in QUANTILES {
        let about = intern(format!("{{}}: this replica's {label} latency of the calls answered in full (within 0.1%)"));
        rows.push(real(intern(format!("{{}}.{label}_s")), about, V::Quantile(q)));
    }
    rows.push(real(
        "{}.p99_all_s",
        "{}: this replica's p99 latency of every call that ended — answered, degraded or failed, as its caller \
         saw it (within 0.1%)",
        V::QuantileAll(0.99),
    ));
    rows
}

/// A service's metrics.
fn service_rows() -> Vec<Row<ServiceValue>> {
    use ServiceValue as V;
    let mut rows = vec![
        fraction(
            "{}.utilisation",
            "{}: busy workers ÷ workers, time-averaged — those blocked on a call included (occupancy: threads held)",
            V::Utilisation,
        ),
        fraction(
            "{}.cpu_utilisation",
            "{}: workers doing work ÷ workers, time-averaged — not those blocked on a call (what a CPU-based \
             autoscaler reads)",
            V::CpuUtilisation,
        ),
        real(
            "{}.queue_depth_mean",
            "{}: requests waiting for a worker, time-averaged over its instances",
            V::QueueMean,
        ),
        real(
            "{}.in_flight_mean",
            "{}: requests present (waiting, working, or waiting on calls), time-averaged",
            V::InFlightMean,
        ),
        count("{}.arrivals", "{}: attempts that reached it, retries and hedges included", V::Arrivals),
        real("{}.amplification_ratio", "{}: attempts reaching it ÷ entry requests", V::Amplification),
    ];
    for refusal in Refusal::ALL {
        let about = intern(format!("{{}}: attempts refused ({})", refusal.name().replace('_', " ")));
        rows.push(count(intern(format!("{{}}.refused_{}", refusal.name())), about, V::Refused(refusal)));
    }
    rows.extend([
        fraction(
            "{}.wasted_work_ratio",
            "{}: busy time on requests whose caller had given up ÷ busy time",
            V::WastedRatio,
        ),
        count("{}.cancelled", "{}: requests cancelled because their caller gave up", V::Cancelled),
        real(
            "{}.limit_final",
            "{}: the concurrency limiters' limits at the end, summed over instances (0 without)",
            V::LimitFinal,
        ),
    ]);
    rows
}

/// An edge's metrics: counts of what its client did. Every edge has every column
/// (0 where the policy is off), so a grid may turn a policy on at some points.
const EDGE_ROWS: [Row<EdgeValue>; 11] = [
    count("{}.calls", "{}: calls made", EdgeValue::Calls),
    count("{}.attempts", "{}: attempts sent, retries and hedges included", EdgeValue::Attempts),
    count("{}.retries", "{}: retries sent", EdgeValue::Retries),
    count("{}.hedges", "{}: hedges sent", EdgeValue::Hedges),
    count("{}.hedge_wins", "{}: calls answered first by a hedge", EdgeValue::HedgeWins),
    count("{}.timeouts", "{}: attempts timed out", EdgeValue::Timeouts),
    count("{}.budget_denials", "{}: retries and hedges the retry budget refused", EdgeValue::BudgetDenials),
    count("{}.breaker_refusals", "{}: attempts the breaker refused", EdgeValue::BreakerRefusals),
    count("{}.breaker_trips", "{}: times the breaker opened", EdgeValue::BreakerTrips),
    count("{}.failed", "{}: calls that failed (fallbacks excluded)", EdgeValue::Failed),
    count("{}.fallbacks", "{}: calls answered by the fallback", EdgeValue::Fallbacks),
];

/// An edge's outlier detection (where some grid point detects on it).
const OUTLIER_ROWS: [Row<EdgeValue>; 2] = [
    count("{}.ejections", "{}: callee instances ejected by outlier detection", EdgeValue::Ejections),
    real("{}.ejected_s", "{}: instance-seconds the callee's instances spent ejected", EdgeValue::EjectedS),
];

/// A service's health checks (where some grid point checks it).
const HEALTH_CHECK_ROWS: [Row<ServiceValue>; 4] = [
    count(
        "{}.health_checks",
        "{}: health-check probes sent (each waits and works like a request)",
        ServiceValue::HealthChecks,
    ),
    count(
        "{}.health_check_failures",
        "{}: probes that failed (refused, errored, or unanswered within the timeout)",
        ServiceValue::HealthCheckFailures,
    ),
    count("{}.unhealthy_marks", "{}: times an instance was marked unhealthy", ServiceValue::UnhealthyMarks),
    real(
        "{}.unhealthy_s",
        "{}: instance-seconds marked unhealthy (skipped by the balancers unless in panic mode)",
        ServiceValue::UnhealthyS,
    ),
];

/// A cache endpoint's (where some grid point caches it).
const CACHE_ROWS: [Row<CacheValue>; 7] = [
    fraction("{}.cache_hit_ratio", "{}: lookups that found a fresh entry ÷ lookups", CacheValue::HitRatio),
    count("{}.cache_lookups", "{}: cache lookups (requests that did the endpoint's work)", CacheValue::Lookups),
    count("{}.cache_hits", "{}: lookups that found a fresh entry", CacheValue::Hits),
    count(
        "{}.cache_coalesced",
        "{}: misses that waited for another request's fetch of the same key (single flight)",
        CacheValue::Coalesced,
    ),
    count(
        "{}.cache_stale_served",
        "{}: failed fetches answered with the expired entry (serve stale)",
        CacheValue::StaleServed,
    ),
    count("{}.cache_fills", "{}: entries stored after a fetch from the origin", CacheValue::Fills),
    count("{}.cache_evictions", "{}: entries evicted to make room, over the whole run", CacheValue::Evictions),
];

/// A service's autoscaling (where some grid point scales it).
const AUTOSCALE_ROWS: [Row<ServiceValue>; 3] = [
    real(
        "{}.instances_mean",
        "{}: instances serving, time-averaged (provisioning and draining ones not counted)",
        ServiceValue::InstancesMean,
    ),
    count("{}.scale_ups", "{}: autoscaler decisions that added instances", ServiceValue::ScaleUps),
    count("{}.scale_downs", "{}: autoscaler decisions that removed instances", ServiceValue::ScaleDowns),
];

/// An edge's connection pools (where some grid point has one).
const POOL_ROWS: [Row<EdgeValue>; 5] = [
    real(
        "{}.pool_in_use_mean",
        "{}: pool connections in use, time-averaged, summed over the caller instances' pools",
        EdgeValue::PoolInUseMean,
    ),
    real(
        "{}.pool_wait_mean_s",
        "{}: mean wait for a pool connection of the attempts sent (those sent at once count 0)",
        EdgeValue::PoolWaitMean,
    ),
    fraction(
        "{}.pool_waited_ratio",
        "{}: attempts sent that waited for a pool connection ÷ attempts sent",
        EdgeValue::PoolWaitedRatio,
    ),
    count("{}.pool_full", "{}: attempts refused at once, the pool's queue full", EdgeValue::PoolFull),
    count("{}.pool_timeouts", "{}: attempts that gave up waiting for a pool connection", EdgeValue::PoolTimeouts),
];

/// The whole graph's metrics.
const GRAPH_ROWS: [Row<Read>; 3] = [
    headline(
        fraction(
            "recovered_ratio",
            "1 if the graph's queues returned to their band after the last fault, else 0",
            Read::RecoveredRatio,
        ),
        Direction::Higher,
    ),
    headline(
        real(
            "recovery_s",
            "seconds from the last fault's end to recovery; NaN (excluded from the mean) when not recovered",
            Read::RecoveryS,
        ),
        Direction::Lower,
    ),
    count("events", "events handled, warm-up included", Read::Events),
];
