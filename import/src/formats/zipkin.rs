//! Zipkin v2 JSON: an array of spans, or the query API's array of traces (`traceId`, `id`, `parentId`, `name`, `kind`,
//! `timestamp` and `duration` in microseconds, `localEndpoint.serviceName`, tags).
//! A failure is an `error` tag. B3's shared spans — a server span with the same id
//! as its client's (`"shared": true`) — are split: the server side gets an id of its
//! own under the client span, and the spans its service made under the shared id
//! move under it.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Deserialize;

use super::{attempt_from, hex_u128, hex_u64, Reader};
use crate::span::{Kind, Span, NO_NAME};

#[derive(Deserialize)]
struct ZipkinSpan<'a> {
    #[serde(borrow, rename = "traceId", default)]
    trace_id: Cow<'a, str>,
    #[serde(borrow, default)]
    id: Cow<'a, str>,
    #[serde(borrow, rename = "parentId", default)]
    parent_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(default)]
    timestamp: i64,
    #[serde(default)]
    duration: i64,
    #[serde(borrow, rename = "localEndpoint", default)]
    local: Option<Endpoint<'a>>,
    #[serde(borrow, rename = "remoteEndpoint", default)]
    remote: Option<Endpoint<'a>>,
    #[serde(borrow, default)]
    tags: BTreeMap<Cow<'a, str>, Cow<'a, str>>,
    #[serde(default)]
    shared: bool,
}

#[derive(Deserialize)]
struct Endpoint<'a> {
    #[serde(borrow, rename = "serviceName", default)]
    service: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    ipv4: Option<Cow<'a, str>>,
    #[serde(default)]
    port: Option<u32>,
}

/// The id a shared span's server side gets (never a real id in the same trace:
/// ids are random 64-bit numbers).
fn server_side(id: u64) -> u64 {
    id.rotate_left(17) ^ 0x5bd1_e995_5bd1_e995
}

/// Reads a Zipkin v2 array into `reader`.
pub fn read_document(text: &[u8], reader: &mut Reader) -> Result<(), String> {
    // The query API's answer is a list of traces, each a list of spans; an export is one list.
    let nested = text.iter().copied().filter(|b| !b.is_ascii_whitespace()).nth(1) == Some(b'[');
    let spans: Vec<ZipkinSpan> = if nested {
        let traces: Vec<Vec<ZipkinSpan>> = serde_json::from_slice(text).map_err(|e| e.to_string())?;
        traces.into_iter().flatten().collect()
    } else {
        serde_json::from_slice(text).map_err(|e| e.to_string())?
    };
    // Shared ids: (trace, id) → the server side's service.
    let ids = |span: &ZipkinSpan| Some((hex_u128(&span.trace_id)?, hex_u64(&span.id)?));
    let clients: HashSet<(u128, u64)> =
        spans.iter().filter(|s| s.kind.as_deref() == Some("CLIENT")).filter_map(ids).collect();
    let mut shared: HashMap<(u128, u64), &str> = HashMap::new();
    for span in spans.iter().filter(|s| s.kind.as_deref() == Some("SERVER")) {
        if let Some(key) = ids(span).filter(|key| span.shared || clients.contains(key)) {
            shared.insert(key, service_of(span));
        }
    }
    for span in &spans {
        let (Some(trace), Some(id)) = (hex_u128(&span.trace_id), hex_u64(&span.id)) else {
            reader.skipped().no_id += 1;
            continue;
        };
        let kind = match span.kind.as_deref() {
            Some("SERVER") => Kind::Server,
            Some("CLIENT") => Kind::Client,
            _ => Kind::Internal,
        };
        let service = service_of(span);
        let mut parent = span.parent_id.as_deref().and_then(hex_u64);
        let mut own_id = id;
        if kind == Kind::Server && shared.contains_key(&(trace, id)) {
            // The server side of a shared span: under its client.
            own_id = server_side(id);
            parent = Some(id);
        } else if let Some(p) = parent {
            // Made by the server side of a shared span: under that side.
            if shared.get(&(trace, p)).is_some_and(|s| *s == service) {
                parent = Some(server_side(p));
            }
        }
        let instance = span.local.as_ref().and_then(|l| {
            l.ipv4.as_ref().map(|ip| l.port.map_or_else(|| ip.to_string(), |port| format!("{ip}:{port}")))
        });
        let peer = span.remote.as_ref().and_then(|r| r.service.as_deref());
        let tag = |key: &str| span.tags.get(key).and_then(|v| v.parse::<i64>().ok());
        // Zipkin's times are Unix microseconds: one before 1970 is not a time.
        if span.timestamp < 0 || span.duration < 0 {
            reader.skipped().bad_time += 1;
            continue;
        }
        let start = span.timestamp.saturating_mul(1000);
        let span = Span {
            trace,
            id: own_id,
            parent,
            service: reader.names.intern(service),
            instance: instance.map_or(NO_NAME, |i| reader.names.intern(&i)),
            name: reader.names.intern(span.name.as_deref().unwrap_or("")),
            peer: peer.map_or(NO_NAME, |p| reader.names.intern(p)),
            kind,
            start,
            end: start.saturating_add(span.duration.saturating_mul(1000)),
            error: span.tags.contains_key("error"),
            attempt: attempt_from(tag("stampede.attempt"), tag("http.request.resend_count")),
        };
        reader.push(span);
    }
    Ok(())
}

fn service_of<'a>(span: &'a ZipkinSpan<'_>) -> &'a str {
    span.local.as_ref().and_then(|l| l.service.as_deref()).unwrap_or("unknown_service")
}
