//! OTLP protobuf: an `ExportTraceServiceRequest` (an OTLP/HTTP body saved as `.pb`,
//! the same bytes as `TracesData`), or the OpenTelemetry Collector's file exporter in
//! `proto` format: messages one after another, each behind its byte count as a
//! big-endian u32.
//!
//! Only the fields the import reads are declared, with the field numbers of the
//! published `opentelemetry/proto/trace/v1/trace.proto` (and `common`, `resource`);
//! prost skips the others. `AnyValue`'s `oneof` is two optional fields here (on the
//! wire a oneof is plain fields). Ids are bytes: 16 for a trace, 8 for a span.

// The messages' fields are the proto's, under its names: their documentation is there.
#![allow(missing_docs)]

use std::borrow::Cow;

use prost::Message;

use super::{add_span, intern_resource, Number, SpanAttributes, SpanFields};
use crate::formats::Reader;
use crate::span::{Kind, Span};

/// `ExportTraceServiceRequest` / `TracesData`.
#[derive(Clone, PartialEq, Message)]
pub struct TracesData {
    #[prost(message, repeated, tag = "1")]
    pub resource_spans: Vec<ResourceSpans>,
}

/// `ResourceSpans`.
#[derive(Clone, PartialEq, Message)]
pub struct ResourceSpans {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    pub scope_spans: Vec<ScopeSpans>,
    /// `instrumentation_library_spans`, before OTLP 1.0 (the same shape).
    #[prost(message, repeated, tag = "1000")]
    pub instrumentation_library_spans: Vec<ScopeSpans>,
}

/// `Resource`.
#[derive(Clone, PartialEq, Message)]
pub struct Resource {
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
}

/// `ScopeSpans`.
#[derive(Clone, PartialEq, Message)]
pub struct ScopeSpans {
    #[prost(message, repeated, tag = "2")]
    pub spans: Vec<ProtoSpan>,
}

/// `Span`.
#[derive(Clone, PartialEq, Message)]
pub struct ProtoSpan {
    #[prost(bytes = "vec", tag = "1")]
    pub trace_id: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub span_id: Vec<u8>,
    #[prost(bytes = "vec", tag = "4")]
    pub parent_span_id: Vec<u8>,
    #[prost(string, tag = "5")]
    pub name: String,
    #[prost(int32, tag = "6")]
    pub kind: i32,
    #[prost(fixed64, tag = "7")]
    pub start_time_unix_nano: u64,
    #[prost(fixed64, tag = "8")]
    pub end_time_unix_nano: u64,
    #[prost(message, repeated, tag = "9")]
    pub attributes: Vec<KeyValue>,
    #[prost(message, optional, tag = "15")]
    pub status: Option<Status>,
}

/// `Status`.
#[derive(Clone, PartialEq, Message)]
pub struct Status {
    #[prost(int32, tag = "3")]
    pub code: i32,
}

/// `KeyValue`.
#[derive(Clone, PartialEq, Message)]
pub struct KeyValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

/// `AnyValue`: its string and integer cases.
#[derive(Clone, PartialEq, Message)]
pub struct AnyValue {
    #[prost(string, optional, tag = "1")]
    pub string_value: Option<String>,
    #[prost(int64, optional, tag = "3")]
    pub int_value: Option<i64>,
}

/// Bytes as a big-endian id (`None`: empty, or not the id's size).
fn id(bytes: &[u8], size: usize) -> Option<u128> {
    (bytes.len() == size && bytes.iter().any(|&b| b != 0))
        .then(|| bytes.iter().fold(0u128, |id, &b| id << 8 | u128::from(b)))
}

fn string<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a str> {
    attributes.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.as_ref()?.string_value.as_deref())
}

/// Reads one encoded message into `reader` (nothing of it when it does not decode).
pub fn read_message(bytes: &[u8], reader: &mut Reader) -> Result<(), String> {
    let data = TracesData::decode(bytes).map_err(|e| format!("not an OTLP protobuf message: {e}"))?;
    let mut spans: Vec<Span> = Vec::new();
    for resource_spans in &data.resource_spans {
        let attributes = resource_spans.resource.as_ref().map_or(&[][..], |r| &r.attributes[..]);
        let instance = string(attributes, "service.instance.id").or_else(|| string(attributes, "host.name"));
        let (service, instance) = intern_resource(reader, string(attributes, "service.name"), instance);
        let first = spans.len();
        let scopes = resource_spans.scope_spans.iter().chain(&resource_spans.instrumentation_library_spans);
        for span in scopes.flat_map(|scope| &scope.spans) {
            let mut read = SpanAttributes::default();
            for kv in &span.attributes {
                let Some(value) = &kv.value else { continue };
                let int = value.int_value.map(Number::Integer);
                read.read(&kv.key, value.string_value.as_deref().map(Cow::Borrowed), int.as_ref());
            }
            let kind = match span.kind {
                2 => Kind::Server,
                3 => Kind::Client,
                4 => Kind::Producer,
                5 => Kind::Consumer,
                _ => Kind::Internal,
            };
            let fields = SpanFields {
                trace: id(&span.trace_id, 16),
                id: id(&span.span_id, 8).map(|id| id as u64),
                parent: id(&span.parent_span_id, 8).map(|id| id as u64),
                name: &span.name,
                kind,
                start: i64::try_from(span.start_time_unix_nano).ok(),
                end: i64::try_from(span.end_time_unix_nano).ok(),
                attributes: &read,
                error: span.status.as_ref().is_some_and(|s| s.code == 2),
            };
            add_span(reader, &mut spans, fields);
        }
        for span in &mut spans[first..] {
            span.service = service;
            span.instance = instance;
        }
    }
    for span in spans {
        reader.push(span);
    }
    Ok(())
}

/// How a protobuf file holds its messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// One message, the whole file (it starts with field 1's tag, 0x0A).
    Whole,
    /// The Collector's file exporter: a big-endian u32 byte count before each message.
    LengthPrefixed,
}

impl Framing {
    /// The framing of a file that starts with `head`, if it is OTLP protobuf.
    pub fn detect(head: &[u8]) -> Option<Framing> {
        match head {
            [0x0A, ..] => Some(Framing::Whole),
            [0, _, _, _, 0x0A, ..] => Some(Framing::LengthPrefixed),
            _ => None,
        }
    }
}
