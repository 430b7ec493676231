//! OTLP JSON: `ExportTraceServiceRequest`s (`{"resourceSpans": [...]}`), one per line
//! (the Collector's file exporter, `stampede run --trace-format otlp`) or one document
//! (also Grafana Tempo's trace answer, whose list is `batches`).
//! Field names in lowerCamelCase or snake_case, `instrumentationLibrarySpans` (before
//! OTLP 1.0) as `scopeSpans`; ids in hex; kinds and status codes as numbers or enum
//! names; times as strings or numbers. The service is the resource's `service.name`,
//! the instance its `service.instance.id` (or `host.name`).
//!
//! Two readers: [`scan`], a scanner for the shape exporters write (over 1.2 M spans/s on
//! one core, docs/src/benchmarks.md; issue 49 asks ≥ 1 M), and, for any document it
//! gives up, the serde reader below (every spelling OTLP JSON allows, and the error
//! messages; 846 k spans/s). The serde reader checks a document's UTF-8 once and
//! parses it as `str`, streams its spans through seeds into one reused buffer, reads
//! ids, times and kinds into integers as it parses, and keeps only the three
//! attribute keys the import reads. Either way a document's spans reach the reader only
//! when the whole document was read, so an unreadable line adds no spans.

pub mod proto;
mod scan;

use std::borrow::Cow;

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::{attempt_from, otlp_span_id, otlp_trace_id, peer_rank, Reader};
use crate::span::{Kind, Span, NO_NAME};

#[derive(Deserialize, Default)]
struct Resource<'a> {
    #[serde(borrow, default)]
    attributes: Vec<KeyValue<'a>>,
}

#[derive(Deserialize)]
struct OtlpSpan<'a> {
    #[serde(rename = "traceId", alias = "trace_id", default)]
    trace_id: Hex<u128>,
    #[serde(rename = "spanId", alias = "span_id", default)]
    span_id: Hex<u64>,
    #[serde(rename = "parentSpanId", alias = "parent_span_id", default)]
    parent_span_id: Hex<u64>,
    #[serde(borrow, default)]
    name: Cow<'a, str>,
    #[serde(default)]
    kind: SpanKind,
    #[serde(rename = "startTimeUnixNano", alias = "start_time_unix_nano", default)]
    start: Nanos,
    #[serde(rename = "endTimeUnixNano", alias = "end_time_unix_nano", default)]
    end: Nanos,
    /// Only the keys the import reads are kept.
    #[serde(borrow, default)]
    attributes: SpanAttributes<'a>,
    #[serde(borrow, default)]
    status: Option<Status<'a>>,
}

/// An id in hex (or base64, the protobuf JSON mapping), read as it is parsed (`None`:
/// empty, or neither). Ids, times and the kind
/// are read into integers during the parse: the span struct stays small (moving a large
/// one cost a tenth of the reader's time).
#[derive(Default)]
struct Hex<T>(Option<T>);

/// An id read from hex or base64: a trace id (16 bytes) or a span id (8).
trait HexId: Sized {
    fn from_hex(text: &str) -> Option<Self>;
}

impl HexId for u128 {
    fn from_hex(text: &str) -> Option<Self> {
        otlp_trace_id(text)
    }
}

impl HexId for u64 {
    fn from_hex(text: &str) -> Option<Self> {
        otlp_span_id(text)
    }
}

impl<'de, T: HexId> Deserialize<'de> for Hex<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit<T>(std::marker::PhantomData<T>);
        impl<T: HexId> Visitor<'_> for Visit<T> {
            type Value = Hex<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a hex id")
            }
            fn visit_str<E>(self, v: &str) -> Result<Hex<T>, E> {
                Ok(Hex(T::from_hex(v)))
            }
        }
        deserializer.deserialize_str(Visit(std::marker::PhantomData))
    }
}

/// A time in Unix nanoseconds: a JSON number or a string holding one.
#[derive(Default)]
struct Nanos(Option<i64>);

impl<'de> Deserialize<'de> for Nanos {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Nanos(Number::deserialize(deserializer)?.integer()))
    }
}

/// A span's kind: a number or an enum name.
#[derive(Clone, Copy)]
struct SpanKind(Kind);

impl Default for SpanKind {
    fn default() -> Self {
        SpanKind(Kind::Internal)
    }
}

impl<'de> Deserialize<'de> for SpanKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(SpanKind(kind(Some(&Number::deserialize(deserializer)?))))
    }
}

/// What a span's attributes say that the import reads (a client span's attempt and
/// peer); other keys' values are skipped unparsed.
#[derive(Default)]
struct SpanAttributes<'a> {
    attempt: Option<i64>,
    resend_count: Option<i64>,
    /// The callee, from the best-ranked attribute that names it ([`peer_rank`]).
    peer: Option<(u8, Cow<'a, str>)>,
}

impl<'a> SpanAttributes<'a> {
    /// Reads `key`'s value (a key [`reads_key`]).
    fn read(&mut self, key: &str, string: Option<Cow<'a, str>>, int: Option<&Number<'_>>) {
        match key {
            "stampede.attempt" => self.attempt = int.and_then(Number::integer),
            "http.request.resend_count" => self.resend_count = int.and_then(Number::integer),
            _ => {
                let (Some(rank), Some(value)) = (peer_rank(key), string) else { return };
                if !value.is_empty() && self.peer.as_ref().is_none_or(|(best, _)| rank < *best) {
                    self.peer = Some((rank, value));
                }
            }
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for SpanAttributes<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for Visit<'a> {
            type Value = SpanAttributes<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of attributes")
            }
            fn visit_unit<E>(self) -> Result<SpanAttributes<'a>, E> {
                Ok(SpanAttributes::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<SpanAttributes<'a>, A::Error> {
                let mut read = SpanAttributes::default();
                while let Some(attribute) = seq.next_element::<Attribute<'a>>()? {
                    let (Some(value), Some(key)) = (attribute.value, attribute.key) else { continue };
                    read.read(&key, value.string, value.int.as_ref());
                }
                Ok(read)
            }
        }
        deserializer.deserialize_any(Visit(std::marker::PhantomData))
    }
}

/// One attribute whose value is parsed only when its key is one the import reads (or
/// when the value comes before the key).
struct Attribute<'a> {
    key: Option<Cow<'a, str>>,
    value: Option<AnyValue<'a>>,
}

impl<'de: 'a, 'a> Deserialize<'de> for Attribute<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for Visit<'a> {
            type Value = Attribute<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an attribute (key and value)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Attribute<'a>, A::Error> {
                let mut attribute = Attribute { key: None, value: None };
                while let Some(field) = map.next_key::<Text<'de>>()? {
                    match &*field {
                        "key" => attribute.key = Some(map.next_value::<Text<'a>>()?.0),
                        "value" if attribute.key.as_deref().is_none_or(reads_key) => {
                            attribute.value = Some(map.next_value()?)
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(attribute)
            }
        }
        deserializer.deserialize_map(Visit(std::marker::PhantomData))
    }
}

/// Whether the import reads span attribute `key`: a client span's attempt, and what
/// names its callee ([`peer_rank`]).
fn reads_key(key: &str) -> bool {
    matches!(key, "stampede.attempt" | "http.request.resend_count") || peer_rank(key).is_some()
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

/// A string, borrowed from the input when it has no escapes (serde's own `Cow<str>`
/// always copies outside a derived struct's `#[serde(borrow)]` field).
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for Visit<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
        }
        deserializer.deserialize_str(Visit(std::marker::PhantomData))
    }
}

impl std::ops::Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
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
            Number::Text(text) => decimal(text).or_else(|| text.parse().ok()),
        }
    }
}

/// A non-negative decimal of up to 19 digits (a time in Unix nanoseconds), read
/// without `str::parse`'s general checks (they took a quarter of the reader's time);
/// anything else is left to `str::parse`.
fn decimal(text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    if bytes.is_empty() || bytes.len() > 19 {
        return None;
    }
    // 19 digits fit a u64 (< 10^19 < 2^64); the value must still fit an i64.
    let value = bytes.iter().try_fold(0u64, |n, &b| b.is_ascii_digit().then(|| n * 10 + u64::from(b - b'0')))?;
    i64::try_from(value).ok()
}

fn string<'a>(attributes: &'a [KeyValue<'_>], key: &str) -> Option<&'a str> {
    attributes.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.string.as_deref())
}

fn kind(value: Option<&Number<'_>>) -> Kind {
    let code = match value {
        Some(Number::Text(text)) => match text.as_ref() {
            "SPAN_KIND_SERVER" | "SERVER" => 2,
            "SPAN_KIND_CLIENT" | "CLIENT" => 3,
            "SPAN_KIND_PRODUCER" | "PRODUCER" => 4,
            "SPAN_KIND_CONSUMER" | "CONSUMER" => 5,
            _ => 1,
        },
        Some(number) => number.integer().unwrap_or(1),
        None => 1,
    };
    match code {
        2 => Kind::Server,
        3 => Kind::Client,
        4 => Kind::Producer,
        5 => Kind::Consumer,
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
    read_document_by(text, reader, true)
}

/// [`read_document`] by the serde reader alone (the scanner not tried): what a
/// document the scanner gives up costs, measured beside it by the import bench.
pub fn read_document_by_serde(text: &[u8], reader: &mut Reader) -> Result<(), String> {
    read_document_by(text, reader, false)
}

fn read_document_by(text: &[u8], reader: &mut Reader, scanner: bool) -> Result<(), String> {
    let text = std::str::from_utf8(text).map_err(|e| format!("not UTF-8: {e}"))?;
    let mut spans = std::mem::take(&mut reader.document);
    spans.clear();
    let without_ids = reader.skipped().no_id;
    if !(scanner && scan::read(text, reader, &mut spans).is_some()) {
        // Not a shape the scanner reads: serde reads it (and says what is wrong with it).
        spans.clear();
        reader.skipped().no_id = without_ids;
        if let Err(e) = read_with_serde(text, reader, &mut spans) {
            // Nothing of an unreadable document counts, not even its spans without ids.
            reader.skipped().no_id = without_ids;
            reader.document = spans;
            return Err(e);
        }
    }
    for &span in &spans {
        reader.push(span);
    }
    reader.document = spans;
    Ok(())
}

/// The serde reader: every shape OTLP JSON allows, and the errors of a broken document.
fn read_with_serde(text: &str, reader: &mut Reader, spans: &mut Vec<Span>) -> Result<(), String> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    Seed::<Request>::new(reader, spans)
        .deserialize(&mut deserializer)
        .and_then(|()| deserializer.end())
        .map_err(|e| e.to_string())
}

/// Where a document's spans go while it is parsed, at level `L` of the document
/// ([`Request`], [`Resources`], [`Scopes`]): names interned in `reader`, spans kept in
/// `spans` until the document is known to be whole.
struct Seed<'r, L> {
    reader: &'r mut Reader,
    spans: &'r mut Vec<Span>,
    level: std::marker::PhantomData<L>,
}

/// The document: `{"resourceSpans": [...]}`.
struct Request;
/// A `ResourceSpans` object: its spans, then the resource's service and instance
/// given to them (the resource may come after its spans).
struct Resources;
/// A `ScopeSpans` object: its spans.
struct Scopes;

impl<'r, L> Seed<'r, L> {
    fn new(reader: &'r mut Reader, spans: &'r mut Vec<Span>) -> Self {
        Seed { reader, spans, level: std::marker::PhantomData }
    }

    /// The same sink, at level `M`.
    fn at<M>(&mut self) -> Seed<'_, M> {
        Seed::new(&mut *self.reader, &mut *self.spans)
    }
}

impl<'de, L> DeserializeSeed<'de> for Seed<'_, L>
where
    Self: Visitor<'de, Value = ()>,
{
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, L> Reusable<'de> for Seed<'_, L>
where
    for<'x> Seed<'x, L>: Visitor<'de, Value = ()>,
{
    fn element<A: SeqAccess<'de>>(&mut self, seq: &mut A) -> Result<bool, A::Error> {
        Ok(seq.next_element_seed(self.at::<L>())?.is_some())
    }
}

impl<'de> Visitor<'de> for Seed<'_, Request> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an OTLP ExportTraceServiceRequest (an object with resourceSpans)")
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Text<'de>>()? {
            match &*key {
                // `batches`: Grafana Tempo's trace-by-id answer.
                "resourceSpans" | "resource_spans" | "batches" => map.next_value_seed(Each(self.at::<Resources>()))?,
                // Tempo's v2 answer wraps the request: `{"trace": {"resourceSpans": …}}`.
                "trace" => map.next_value_seed(self.at::<Request>())?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// A seed for every element of a list (`null` is an empty list).
struct Each<S>(S);

/// A seed that can be used again, for each element of a list.
trait Reusable<'de> {
    fn element<A: SeqAccess<'de>>(&mut self, seq: &mut A) -> Result<bool, A::Error>;
}

impl<'de, S: Reusable<'de>> DeserializeSeed<'de> for Each<S> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de, S: Reusable<'de>> Visitor<'de> for Each<S> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list")
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        while self.0.element(&mut seq)? {}
        Ok(())
    }
}

impl<'de> Visitor<'de> for Seed<'_, Resources> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a ResourceSpans object")
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        let first = self.spans.len();
        let mut at = None;
        while let Some(key) = map.next_key::<Text<'de>>()? {
            match &*key {
                // Interned as soon as it is read, so names are numbered in the order they appear.
                "resource" => at = Some(self.service_and_instance(map.next_value()?)),
                "scopeSpans" | "scope_spans" | "instrumentationLibrarySpans" => {
                    map.next_value_seed(Each(self.at::<Scopes>()))?
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let (service, instance) = match at {
            Some(at) => at,
            None => self.service_and_instance(Resource::default()),
        };
        for span in &mut self.spans[first..] {
            span.service = service;
            span.instance = instance;
        }
        Ok(())
    }
}

impl Seed<'_, Resources> {
    /// The interned service and instance a resource names.
    fn service_and_instance(&mut self, resource: Resource<'_>) -> (u32, u32) {
        let attributes = &resource.attributes;
        let [service, instance, host] =
            ["service.name", "service.instance.id", "host.name"].map(|key| string(attributes, key));
        intern_resource(self.reader, service, instance.or(host))
    }
}

/// The interned service and instance of a resource whose attributes name them.
fn intern_resource(reader: &mut Reader, service: Option<&str>, instance: Option<&str>) -> (u32, u32) {
    let service = reader.names.intern(service.unwrap_or("unknown_service"));
    (service, instance.map_or(NO_NAME, |i| reader.names.intern(i)))
}

impl<'de> Visitor<'de> for Seed<'_, Scopes> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a ScopeSpans object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Text<'de>>()? {
            match &*key {
                "spans" => {
                    map.next_value_seed(Each(SpanSeed { reader: &mut *self.reader, spans: &mut *self.spans }))?
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// A scope's spans, each read into a [`Span`] as soon as it is parsed.
struct SpanSeed<'r> {
    reader: &'r mut Reader,
    spans: &'r mut Vec<Span>,
}

impl<'de> Reusable<'de> for SpanSeed<'_> {
    fn element<A: SeqAccess<'de>>(&mut self, seq: &mut A) -> Result<bool, A::Error> {
        let Some(span) = seq.next_element::<OtlpSpan<'de>>()? else { return Ok(false) };
        let fields = SpanFields {
            trace: span.trace_id.0,
            id: span.span_id.0,
            parent: span.parent_span_id.0,
            name: &span.name,
            kind: span.kind.0,
            start: span.start.0,
            end: span.end.0,
            attributes: &span.attributes,
            error: failed(span.status.as_ref()),
        };
        add_span(self.reader, self.spans, fields);
        Ok(true)
    }
}

/// What a span says, as either reader parsed it.
struct SpanFields<'s> {
    trace: Option<u128>,
    id: Option<u64>,
    parent: Option<u64>,
    name: &'s str,
    kind: Kind,
    start: Option<i64>,
    end: Option<i64>,
    attributes: &'s SpanAttributes<'s>,
    error: bool,
}

/// Adds a parsed span to the document's spans (its service comes with its resource),
/// or counts it when it has no ids.
fn add_span(reader: &mut Reader, spans: &mut Vec<Span>, fields: SpanFields<'_>) {
    let (Some(trace), Some(id)) = (fields.trace, fields.id) else {
        reader.skipped().no_id += 1;
        return;
    };
    let start = fields.start.unwrap_or(0);
    let end = fields.end.unwrap_or(start);
    // Attempts and peers are what a client span says; other spans' are not read.
    let client = fields.kind.is_sent();
    let read = fields.attributes;
    let attempt = if client { attempt_from(read.attempt, read.resend_count) } else { None };
    let names = &mut reader.names;
    let peer = match &read.peer {
        Some((_, peer)) if client => names.intern(peer),
        _ => NO_NAME,
    };
    let name = names.intern(fields.name);
    spans.push(Span {
        trace,
        id,
        parent: fields.parent.filter(|p| *p != 0),
        service: NO_NAME,
        instance: NO_NAME,
        name,
        peer,
        kind: fields.kind,
        start,
        end,
        error: fields.error,
        attempt,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What reading `text` as one document returns, the spans it read, and the reader.
    fn read(text: &str) -> (Result<(), String>, Vec<Span>, Reader) {
        let mut reader = Reader::new(1_000_000_000);
        let result = read_document(text.as_bytes(), &mut reader);
        let spans = reader.document.clone();
        (result, spans, reader)
    }

    /// The scanner reads `text` as the serde reader does (spans, names and counts), or
    /// gives it up; returns whether it read it.
    fn scanner_agrees(text: &str) -> bool {
        let (mut by_scan, mut by_serde) = (Reader::new(1), Reader::new(1));
        let (mut scanned, mut parsed) = (Vec::new(), Vec::new());
        let Some(()) = scan::read(text, &mut by_scan, &mut scanned) else { return false };
        read_with_serde(text, &mut by_serde, &mut parsed).expect("what the scanner reads, serde reads");
        assert_eq!(named(&by_scan, &scanned), named(&by_serde, &parsed));
        assert_eq!(by_scan.skipped().clone(), by_serde.skipped().clone());
        true
    }

    /// Spans with their service, instance, name and peer spelled out.
    type Named = Vec<(Span, [String; 4])>;

    fn named(reader: &Reader, spans: &[Span]) -> Named {
        spans
            .iter()
            .map(|s| (*s, [s.service, s.instance, s.name, s.peer].map(|n| reader.names.get(n).to_string())))
            .collect()
    }

    #[test]
    fn the_scanner_reads_what_serde_reads_or_gives_the_document_up() {
        let span = r#"{"traceId":"01","spanId":"02","name":"n","kind":3,"startTimeUnixNano":"5","endTimeUnixNano":7,
            "attributes":[{"key":"x","value":{"kvlistValue":{"values":[{"key":"k","value":{"stringValue":"a\"]}"}}]}}},
              {"key":"peer.service","value":{"stringValue":"db","x":[1,{"y":null}]}},{"key":"stampede.attempt","value":{"intValue":3}}],
            "status":{"code":"STATUS_CODE_ERROR","message":"m"},"events":[],"droppedAttributesCount":0}"#;
        let request = |spans: &str, resource: &str| {
            format!(
                r#"{{"resourceSpans":[{{"resource":{resource},"scopeSpans":[{{"scope":{{}},"spans":[{spans}]}}]}}]}}"#
            )
        };
        let service = r#"{"attributes":[{"key":"service.name","value":{"stringValue":"api"}},{"key":"service.name","value":{"stringValue":"later"}}]}"#;
        // Read by the scanner, as serde reads them.
        for text in [
            request(span, service),
            request(&format!("{span},{span}"), "{}"),
            request(r#"{"traceId":"","spanId":"02"}"#, service),
            format!(" {} \n", request(span, service)),
            r#"{"resourceSpans":[{"scopeSpans":[{"spans":[]}],"resource":{"attributes":[{"value":{"stringValue":"api"},"key":"service.name"}]}}]}"#.to_string(),
        ] {
            assert!(scanner_agrees(&text), "the scanner reads {text}");
        }
        // Given up: serde reads (or refuses) them.
        for text in [
            request(&span.replace(r#""name":"n""#, r#""name":"a\/b""#), service),
            request(&span.replace(r#""kind":3"#, r#""kind":3.0"#), service),
            request(&span.replace(r#""kind":3"#, r#""kind":3,"kind":2"#), service),
            request(
                &span.replace(
                    r#""attributes":["#,
                    r#""attributes":[{"value":{"intValue":1},"key":"stampede.attempt"},"#,
                ),
                service,
            ),
            request(&span.replace(r#""attributes":[{"key":"x""#, r#""attributes":null,"a":[{"key":"x""#), service),
            request(span, service).replace("]}]}]}", "]}]}"),
            format!("{}x", request(span, service)),
            // Where serde refuses what a lax scanner would read: a raw tab in a name, a
            // leading zero; and a skipped string cut after a backslash (no panic).
            request(&span.replace(r#""name":"n""#, "\"name\":\"a\tb\""), service),
            request(&span.replace(r#""kind":3"#, r#""kind":03"#), service),
            r#"{"resourceSpans":[],"x":"a\"#.to_string(),
            r#"{"resourceSpans":[],"x":-"#.to_string(),
        ] {
            assert!(!scanner_agrees(&text), "the scanner gives up {text}");
        }
    }

    /// The spans and names `text` reads to by the serde reader, and by the scanner if it
    /// reads it.
    fn both_readers(text: &str) -> (Option<Named>, Result<Named, String>) {
        let (mut by_scan, mut by_serde) = (Reader::new(1), Reader::new(1));
        let (mut scanned, mut parsed) = (Vec::new(), Vec::new());
        let scan = scan::read(text, &mut by_scan, &mut scanned).map(|()| named(&by_scan, &scanned));
        let serde = read_with_serde(text, &mut by_serde, &mut parsed).map(|()| named(&by_serde, &parsed));
        (scan, serde)
    }

    proptest::proptest! {
        /// Damaged documents: whenever serde reads one, the scanner reads it to the same
        /// spans or gives it up (a document serde refuses, the scanner may read only when
        /// the damage lies in a value it skips). `PROPTEST_CASES=100000` for a longer run.
        #[test]
        fn on_damaged_documents_the_scanner_agrees_with_serde_or_gives_up(
            line in 0usize..4,
            edits in proptest::collection::vec((proptest::prelude::any::<proptest::sample::Index>(), 0usize..3, proptest::sample::select(b"\"{}[],:0a\\ -.e\t".to_vec())), 1..4),
        ) {
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/src/examples/shop.otlp.json");
            let text = std::fs::read_to_string(path).expect("the shop's OTLP export");
            let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
            let mut bytes = lines[line % lines.len()].as_bytes().to_vec();
            for (at, how, byte) in edits {
                let i = at.index(bytes.len());
                match how {
                    0 => bytes[i] = byte,
                    1 => { bytes.remove(i); }
                    _ => bytes.insert(i, byte),
                }
            }
            let Ok(text) = String::from_utf8(bytes) else { return Ok(()) };
            if let (Some(scanned), Ok(parsed)) = both_readers(&text) {
                proptest::prop_assert_eq!(scanned, parsed);
            }
        }
    }

    #[test]
    fn the_scanner_reads_the_shop_export_as_serde_does() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/src/examples/shop.otlp.json");
        let text = std::fs::read_to_string(path).expect("the shop's OTLP export");
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(lines.len() > 1);
        for line in lines {
            assert!(scanner_agrees(line), "the scanner reads every line of the export");
        }
    }

    #[test]
    fn every_spelling_otlp_json_allows_reads_to_the_same_span() {
        // lowerCamelCase, numbers as strings, kind as a number, attributes key first.
        let camel = r#"{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"api"}},
            {"key":"host.name","value":{"stringValue":"h1"}}]},"scopeSpans":[{"scope":{"name":"x"},"spans":[
            {"traceId":"0000000000000000000000000000ABCD","spanId":"00000000000000ff","parentSpanId":"0000000000000001",
             "name":"GET /a","kind":3,"startTimeUnixNano":"1767225600000000000","endTimeUnixNano":"1767225600005000000",
             "attributes":[{"key":"peer.service","value":{"stringValue":"db"}},{"key":"stampede.attempt","value":{"intValue":"2"}},
               {"key":"other","value":{"arrayValue":{"values":[{"stringValue":"]}\"["}]}}}],
             "status":{"code":2}}]}]}]}"#;
        // snake_case, the resource after its spans, the value before the key, numbers as
        // numbers, enum names, an escaped name, Tempo's `batches`, pre-1.0 scopes.
        let snake = r#"{"batches":[{"instrumentationLibrarySpans":[{"spans":[
            {"trace_id":"abcd","span_id":"FF","parent_span_id":"1","name":"GET \/a","kind":"SPAN_KIND_CLIENT",
             "start_time_unix_nano":1767225600000000000,"end_time_unix_nano":1767225600005000000,
             "attributes":[{"value":{"intValue":1},"key":"http.request.resend_count"},{"value":{"stringValue":"db"},"key":"peer.service"}],
             "status":{"code":"STATUS_CODE_ERROR"}}]}],
            "resource":{"attributes":[{"key":"service.name","value":{"stringValue":"api"}},{"key":"host.name","value":{"stringValue":"h1"}}]}}]}"#;
        let (a, b) = (read(camel), read(snake));
        assert_eq!((&a.0, &b.0), (&Ok(()), &Ok(())));
        assert_eq!(a.1.len(), 1);
        let names = |r: &Reader, s: &Span| [s.service, s.instance, s.name, s.peer].map(|n| r.names.get(n).to_string());
        for (_, spans, reader) in [&a, &b] {
            let span = spans[0];
            assert_eq!((span.trace, span.id, span.parent), (0xABCD, 0xFF, Some(1)));
            assert_eq!(names(reader, &span), ["api", "h1", "GET /a", "db"].map(String::from));
            assert_eq!((span.kind, span.error, span.attempt), (Kind::Client, true, Some(2)));
            assert_eq!((span.start, span.end), (1_767_225_600_000_000_000, 1_767_225_600_005_000_000));
        }
    }

    #[test]
    fn a_broken_document_adds_nothing_and_bad_ids_are_counted() {
        let spans = r#"{"traceId":"zz","spanId":"01","name":"a"},{"traceId":"01","spanId":"","name":"b"},
            {"traceId":"01","spanId":"02","name":"c","kind":"SPAN_KIND_SERVER"}"#;
        let whole = format!(r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{spans}]}}]}}]}}"#);
        let (result, read_spans, mut reader) = read(&whole);
        assert_eq!(result, Ok(()));
        assert_eq!(read_spans.len(), 1);
        assert_eq!((read_spans[0].kind, reader.names.get(read_spans[0].service)), (Kind::Server, "unknown_service"));
        assert_eq!(reader.skipped().no_id, 2);
        let (result, _, mut reader) = read(&whole[..whole.len() - 3]);
        assert!(result.is_err());
        assert_eq!(reader.skipped().no_id, 0, "nothing of a broken line counts");
        assert_eq!(reader.finish().0.spans, 0, "nor reaches a trace");
        assert!(read(r#"{"resourceSpans":[]} trailing"#).0.is_err());
        assert!(read_document(b"{\"resourceSpans\":[\xff]}", &mut Reader::new(1)).unwrap_err().contains("UTF-8"));
    }

    #[test]
    fn ids_and_times_read_as_written() {
        use crate::formats::{hex_u128, hex_u64};
        // The protobuf JSON mapping writes ids in base64: the same bytes as the hex.
        let trace = 0x5b8efff798038103d269b633813fc60c_u128;
        assert_eq!(otlp_trace_id("5b8efff798038103d269b633813fc60c"), Some(trace));
        assert_eq!(otlp_trace_id("W47/95gDgQPSabYzgT/GDA=="), Some(trace));
        assert_eq!(otlp_trace_id("W47_95gDgQPSabYzgT_GDA"), Some(trace), "URL-safe, unpadded");
        assert_eq!(otlp_span_id("eee19b7ec3c1b174"), Some(0xeee19b7ec3c1b174));
        assert_eq!(otlp_span_id("7uGbfsPBsXQ="), Some(0xeee19b7ec3c1b174));
        assert_eq!(otlp_span_id("abc"), Some(0xabc), "short hex stays hex");
        assert_eq!((otlp_span_id("AAAA=="), otlp_trace_id("not an id")), (None, None), "base64 of the wrong length");
        assert_eq!(hex_u128("0123456789abcdefABCDEF0123456789"), Some(0x0123456789abcdefabcdef0123456789));
        assert_eq!(hex_u128("f"), Some(15));
        assert_eq!((hex_u128(""), hex_u128("0g"), hex_u128(&"1".repeat(33))), (None, None, None));
        assert_eq!(hex_u64("00112233445566778899"), Some(0x2233445566778899), "a longer id keeps its last 16 digits");
        assert_eq!((hex_u64("-1"), hex_u64(" 1")), (None, None));
        assert_eq!(decimal("9223372036854775807"), Some(i64::MAX));
        assert_eq!((decimal("9223372036854775808"), decimal("1e3"), decimal("")), (None, None, None));
        assert_eq!(Number::Text("-5".into()).integer(), Some(-5), "anything else goes to str::parse");
    }
}
