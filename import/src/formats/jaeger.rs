//! Jaeger's JSON in each layout it is found in: `{"data": [trace, …]}` (the query
//! API's answer and the UI's download), a bare array of traces, one trace object (the
//! UI's "Download JSON" of one trace), or an array of spans that carry their `process`
//! inline. A trace holds `spans` and the `processes` they name (the service, and an
//! instance from `service.instance.id`, `hostname` or `ip`); times in microseconds; the parent is the first `CHILD_OF` (or
//! `FOLLOWS_FROM`) reference; the kind is the `span.kind` tag; a failure is the
//! `error` tag or `otel.status_code = ERROR`.

use std::borrow::Cow;
use std::collections::HashMap;

use serde::Deserialize;

use super::{attempt_from, best_peer, hex_u128, hex_u64, Reader};
use crate::span::{Kind, Span, NO_NAME};

#[derive(Deserialize)]
struct Wrapped<'a> {
    #[serde(borrow)]
    data: Vec<Trace<'a>>,
}

#[derive(Deserialize)]
struct Trace<'a> {
    #[serde(borrow)]
    spans: Vec<JaegerSpan<'a>>,
    #[serde(borrow, default)]
    processes: HashMap<Cow<'a, str>, Process<'a>>,
}

#[derive(Deserialize)]
struct Process<'a> {
    #[serde(borrow, rename = "serviceName", default)]
    service: Cow<'a, str>,
    #[serde(borrow, default)]
    tags: Vec<Tag<'a>>,
}

#[derive(Deserialize)]
struct JaegerSpan<'a> {
    #[serde(borrow, rename = "traceID", default)]
    trace_id: Cow<'a, str>,
    #[serde(borrow, rename = "spanID", default)]
    span_id: Cow<'a, str>,
    #[serde(borrow, rename = "operationName", default)]
    name: Cow<'a, str>,
    #[serde(borrow, default)]
    references: Vec<Reference<'a>>,
    #[serde(rename = "startTime", default)]
    start_us: i64,
    #[serde(rename = "duration", default)]
    duration_us: i64,
    #[serde(borrow, default)]
    tags: Vec<Tag<'a>>,
    #[serde(borrow, rename = "processID", default)]
    process: Cow<'a, str>,
    /// The process written into the span (a list of spans; Jaeger's span model).
    #[serde(borrow, rename = "process", default)]
    inline_process: Option<Process<'a>>,
}

#[derive(Deserialize)]
struct Reference<'a> {
    #[serde(borrow, rename = "refType", default)]
    kind: Cow<'a, str>,
    #[serde(borrow, rename = "spanID", default)]
    span_id: Cow<'a, str>,
}

#[derive(Deserialize)]
struct Tag<'a> {
    #[serde(borrow)]
    key: Cow<'a, str>,
    #[serde(borrow, default)]
    value: Option<TagValue<'a>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum TagValue<'a> {
    Bool(bool),
    Integer(i64),
    Text(#[serde(borrow)] Cow<'a, str>),
    /// A float or anything else: not read.
    Other(serde::de::IgnoredAny),
}

fn tag<'a>(tags: &'a [Tag<'_>], key: &str) -> Option<&'a TagValue<'a>> {
    tags.iter().find(|t| t.key == key).and_then(|t| t.value.as_ref())
}

fn text<'a>(tags: &'a [Tag<'_>], key: &str) -> Option<&'a str> {
    match tag(tags, key)? {
        TagValue::Text(text) => Some(text),
        _ => None,
    }
}

fn integer(tags: &[Tag<'_>], key: &str) -> Option<i64> {
    match tag(tags, key)? {
        TagValue::Integer(n) => Some(*n),
        TagValue::Text(text) => text.parse().ok(),
        _ => None,
    }
}

/// The layouts of a Jaeger document, told apart by the first key that differs.
enum Layout {
    Wrapped,
    Traces,
    Spans,
    OneTrace,
}

/// The layout a document starts with: an object is the API's `{"data": …}` or one
/// trace; an array lists traces (a `"spans"` key before any `"spanID"`) or spans.
fn layout(text: &[u8]) -> Layout {
    let find = |key: &[u8]| memchr::memmem::find(text, key).unwrap_or(usize::MAX);
    let object = text.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    let (data, spans, span_id) = (find(b"\"data\""), find(b"\"spans\""), find(b"\"spanID\""));
    match (object, data < spans) {
        (true, true) => Layout::Wrapped,
        (true, false) => Layout::OneTrace,
        (false, _) if spans < span_id => Layout::Traces,
        (false, _) => Layout::Spans,
    }
}

/// Reads a Jaeger document into `reader`.
pub fn read_document(text_bytes: &[u8], reader: &mut Reader) -> Result<(), String> {
    let parse_error = |layout: &str, e: serde_json::Error| format!("read as {layout}: {e}");
    let traces: Vec<Trace> = match layout(text_bytes) {
        Layout::Wrapped => {
            serde_json::from_slice::<Wrapped>(text_bytes).map_err(|e| parse_error("{\"data\": [trace, …]}", e))?.data
        }
        Layout::Traces => serde_json::from_slice(text_bytes).map_err(|e| parse_error("a list of traces", e))?,
        Layout::OneTrace => vec![serde_json::from_slice(text_bytes)
            .map_err(|e| parse_error("one trace {\"traceID\", \"spans\", \"processes\"}", e))?],
        Layout::Spans => vec![Trace {
            spans: serde_json::from_slice(text_bytes).map_err(|e| parse_error("a list of spans", e))?,
            processes: HashMap::new(),
        }],
    };
    for trace in &traces {
        for span in &trace.spans {
            read_span(trace, span, reader);
        }
    }
    Ok(())
}

/// One Jaeger span of `trace` into `reader`, or counted among the skipped (no ids, a
/// time before 1970).
fn read_span(trace: &Trace, span: &JaegerSpan, reader: &mut Reader) {
    let (Some(trace_id), Some(id)) = (hex_u128(&span.trace_id), hex_u64(&span.span_id)) else {
        reader.skipped().no_id += 1;
        return;
    };
    // Jaeger's times are Unix microseconds: one before 1970 is not a time.
    if span.start_us < 0 || span.duration_us < 0 {
        reader.skipped().bad_time += 1;
        return;
    }
    let process = span.inline_process.as_ref().or_else(|| trace.processes.get(span.process.as_ref()));
    let service = process.map_or("unknown_service", |p| p.service.as_ref());
    let instance = process.and_then(|p| {
        text(&p.tags, "service.instance.id").or_else(|| text(&p.tags, "hostname")).or_else(|| text(&p.tags, "ip"))
    });
    let parent = span
        .references
        .iter()
        .find(|r| r.kind == "CHILD_OF")
        .or_else(|| span.references.first())
        .and_then(|r| hex_u64(&r.span_id));
    let kind = match text(&span.tags, "span.kind") {
        Some("server") => Kind::Server,
        Some("client") => Kind::Client,
        Some("producer") => Kind::Producer,
        Some("consumer") => Kind::Consumer,
        _ => Kind::Internal,
    };
    let error = match tag(&span.tags, "error") {
        Some(TagValue::Bool(b)) => *b,
        Some(TagValue::Text(t)) => t == "true",
        _ => false,
    } || text(&span.tags, "otel.status_code") == Some("ERROR");
    let attempt =
        attempt_from(integer(&span.tags, "stampede.attempt"), integer(&span.tags, "http.request.resend_count"));
    let peer = best_peer(span.tags.iter().filter_map(|t| match &t.value {
        Some(TagValue::Text(value)) => Some((t.key.as_ref(), value.as_ref())),
        _ => None,
    }));
    let peer = peer.map_or(NO_NAME, |p| reader.names.intern(p));
    let start = span.start_us.saturating_mul(1000);
    let span = Span {
        trace: trace_id,
        id,
        parent,
        service: reader.names.intern(service),
        instance: instance.map_or(NO_NAME, |i| reader.names.intern(i)),
        name: reader.names.intern(&span.name),
        peer,
        kind,
        start,
        end: start.saturating_add(span.duration_us.saturating_mul(1000)),
        error,
        attempt,
    };
    reader.push(span);
}
