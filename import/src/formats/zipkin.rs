//! Zipkin v2 JSON: an array of spans, or the query API's array of traces (`traceId`, `id`, `parentId`, `name`, `kind`,
//! `timestamp` and `duration` in microseconds, `localEndpoint.serviceName`, tags).
//! A failure is an `error` tag. B3's shared spans — a server span with the same id
//! as its client's (`"shared": true`) — are split when the client half is in the file:
//! the server side gets an id of its own under the client span, and the spans made
//! under the shared id (by any service but the client's) move under it; without its
//! client half a shared span is an ordinary server span. Fragments — a span reported
//! in pieces, the pieces without a `timestamp` (a late annotation, a tag added after
//! the span was sent) — are merged into the piece that has one; a fragment that has
//! none is skipped and counted. The callee of a client span is its
//! `remoteEndpoint.serviceName`, else what its tags name ([`super::PEER_KEYS`]).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;

use super::{attempt_from, best_peer, hex_u128, hex_u64, Reader};
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
    timestamp: Option<i64>,
    #[serde(default)]
    duration: Option<i64>,
    #[serde(borrow, rename = "localEndpoint", default)]
    local: Option<Endpoint<'a>>,
    #[serde(borrow, rename = "remoteEndpoint", default)]
    remote: Option<Endpoint<'a>>,
    #[serde(borrow, default)]
    tags: BTreeMap<Cow<'a, str>, Cow<'a, str>>,
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
    let spans = merge_fragments(spans, reader);
    let shared = shared_ids(&spans);
    for span in &spans {
        read_span(span, &shared, reader);
    }
    Ok(())
}

/// One Zipkin span into `reader` (a shared span's server side under its client), or
/// counted among the skipped (no ids, a time before 1970).
fn read_span(span: &ZipkinSpan, shared: &HashMap<(u128, u64), &str>, reader: &mut Reader) {
    let (Some(trace), Some(id)) = (hex_u128(&span.trace_id), hex_u64(&span.id)) else {
        reader.skipped().no_id += 1;
        return;
    };
    let kind = match span.kind.as_deref() {
        Some("SERVER") => Kind::Server,
        Some("CLIENT") => Kind::Client,
        Some("PRODUCER") => Kind::Producer,
        Some("CONSUMER") => Kind::Consumer,
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
        // Made under a shared id by anyone but the client's service: the server
        // side made it (whatever spelling of its name it used).
        if shared.get(&(trace, p)).is_some_and(|client| *client != service) {
            parent = Some(server_side(p));
        }
    }
    let instance = span
        .local
        .as_ref()
        .and_then(|l| l.ipv4.as_ref().map(|ip| l.port.map_or_else(|| ip.to_string(), |port| format!("{ip}:{port}"))));
    let peer = span
        .remote
        .as_ref()
        .and_then(|r| r.service.as_deref())
        .or_else(|| best_peer(span.tags.iter().map(|(k, v)| (k.as_ref(), v.as_ref()))));
    let tag = |key: &str| span.tags.get(key).and_then(|v| v.parse::<i64>().ok());
    // Zipkin's times are Unix microseconds: one before 1970 is not a time.
    let (timestamp, duration) = (span.timestamp.unwrap_or(0), span.duration.unwrap_or(0));
    if timestamp < 0 || duration < 0 {
        reader.skipped().bad_time += 1;
        return;
    }
    let start = timestamp.saturating_mul(1000);
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
        end: start.saturating_add(duration.saturating_mul(1000)),
        error: span.tags.contains_key("error"),
        attempt: attempt_from(tag("stampede.attempt"), tag("http.request.resend_count")),
    };
    reader.push(span);
}

/// Shared ids whose client half is here (Zipkin's B3 lets a client and its server
/// report one span id): (trace, id) → the client's service.
fn shared_ids<'a>(spans: &'a [ZipkinSpan<'a>]) -> HashMap<(u128, u64), &'a str> {
    let ids = |span: &ZipkinSpan| Some((hex_u128(&span.trace_id)?, hex_u64(&span.id)?));
    let clients: HashMap<(u128, u64), &str> = spans
        .iter()
        .filter(|s| s.kind.as_deref() == Some("CLIENT"))
        .filter_map(|s| Some((ids(s)?, service_of(s))))
        .collect();
    let mut shared: HashMap<(u128, u64), &str> = HashMap::new();
    for span in spans.iter().filter(|s| s.kind.as_deref() == Some("SERVER")) {
        if let Some(key) = ids(span).filter(|key| clients.contains_key(key)) {
            shared.insert(key, clients[&key]);
        }
    }
    shared
}

/// Each span reported in pieces made one: a piece without a `timestamp` is merged into
/// a piece of the same trace, id and side that has one (its tags, and the name, kind
/// and endpoints it lacks); a piece no timed piece matches is skipped and counted.
fn merge_fragments<'a>(spans: Vec<ZipkinSpan<'a>>, reader: &mut Reader) -> Vec<ZipkinSpan<'a>> {
    if spans.iter().all(|s| s.timestamp.is_some()) {
        return spans;
    }
    let (mut timed, fragments): (Vec<ZipkinSpan>, Vec<ZipkinSpan>) =
        spans.into_iter().partition(|s| s.timestamp.is_some());
    let mut by_id: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
    let keys: Vec<(String, String)> = timed.iter().map(|s| (s.trace_id.to_string(), s.id.to_string())).collect();
    for (i, (trace, id)) in keys.iter().enumerate() {
        by_id.entry((trace.as_str(), id.as_str())).or_default().push(i);
    }
    for fragment in fragments {
        let candidates = by_id.get(&(fragment.trace_id.as_ref(), fragment.id.as_ref()));
        let same_side = |t: &ZipkinSpan| {
            fragment.kind.is_none() || t.kind.is_none() || t.kind == fragment.kind || fragment.local.is_none()
        };
        let Some(&into) = candidates.and_then(|c| c.iter().find(|&&i| same_side(&timed[i]))) else {
            reader.skipped().untimed += 1;
            continue;
        };
        let span = &mut timed[into];
        span.name = span.name.take().filter(|n| !n.is_empty()).or(fragment.name);
        span.kind = span.kind.take().or(fragment.kind);
        span.local = span.local.take().or(fragment.local);
        span.remote = span.remote.take().or(fragment.remote);
        span.parent_id = span.parent_id.take().or(fragment.parent_id);
        span.duration = span.duration.filter(|d| *d > 0).or(fragment.duration);
        for (key, value) in fragment.tags {
            span.tags.entry(key).or_insert(value);
        }
    }
    timed
}

fn service_of<'a>(span: &'a ZipkinSpan<'_>) -> &'a str {
    span.local.as_ref().and_then(|l| l.service.as_deref()).unwrap_or("unknown_service")
}
