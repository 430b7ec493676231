//! `stampede run --trace R --trace-format otlp`: the traced replica as OpenTelemetry
//! spans in OTLP's JSON encoding, so a simulated run opens in Jaeger or Grafana Tempo
//! beside real traces.
//!
//! The file (`trace.otlp.json`) is JSON Lines: each line one `ExportTraceServiceRequest`
//! (`{"resourceSpans": [...]}`) holding 256 whole traces of one grid point — what the
//! OpenTelemetry Collector's `otlpjsonfile` receiver reads, and each line a body
//! `POST /v1/traces` takes. A resource is a service (`service.name`; the graph's
//! callee instances as `service.instance.id`), with `stampede.grid_point` and
//! `stampede.replica`.
//!
//! The mapping, for the graph (whose rows are span trees): an entry request is a trace
//! (its id from the grid point, replica and call); a call row is an INTERNAL span of
//! the caller's service (`client` for the workload) named `call SERVICE.ENDPOINT`; an
//! attempt a CLIENT span of the caller named `SERVICE.ENDPOINT`; a serve row (the
//! callee's handling) a SERVER span of the callee named by the endpoint, whose parent
//! is its attempt — and the calls its job makes are its children, as instrumentation
//! records them; waits and refusals are INTERNAL spans. Other models' rows are not
//! trees: each call is a trace (a gateway turn, with its calls), its attempts, waits
//! and refusals its children, on one resource named by the model. Attributes:
//! `stampede.kind`, `stampede.outcome`, `stampede.attempt`, `stampede.hedge`,
//! `stampede.reason` (a failure's or refusal's), `stampede.cause`, `stampede.cause_service`, `stampede.counted`,
//! `http.request.resend_count`; a failure's status is ERROR with the outcome as its
//! message. Times are simulated nanoseconds after a fixed epoch, [`EPOCH_UNIX_NANOS`]
//! (2026-01-01T00:00:00Z), so two exports of one run are byte-identical. Breaker state
//! changes and incidents are not spans (they stay in `trace.parquet`).

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;

use serde_json::{json, Value};
use stampede_engine::kernel::Named;
use stampede_engine::measurement::trace::{Trace, TraceKind, TraceRow, NONE};

use stampede_scenario::base::error::{Error, Result};
use stampede_scenario::resolved::Scenario;

/// The file's name in the output folder.
pub const FILE: &str = "trace.otlp.json";

/// Simulated time 0 as Unix nanoseconds: 2026-01-01T00:00:00Z.
pub const EPOCH_UNIX_NANOS: u64 = 1_767_225_600 * 1_000_000_000;

/// OTLP's span kinds.
const INTERNAL: u8 = 1;
const SERVER: u8 = 2;
const CLIENT: u8 = 3;

/// Outcomes that are not failures (a span's status stays unset).
const FINE: [&str; 10] =
    ["success", "served", "200", "degraded", "fallback", "let_go", "cancelled", "in_flight", "backoff", "queue"];

/// One span on its way out.
struct Out<'a> {
    row: &'a TraceRow,
    trace: u64,
    id: u64,
    parent: Option<u64>,
    kind: u8,
    name: String,
    /// (service, instance) of the resource it belongs to.
    resource: (&'a str, Option<u32>),
}

/// Writes `trace.otlp.json` into `dir` (a staging folder): replica `replica` of every
/// grid point, one point at a time.
pub fn write(dir: &Path, scenario: &Scenario, replica: u32) -> Result<()> {
    let io = |e: std::io::Error| Error::io(format!("cannot write {FILE}: {e}"));
    let file = std::fs::File::create(dir.join(FILE)).map_err(io)?;
    let mut out = std::io::BufWriter::new(file);
    for point in 0..scenario.point_count() {
        let grid_point = scenario.grid_point(point)?;
        let traced = grid_point.model.trace_replica(&grid_point.run, scenario.run.seed, u64::from(replica));
        let trace = traced.expect("checked: the model traces").trace;
        let model = grid_point.model.name();
        write_point(&mut out, &trace, model, point, replica).map_err(io)?;
    }
    out.flush().map_err(io)?;
    Ok(())
}

/// Traces per line: a line holds whole traces, so a reader can assemble each trace
/// from a few lines and forget it.
const TRACES_PER_LINE: usize = 256;

/// One grid point's spans: lines of [`TRACES_PER_LINE`] traces each, their spans
/// grouped by resource.
pub fn write_point(out: &mut impl Write, trace: &Trace, model: &str, point: u32, replica: u32) -> std::io::Result<()> {
    let spans = if trace.rows.iter().any(|r| r.span != NONE) { trees(trace) } else { by_call(trace, model) };
    let mut traces: BTreeMap<u64, Vec<&Out>> = BTreeMap::new();
    for span in &spans {
        traces.entry(span.trace).or_default().push(span);
    }
    let traces: Vec<Vec<&Out>> = traces.into_values().collect();
    let scope = json!({ "name": "stampede", "version": env!("CARGO_PKG_VERSION") });
    for chunk in traces.chunks(TRACES_PER_LINE) {
        let mut resources: BTreeMap<(&str, Option<u32>), Vec<&Out>> = BTreeMap::new();
        for span in chunk.iter().flatten() {
            resources.entry(span.resource).or_default().push(span);
        }
        let resource_spans: Vec<Value> = resources
            .into_iter()
            .map(|((service, instance), spans)| {
                let mut attributes = vec![
                    attribute("service.name", json!({ "stringValue": service })),
                    attribute("stampede.grid_point", json!({ "intValue": point.to_string() })),
                    attribute("stampede.replica", json!({ "intValue": replica.to_string() })),
                ];
                if let Some(instance) = instance {
                    let id = format!("{service}-{instance}");
                    attributes.push(attribute("service.instance.id", json!({ "stringValue": id })));
                }
                let spans: Vec<Value> = spans.iter().map(|s| span_json(s, point, replica)).collect();
                json!({ "resource": { "attributes": attributes }, "scopeSpans": [{ "scope": scope, "spans": spans }] })
            })
            .collect();
        serde_json::to_writer(&mut *out, &json!({ "resourceSpans": resource_spans }))?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

fn attribute(key: &str, value: Value) -> Value {
    json!({ "key": key, "value": value })
}

fn span_json(span: &Out, point: u32, replica: u32) -> Value {
    let row = span.row;
    let trace_id = format!("{:08x}{:08x}{:016x}", point, replica, span.trace);
    let mut attributes = vec![
        attribute("stampede.kind", json!({ "stringValue": row.kind.name() })),
        attribute("stampede.outcome", json!({ "stringValue": row.outcome })),
        attribute("stampede.counted", json!({ "boolValue": row.counted })),
    ];
    if row.kind == TraceKind::Attempt {
        attributes.push(attribute("stampede.attempt", json!({ "intValue": row.attempt.to_string() })));
        let resends = row.attempt.saturating_sub(1).to_string();
        attributes.push(attribute("http.request.resend_count", json!({ "intValue": resends })));
        attributes.push(attribute("stampede.hedge", json!({ "boolValue": row.gate == "hedge" })));
    }
    let failed = !FINE.contains(&row.outcome);
    if failed || row.kind == TraceKind::Refusal {
        attributes.push(attribute("stampede.reason", json!({ "stringValue": row.outcome })));
    }
    if !row.cause.is_empty() {
        attributes.push(attribute("stampede.cause", json!({ "stringValue": row.cause })));
    }
    if !row.cause_service.is_empty() {
        attributes.push(attribute("stampede.cause_service", json!({ "stringValue": row.cause_service })));
    }
    let start = EPOCH_UNIX_NANOS + row.start;
    let end = EPOCH_UNIX_NANOS + row.end.max(row.start);
    let mut value = json!({
        "traceId": trace_id,
        "spanId": format!("{:016x}", span.id),
        "name": span.name,
        "kind": span.kind,
        "startTimeUnixNano": start.to_string(),
        "endTimeUnixNano": end.to_string(),
        "attributes": attributes,
        "status": if failed { json!({ "code": 2, "message": row.outcome }) } else { json!({}) },
    });
    if let Some(parent) = span.parent {
        value["parentSpanId"] = json!(format!("{parent:016x}"));
    }
    value
}

/// The service of a `SERVICE.ENDPOINT` class.
fn service_of(class: &str) -> &str {
    class.split_once('.').map_or(class, |(service, _)| service)
}

/// The endpoint of a `SERVICE.ENDPOINT` class.
fn endpoint_of(class: &str) -> &str {
    class.split_once('.').map_or(class, |(_, endpoint)| endpoint)
}

/// The graph's rows, whose spans form trees: ids are span numbers + 1.
fn trees(trace: &Trace) -> Vec<Out<'_>> {
    let rows = &trace.rows;
    let by_span: HashMap<u32, &TraceRow> = rows.iter().filter(|r| r.span != NONE).map(|r| (r.span, r)).collect();
    // An attempt's server side, which parents the calls its job makes.
    let serve_of: HashMap<u32, &TraceRow> =
        rows.iter().filter(|r| r.kind == TraceKind::Serve && r.parent != NONE).map(|r| (r.parent, r)).collect();
    let mut roots: HashMap<u32, u32> = HashMap::new();
    let mut root_of = |mut span: u32| -> u32 {
        let mut path = Vec::new();
        let root = loop {
            if let Some(&root) = roots.get(&span) {
                break root;
            }
            path.push(span);
            match by_span.get(&span) {
                Some(row) if row.parent != NONE && by_span.contains_key(&row.parent) => span = row.parent,
                _ => break span,
            }
        };
        for step in path {
            roots.insert(step, root);
        }
        root
    };
    // The service (and instance) that made a caller-side row: the server side of the
    // attempt whose job made the call, or the workload's client.
    let caller = |call: &TraceRow| -> (&str, Option<u32>) {
        match serve_of.get(&call.parent) {
            Some(serve) => (serve.gate, Some(serve.place)),
            None if call.parent == NONE => ("client", None),
            None => (by_span.get(&call.parent).map_or("client", |a| service_of(a.class)), None),
        }
    };
    let mut spans = Vec::with_capacity(rows.len());
    for row in rows.iter().filter(|r| r.span != NONE) {
        let (kind, name, resource, parent) = match row.kind {
            TraceKind::Call => {
                let parent = serve_of.get(&row.parent).map_or(row.parent, |serve| serve.span);
                (INTERNAL, format!("call {}", row.class), caller(row), parent)
            }
            TraceKind::Attempt => {
                let call = by_span.get(&row.parent).copied().unwrap_or(row);
                (CLIENT, row.class.to_string(), caller(call), row.parent)
            }
            TraceKind::Serve => (SERVER, endpoint_of(row.class).to_string(), (row.gate, Some(row.place)), row.parent),
            TraceKind::Wait if row.outcome == "backoff" => {
                let call = by_span.get(&row.parent).copied().unwrap_or(row);
                (INTERNAL, "backoff".to_string(), caller(call), row.parent)
            }
            TraceKind::Wait | TraceKind::Refusal => {
                let parent = serve_of.get(&row.parent).map_or(row.parent, |serve| serve.span);
                (INTERNAL, format!("{} {}", row.kind.name(), row.outcome), (row.gate, None), parent)
            }
            TraceKind::State | TraceKind::Incident => continue,
        };
        let trace = u64::from(root_of(row.span)) + 1;
        let parent = (parent != NONE).then_some(u64::from(parent) + 1);
        spans.push(Out { row, trace, id: u64::from(row.span) + 1, parent, kind, name, resource });
    }
    spans
}

/// Other models' rows: a call is a trace (a gateway turn, with its calls) and its
/// attempts, waits and refusals are its children.
fn by_call<'a>(trace: &'a Trace, model: &'a str) -> Vec<Out<'a>> {
    let rows = &trace.rows;
    let mut call_ids: HashMap<u32, u64> = HashMap::new();
    let mut next = 1u64;
    for row in rows.iter().filter(|r| r.kind == TraceKind::Call) {
        call_ids.insert(row.call, next);
        next += 1;
    }
    let mut spans = Vec::with_capacity(rows.len());
    for row in rows {
        let (kind, name) = match row.kind {
            TraceKind::Call => (INTERNAL, format!("call {}", row.class)),
            TraceKind::Attempt => (CLIENT, row.class.to_string()),
            TraceKind::Wait | TraceKind::Refusal | TraceKind::Serve => {
                (INTERNAL, format!("{} {}", row.kind.name(), row.outcome))
            }
            TraceKind::State | TraceKind::Incident => continue,
        };
        let Some(&call) = call_ids.get(&row.call) else { continue };
        let (id, parent) = if row.kind == TraceKind::Call {
            (call, None)
        } else {
            next += 1;
            (next - 1, Some(call))
        };
        // A gateway turn is one trace; elsewhere a call is.
        let trace = if row.group != NONE { u64::from(row.group) + (1 << 40) } else { call };
        spans.push(Out { row, trace, id, parent, kind, name, resource: (model, None) });
    }
    spans
}
