//! Jaeger's JSON: `{"data": [trace, …]}` (the query API's answer and the UI's
//! download) or a bare array of traces. A trace holds `spans` and the `processes` they
//! name (the service, and an instance from `service.instance.id`, `hostname` or
//! `ip`); times in microseconds; the parent is the first `CHILD_OF` (or
//! `FOLLOWS_FROM`) reference; the kind is the `span.kind` tag; a failure is the
//! `error` tag or `otel.status_code = ERROR`.

use std::borrow::Cow;
use std::collections::HashMap;

use serde::Deserialize;

use super::{attempt_from, hex_u128, hex_u64, Reader};
use crate::span::{Kind, Span, NO_NAME};

#[derive(Deserialize)]
#[serde(untagged)]
enum Document<'a> {
    Wrapped {
        #[serde(borrow)]
        data: Vec<Trace<'a>>,
    },
    Bare(#[serde(borrow)] Vec<Trace<'a>>),
}

#[derive(Deserialize)]
struct Trace<'a> {
    #[serde(borrow, default)]
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

/// Reads a Jaeger document into `reader`.
pub fn read_document(text_bytes: &[u8], reader: &mut Reader) -> Result<(), String> {
    let document: Document = serde_json::from_slice(text_bytes).map_err(|e| e.to_string())?;
    let traces = match document {
        Document::Wrapped { data } | Document::Bare(data) => data,
    };
    for trace in &traces {
        for span in &trace.spans {
            let (Some(trace_id), Some(id)) = (hex_u128(&span.trace_id), hex_u64(&span.span_id)) else {
                reader.skipped().no_id += 1;
                continue;
            };
            // Jaeger's times are Unix microseconds: one before 1970 is not a time.
            if span.start_us < 0 || span.duration_us < 0 {
                reader.skipped().bad_time += 1;
                continue;
            }
            let process = trace.processes.get(span.process.as_ref());
            let service = process.map_or("unknown_service", |p| p.service.as_ref());
            let instance = process.and_then(|p| {
                text(&p.tags, "service.instance.id")
                    .or_else(|| text(&p.tags, "hostname"))
                    .or_else(|| text(&p.tags, "ip"))
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
                _ => Kind::Internal,
            };
            let error = match tag(&span.tags, "error") {
                Some(TagValue::Bool(b)) => *b,
                Some(TagValue::Text(t)) => t == "true",
                _ => false,
            } || text(&span.tags, "otel.status_code") == Some("ERROR");
            let attempt =
                attempt_from(integer(&span.tags, "stampede.attempt"), integer(&span.tags, "http.request.resend_count"));
            let peer = text(&span.tags, "peer.service").map_or(NO_NAME, |p| reader.names.intern(p));
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
    }
    Ok(())
}
