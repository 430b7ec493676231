//! OTLP JSON: `ExportTraceServiceRequest`s (`{"resourceSpans": [...]}`), one per line
//! (the Collector's file exporter, `stampede run --trace-format otlp`) or one document
//! (also Grafana Tempo's trace answer, whose list is `batches`).
//! Field names in lowerCamelCase or snake_case, `instrumentationLibrarySpans` (before
//! OTLP 1.0) as `scopeSpans`; ids in hex; kinds and status codes as numbers or enum
//! names; times as strings or numbers. The service is the resource's `service.name`,
//! the instance its `service.instance.id` (or `host.name`).

use std::borrow::Cow;

use serde::Deserialize;

use super::{attempt_from, hex_u128, hex_u64, Reader};
use crate::span::{Kind, Span, NO_NAME};

#[derive(Deserialize)]
struct Request<'a> {
    // `batches`: Grafana Tempo's trace-by-id answer.
    #[serde(borrow, alias = "resource_spans", alias = "batches", rename = "resourceSpans", default)]
    resource_spans: Vec<ResourceSpans<'a>>,
}

#[derive(Deserialize)]
struct ResourceSpans<'a> {
    #[serde(borrow, default)]
    resource: Resource<'a>,
    #[serde(borrow, rename = "scopeSpans", alias = "scope_spans", alias = "instrumentationLibrarySpans", default)]
    scope_spans: Vec<ScopeSpans<'a>>,
}

#[derive(Deserialize, Default)]
struct Resource<'a> {
    #[serde(borrow, default)]
    attributes: Vec<KeyValue<'a>>,
}

#[derive(Deserialize)]
struct ScopeSpans<'a> {
    #[serde(borrow, default)]
    spans: Vec<OtlpSpan<'a>>,
}

#[derive(Deserialize)]
struct OtlpSpan<'a> {
    #[serde(borrow, rename = "traceId", alias = "trace_id", default)]
    trace_id: Cow<'a, str>,
    #[serde(borrow, rename = "spanId", alias = "span_id", default)]
    span_id: Cow<'a, str>,
    #[serde(borrow, rename = "parentSpanId", alias = "parent_span_id", default)]
    parent_span_id: Cow<'a, str>,
    #[serde(borrow, default)]
    name: Cow<'a, str>,
    #[serde(borrow, default)]
    kind: Option<Number<'a>>,
    #[serde(borrow, rename = "startTimeUnixNano", alias = "start_time_unix_nano", default)]
    start: Option<Number<'a>>,
    #[serde(borrow, rename = "endTimeUnixNano", alias = "end_time_unix_nano", default)]
    end: Option<Number<'a>>,
    /// Left raw: parsed only when it names a key the import reads.
    #[serde(borrow, default)]
    attributes: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default)]
    status: Option<Status<'a>>,
}

/// The keys of a span's attributes the import reads.
const SPAN_KEYS: [&str; 3] = ["\"stampede.attempt\"", "\"http.request.resend_count\"", "\"peer.service\""];

/// A span's attributes, parsed only if they name a key the import reads.
fn span_attributes<'a>(raw: Option<&'a serde_json::value::RawValue>) -> Vec<KeyValue<'a>> {
    match raw {
        Some(raw) if SPAN_KEYS.iter().any(|key| raw.get().contains(key)) => {
            serde_json::from_str(raw.get()).unwrap_or_default()
        }
        _ => Vec::new(),
    }
}

#[derive(Deserialize)]
struct Status<'a> {
    #[serde(borrow, default)]
    code: Option<Number<'a>>,
}

#[derive(Deserialize)]
struct KeyValue<'a> {
    #[serde(borrow)]
    key: Cow<'a, str>,
    #[serde(borrow, default)]
    value: AnyValue<'a>,
}

#[derive(Deserialize, Default)]
struct AnyValue<'a> {
    #[serde(borrow, rename = "stringValue", alias = "string_value", default)]
    string: Option<Cow<'a, str>>,
    #[serde(borrow, rename = "intValue", alias = "int_value", default)]
    int: Option<Number<'a>>,
}

/// A number as OTLP JSON writes it: a JSON number, or a string (64-bit integers, and
/// enum names like `SPAN_KIND_SERVER`), read without buffering (serde's untagged enums
/// buffer every value, which made the reader five times slower).
enum Number<'a> {
    Integer(i64),
    Text(Cow<'a, str>),
}

impl<'de: 'a, 'a> Deserialize<'de> for Number<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visit<'a> {
            type Value = Number<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number, or a string holding one or an enum name")
            }
            fn visit_i64<E>(self, v: i64) -> Result<Number<'a>, E> {
                Ok(Number::Integer(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Number<'a>, E> {
                Ok(Number::Integer(v as i64))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Number<'a>, E> {
                Ok(Number::Integer(v as i64))
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Number<'a>, E> {
                Ok(Number::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Number<'a>, E> {
                Ok(Number::Text(Cow::Owned(v.to_string())))
            }
        }
        deserializer.deserialize_any(Visit(std::marker::PhantomData))
    }
}

impl Number<'_> {
    fn integer(&self) -> Option<i64> {
        match self {
            Number::Integer(n) => Some(*n),
            Number::Text(text) => text.parse().ok(),
        }
    }
}

fn string<'a>(attributes: &'a [KeyValue<'_>], key: &str) -> Option<&'a str> {
    attributes.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.string.as_deref())
}

fn integer(attributes: &[KeyValue<'_>], key: &str) -> Option<i64> {
    attributes.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.int.as_ref()?.integer())
}

fn kind(value: Option<&Number<'_>>) -> Kind {
    let code = match value {
        Some(Number::Text(text)) => match text.as_ref() {
            "SPAN_KIND_SERVER" | "SERVER" => 2,
            "SPAN_KIND_CLIENT" | "CLIENT" => 3,
            _ => 1,
        },
        Some(number) => number.integer().unwrap_or(1),
        None => 1,
    };
    match code {
        2 => Kind::Server,
        3 => Kind::Client,
        _ => Kind::Internal,
    }
}

fn failed(status: Option<&Status<'_>>) -> bool {
    match status.and_then(|s| s.code.as_ref()) {
        Some(Number::Text(text)) => text.contains("ERROR"),
        Some(number) => number.integer() == Some(2),
        None => false,
    }
}

/// Reads one request (a line, or the whole document) into `reader`.
pub fn read_document(text: &[u8], reader: &mut Reader) -> Result<(), String> {
    let request: Request = serde_json::from_slice(text).map_err(|e| e.to_string())?;
    for resource in &request.resource_spans {
        let attributes = &resource.resource.attributes;
        let service = string(attributes, "service.name").unwrap_or("unknown_service");
        let instance = string(attributes, "service.instance.id").or_else(|| string(attributes, "host.name"));
        let service = reader.names.intern(service);
        let instance = instance.map_or(NO_NAME, |i| reader.names.intern(i));
        for span in resource.scope_spans.iter().flat_map(|scope| &scope.spans) {
            let (Some(trace), Some(id)) = (hex_u128(&span.trace_id), hex_u64(&span.span_id)) else {
                reader.skipped().no_id += 1;
                continue;
            };
            let parent = hex_u64(&span.parent_span_id).filter(|p| *p != 0);
            let start = span.start.as_ref().and_then(Number::integer).unwrap_or(0);
            let end = span.end.as_ref().and_then(Number::integer).unwrap_or(start);
            let kind = kind(span.kind.as_ref());
            // Attempts and peers are what a client span says; other spans' attributes are not read.
            let attributes = if kind == Kind::Client { span_attributes(span.attributes) } else { Vec::new() };
            let attempt = attempt_from(
                integer(&attributes, "stampede.attempt"),
                integer(&attributes, "http.request.resend_count"),
            );
            let peer = string(&attributes, "peer.service").map_or(NO_NAME, |p| reader.names.intern(p));
            let name = reader.names.intern(&span.name);
            reader.push(Span {
                trace,
                id,
                parent,
                service,
                instance,
                name,
                peer,
                kind,
                start,
                end,
                error: failed(span.status.as_ref()),
                attempt,
            });
        }
    }
    Ok(())
}
