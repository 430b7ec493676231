//! The trace formats `stampede import` reads, each into [`Span`]s: detection from a
//! file's first bytes, and the reading loop that streams a file through a [`Reader`].
//!
//! Line-oriented files (OTLP JSON lines, Alibaba's CSV) are read a line at a time; a
//! document that is one JSON value (a Jaeger or Zipkin export, an OTLP request on one
//! line) is read whole, up to [`MAX_DOCUMENT_BYTES`].

pub mod alibaba;
pub mod jaeger;
pub mod otlp;
pub mod zipkin;

use std::io::{BufRead, Read};
use std::path::Path;

use stampede_scenario::base::error::{Error, Result};

use crate::assemble::Assembler;
use crate::infer::Model;
use crate::span::{Names, Skipped, Span};

/// The largest single JSON document (or line) read: a bigger export should be written
/// as JSON lines (OTLP) or split.
pub const MAX_DOCUMENT_BYTES: u64 = 1 << 30;

/// A trace format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// OTLP JSON (`ExportTraceServiceRequest`s, one document or JSON lines).
    OtlpJson,
    /// OTLP protobuf (one `ExportTraceServiceRequest`, or the Collector's file
    /// exporter's length-prefixed messages).
    OtlpProto,
    /// Jaeger's JSON (`{"data": [trace, …]}`, the UI's download and the query API's answer).
    JaegerJson,
    /// Zipkin v2 JSON (an array of spans).
    ZipkinJson,
    /// Alibaba's microservices trace `MSCallGraph` CSV (v2021 or v2022 columns).
    AlibabaCsv,
}

impl Format {
    /// The names `--format` takes.
    pub const NAMES: [&'static str; 5] = ["otlp-json", "otlp-proto", "jaeger-json", "zipkin-json", "alibaba-csv"];

    /// The format named `name`.
    pub fn parse(name: &str) -> Result<Format> {
        match name {
            "otlp-json" => Ok(Format::OtlpJson),
            "otlp-proto" => Ok(Format::OtlpProto),
            "jaeger-json" => Ok(Format::JaegerJson),
            "zipkin-json" => Ok(Format::ZipkinJson),
            "alibaba-csv" => Ok(Format::AlibabaCsv),
            other => Err(Error::bad_input(format!(
                "--format {other}: not a trace format stampede reads; it reads {}",
                Format::NAMES.join(", ")
            ))),
        }
    }

    /// The name `--format` takes.
    pub fn name(self) -> &'static str {
        match self {
            Format::OtlpJson => "otlp-json",
            Format::OtlpProto => "otlp-proto",
            Format::JaegerJson => "jaeger-json",
            Format::ZipkinJson => "zipkin-json",
            Format::AlibabaCsv => "alibaba-csv",
        }
    }

    /// The format of a file that starts with `head`, if it is one stampede reads.
    pub fn detect(head: &[u8]) -> Option<Format> {
        if otlp::proto::Framing::detect(head).is_some() {
            return Some(Format::OtlpProto);
        }
        let text = String::from_utf8_lossy(head);
        let trimmed = text.trim_start();
        if trimmed.starts_with('{') || trimmed.starts_with('[') {
            let tempo = text.contains("\"batches\"")
                && (text.contains("scopeSpans") || text.contains("instrumentationLibrarySpans"));
            if text.contains("resourceSpans") || text.contains("resource_spans") || tempo {
                return Some(Format::OtlpJson);
            }
            if text.contains("\"traceID\"") || text.contains("\"processes\"") {
                return Some(Format::JaegerJson);
            }
            if trimmed.starts_with('[') && (text.contains("\"traceId\"") || trimmed[1..].trim_start().starts_with(']'))
            {
                return Some(Format::ZipkinJson);
            }
            return None;
        }
        let header = trimmed.lines().next().unwrap_or("").to_ascii_lowercase();
        (header.contains("traceid") && header.contains("rpc") && header.contains("dm")).then_some(Format::AlibabaCsv)
    }
}

/// Where spans go as they are read: names interned, spans assembled into traces,
/// complete traces analysed.
#[derive(Debug, Default)]
pub struct Reader {
    /// Interned names.
    pub names: Names,
    assembler: Assembler,
    /// What the traces say.
    pub model: Model,
    /// A document's spans until it has parsed whole (kept between documents).
    pub(crate) document: Vec<Span>,
}

impl Reader {
    /// A reader whose load buckets are `bucket_ns` wide.
    pub fn new(bucket_ns: i64) -> Self {
        Reader { model: Model::new(bucket_ns), ..Reader::default() }
    }

    /// Adds one span (a span that ends before it starts is clipped and counted).
    pub fn push(&mut self, mut span: Span) {
        if span.end < span.start {
            self.model.skipped.negative += 1;
            span.end = span.start;
        }
        self.assembler.push(span, &mut self.model, &mut self.names);
    }

    /// What was skipped so far.
    pub fn skipped(&mut self) -> &mut Skipped {
        &mut self.model.skipped
    }

    /// The input ended: the open traces are complete (every span read is in one).
    pub fn finish(mut self) -> (Model, Names) {
        let assembler = std::mem::take(&mut self.assembler);
        assembler.finish(&mut self.model, &mut self.names);
        (self.model, self.names)
    }
}

/// Reads `path` in `format` into `reader`. Records a reader cannot read are counted;
/// a file none of whose records can be read is an error naming the first problem.
pub fn read_file(path: &Path, format: Format, reader: &mut Reader) -> Result<()> {
    read_file_within(path, format, reader, MAX_DOCUMENT_BYTES)
}

/// [`read_file`] with `max_document` bytes the most a record (a line, a JSON document,
/// a protobuf message or frame) may hold: memory is bounded by it and by the open
/// traces, whatever the file's size. The tests pass a small bound to reach every
/// refusal without writing a gibibyte.
fn read_file_within(path: &Path, format: Format, reader: &mut Reader, max_document: u64) -> Result<()> {
    let shown = path.display();
    let file = std::fs::File::open(path).map_err(|e| Error::bad_input(format!("{shown}: cannot open: {e}")))?;
    let mut source =
        Source { input: std::io::BufReader::with_capacity(1 << 20, file), shown: shown.to_string(), max_document };
    let mut first_error: Option<String> = None;
    let (mut records, mut failures) = (0u64, 0u64);
    let mut note = |result: std::result::Result<(), String>, what: &str, reader: &mut Reader| {
        records += 1;
        if let Err(message) = result {
            failures += 1;
            reader.skipped().unreadable += 1;
            first_error.get_or_insert_with(|| format!("{what}: {message}"));
        }
    };
    match format {
        Format::OtlpJson | Format::AlibabaCsv => read_lines(&mut source, format, reader, &mut note)?,
        Format::OtlpProto => read_protobuf(&mut source, reader, &mut note)?,
        Format::JaegerJson | Format::ZipkinJson => read_document(&mut source, format, reader, &mut note)?,
    }
    if records > 0 && failures == records {
        return Err(Error::bad_input(format!(
            "{shown}: not readable as {}: {}",
            format.name(),
            first_error.unwrap_or_default()
        )));
    }
    Ok(())
}

/// A trace file open for reading: its input, its name as the errors say it, and the
/// most a record may hold (memory is bounded by it, whatever the file's size).
struct Source {
    input: std::io::BufReader<std::fs::File>,
    shown: String,
    max_document: u64,
}

/// An OTLP JSON or Alibaba CSV file, record by record. A record is a line, or for
/// OTLP whose first document spans lines (pretty printed, as the spec's examples and
/// `jq` write it), every line until the document's outermost bracket closes. JSON
/// lines stay a line each: a damaged line then costs that line, not the lines after it.
fn read_lines(source: &mut Source, format: Format, reader: &mut Reader, note: &mut Note) -> Result<()> {
    let (input, shown, max_document) = (&mut source.input, source.shown.as_str(), source.max_document);
    let mut record = Vec::new();
    let (mut number, mut first_line) = (0u64, 0u64);
    let mut columns = None;
    let mut depth = JsonDepth::default();
    let mut pretty: Option<bool> = None;
    loop {
        let before = record.len();
        let read = (&mut *input)
            .take(max_document + 1 - before as u64)
            .read_until(b'\n', &mut record)
            .map_err(|e| Error::bad_input(format!("{shown}: cannot read: {e}")))?;
        if read > 0 {
            number += 1;
        }
        if record.len() as u64 > max_document {
            // The record starts at this line when it is the line's first read
            // (the last record's line is still in `first_line`).
            let starts = if before == 0 { number } else { first_line };
            return Err(Error::bad_input(format!(
                "{shown}: the record at line {} is over {}: write the export as JSON lines (one request a \
                 line)",
                starts.max(1),
                size_text(max_document)
            )));
        }
        if before == 0 {
            if read > 0 && record.iter().all(u8::is_ascii_whitespace) {
                record.clear();
                continue;
            }
            first_line = number;
        }
        if format == Format::OtlpJson && pretty != Some(false) && read > 0 {
            depth.feed(&record[before..]);
            let open = !depth.closed();
            pretty.get_or_insert(open);
            if open {
                continue;
            }
        }
        if record.is_empty() {
            break;
        }
        let result = match format {
            Format::OtlpJson => otlp::read_document(&record, reader),
            _ => alibaba::read_line(&record, &mut columns, reader),
        };
        let at =
            if number > first_line { format!("lines {first_line}-{number}") } else { format!("line {first_line}") };
        if result != Err(alibaba::HEADER.to_string()) {
            note(result, &at, reader);
        }
        record.clear();
        depth = JsonDepth::default();
        if read == 0 {
            break;
        }
    }
    Ok(())
}

/// A Jaeger or Zipkin file: one JSON document, read whole (at most `max_document`).
fn read_document(source: &mut Source, format: Format, reader: &mut Reader, note: &mut Note) -> Result<()> {
    let (input, shown, max_document) = (&mut source.input, source.shown.as_str(), source.max_document);
    let mut text = Vec::new();
    (&mut *input)
        .take(max_document + 1)
        .read_to_end(&mut text)
        .map_err(|e| Error::bad_input(format!("{shown}: cannot read: {e}")))?;
    if text.len() as u64 > max_document {
        return Err(Error::bad_input(format!(
            "{shown}: a {} document over {}: export fewer traces per file",
            format.name(),
            size_text(max_document)
        )));
    }
    let result = match format {
        Format::JaegerJson => jaeger::read_document(&text, reader),
        _ => zipkin::read_document(&text, reader),
    };
    note(result, "the document", reader);
    Ok(())
}

/// `bytes` as the refusals say it: whole GiB, MiB or KiB where it is one, else bytes.
fn size_text(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// Counts one record read (at `what`: a line, a frame) and what went wrong with it.
type Note<'a> = dyn FnMut(std::result::Result<(), String>, &str, &mut Reader) + 'a;

/// Reads OTLP protobuf from `input`: one message, or the Collector's frames (a
/// big-endian u32 byte count before each message), each handed to `note` as a record.
fn read_protobuf(source: &mut Source, reader: &mut Reader, note: &mut Note) -> Result<()> {
    let (input, shown, max_document) = (&mut source.input, source.shown.as_str(), source.max_document);
    let io = |e: std::io::Error| Error::bad_input(format!("{shown}: cannot read: {e}"));
    // The framing from the first bytes, left in the buffer.
    let framing = otlp::proto::Framing::detect(input.fill_buf().map_err(io)?);
    if framing != Some(otlp::proto::Framing::LengthPrefixed) {
        let mut message = Vec::new();
        input.take(max_document + 1).read_to_end(&mut message).map_err(io)?;
        if message.len() as u64 > max_document {
            return Err(Error::bad_input(format!(
                "{shown}: one protobuf message over {}: export it in pieces",
                size_text(max_document)
            )));
        }
        note(otlp::proto::read_message(&message, reader), "the message", reader);
        return Ok(());
    }
    let mut body = Vec::new();
    for number in 1u64.. {
        let mut count = [0u8; 4];
        let got = input.take(4).read(&mut count).map_err(io)?;
        let got = got + if got > 0 && got < 4 { input.take(4).read(&mut count[got..]).map_err(io)? } else { 0 };
        if got == 0 {
            break;
        }
        let frame = format!("frame {number}");
        let length = u64::from(u32::from_be_bytes(count));
        if got < 4 || length > max_document {
            note(Err("the file ends inside a frame's byte count".into()), &frame, reader);
            break;
        }
        body.clear();
        input.take(length).read_to_end(&mut body).map_err(io)?;
        if (body.len() as u64) < length {
            let message = format!("the file ends {} bytes into a {length}-byte message", body.len());
            note(Err(message), &frame, reader);
            break;
        }
        note(otlp::proto::read_message(&body, reader), &frame, reader);
    }
    Ok(())
}

/// Each byte's value as a hex digit, or 0xFF.
const HEX: [u8; 256] = {
    let mut table = [0xFF; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = match b as u8 {
            d @ b'0'..=b'9' => d - b'0',
            d @ b'a'..=b'f' => d - b'a' + 10,
            d @ b'A'..=b'F' => d - b'A' + 10,
            _ => 0xFF,
        };
        b += 1;
    }
    table
};

/// Up to 16 hex digits as a u64.
fn hex_fold(digits: &[u8]) -> Option<u64> {
    let mut n = 0u64;
    let mut bad = 0u8;
    for &b in digits {
        let d = HEX[b as usize];
        bad |= d;
        n = n << 4 | u64::from(d & 0x0F);
    }
    // Every digit was valid when no 0xFF was or-ed in (valid digits are ≤ 0x0F).
    (bad & 0xF0 == 0).then_some(n)
}

/// A hex id of up to 32 digits (a 16-byte trace id).
pub fn hex_u128(text: &str) -> Option<u128> {
    let bytes = text.as_bytes();
    if bytes.is_empty() || bytes.len() > 32 {
        return None;
    }
    let split = bytes.len().saturating_sub(16);
    let (high, low) = (hex_fold(&bytes[..split])?, hex_fold(&bytes[split..])?);
    Some(u128::from(high) << 64 | u128::from(low))
}

/// A hex id of up to 16 digits (an 8-byte span id); a longer one keeps its last 16.
pub fn hex_u64(text: &str) -> Option<u64> {
    if text.is_empty() {
        return None;
    }
    hex_fold(&text.as_bytes()[text.len().saturating_sub(16)..])
}

/// An OTLP trace id: 32 hex digits (OTLP/JSON), or 16 bytes in base64 (the protobuf
/// JSON mapping, as Grafana Tempo's API and some SDKs write it); a shorter hex id is
/// read as hex.
pub fn otlp_trace_id(text: &str) -> Option<u128> {
    if text.len() == 32 {
        return hex_u128(text);
    }
    base64_id(text, 16).or_else(|| hex_u128(text))
}

/// An OTLP span id: 16 hex digits, or 8 bytes in base64.
pub fn otlp_span_id(text: &str) -> Option<u64> {
    if text.len() == 16 {
        return hex_u64(text);
    }
    base64_id(text, 8).map(|id| id as u64).or_else(|| hex_u64(text))
}

/// `text` as base64 (standard or URL-safe alphabet, padded or not) of exactly `bytes`
/// bytes, big-endian.
fn base64_id(text: &str, bytes: usize) -> Option<u128> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    use base64::Engine;
    let url = text.contains(['-', '_']);
    let engine = match (url, text.ends_with('=')) {
        (false, true) => &STANDARD,
        (false, false) => &STANDARD_NO_PAD,
        (true, true) => &URL_SAFE,
        (true, false) => &URL_SAFE_NO_PAD,
    };
    let mut out = [0u8; 24];
    let decoded = engine.decode_slice(text, &mut out).ok()?;
    (decoded == bytes).then(|| out[..decoded].iter().fold(0u128, |id, &b| id << 8 | u128::from(b)))
}

/// How well an attribute names the service a client span calls (0 best), for the
/// attributes that do: `peer.service` (the instrumentation's own name for it), then
/// the host it called (`server.address`, the older `net.peer.name`, `http.host`), then
/// the kind of system (`db.system`, `messaging.system`, `rpc.service`). Without any, the
/// callee is read from the span's name.
pub fn peer_rank(key: &str) -> Option<u8> {
    PEER_KEYS.iter().position(|k| *k == key).map(|rank| rank as u8)
}

/// The attributes that name a client span's callee, best first (see [`peer_rank`]).
pub const PEER_KEYS: [&str; 7] =
    ["peer.service", "server.address", "net.peer.name", "http.host", "rpc.service", "db.system", "messaging.system"];

/// The best-ranked peer of `candidates` (key, value) pairs.
pub fn best_peer<'a>(candidates: impl IntoIterator<Item = (&'a str, &'a str)>) -> Option<&'a str> {
    candidates
        .into_iter()
        .filter(|(_, value)| !value.is_empty())
        .filter_map(|(key, value)| Some((peer_rank(key)?, value)))
        .min_by_key(|(rank, _)| *rank)
        .map(|(_, value)| value)
}

/// Where a JSON value that spans lines ends: brackets counted outside strings. A
/// pretty-printed document is read until its outermost bracket closes.
#[derive(Clone, Copy, Debug, Default)]
pub struct JsonDepth {
    depth: i64,
    in_string: bool,
    escaped: bool,
}

impl JsonDepth {
    /// Counts the brackets of the next bytes.
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.in_string {
                match (self.escaped, b) {
                    (true, _) => self.escaped = false,
                    (false, b'\\') => self.escaped = true,
                    (false, b'"') => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => self.depth -= 1,
                _ => {}
            }
        }
    }

    /// Every bracket opened so far is closed (or more closed than opened: not JSON).
    pub fn closed(&self) -> bool {
        self.depth <= 0 && !self.in_string
    }
}

/// The attempt a span says it was: `stampede.attempt`, or a resend count plus one.
pub fn attempt_from(attempt: Option<i64>, resend_count: Option<i64>) -> Option<u32> {
    attempt.or(resend_count.map(|r| r + 1)).and_then(|a| u32::try_from(a).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `text` written to a file as `format`, with records of at most `max` bytes.
    fn read(text: &[u8], format: Format, max: u64) -> (Result<()>, Reader) {
        let dir = std::env::temp_dir().join(format!("stampede-formats-{}-{:?}", std::process::id(), format));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("input");
        std::fs::write(&path, text).unwrap();
        let mut reader = Reader::new(60_000_000_000);
        let result = read_file_within(&path, format, &mut reader, max);
        let _ = std::fs::remove_dir_all(&dir);
        (result, reader)
    }

    /// An OTLP request with one server span of trace `trace`, on one line.
    fn otlp_line(trace: u64) -> String {
        format!(
            "{{\"resourceSpans\":[{{\"resource\":{{\"attributes\":[{{\"key\":\"service.name\",\"value\":\
             {{\"stringValue\":\"api\"}}}}]}},\"scopeSpans\":[{{\"spans\":[{{\"traceId\":\"{trace:032x}\",\
             \"spanId\":\"{trace:016x}\",\"name\":\"get\",\"kind\":2,\"startTimeUnixNano\":\"{}\",\
             \"endTimeUnixNano\":\"{}\"}}]}}]}}]}}\n",
            1_000_000_000 * trace,
            1_000_000_000 * trace + 5_000_000
        )
    }

    #[test]
    fn every_record_is_held_to_the_bound_and_a_longer_one_is_refused_with_its_size() {
        let line = otlp_line(1);
        let bound = line.len() as u64 + 16;
        // JSON lines under the bound stream through, however many.
        let many: String = (1..=200).map(otlp_line).collect();
        let (result, reader) = read(many.as_bytes(), Format::OtlpJson, bound);
        assert!(result.is_ok(), "{result:?}");
        assert_eq!(reader.finish().0.spans, 200);
        // One line over it is refused, naming the line and the bound.
        let long = format!("{}{}", otlp_line(1), " ".repeat(64) + &otlp_line(2));
        let joined = long.replace('\n', "");
        let (result, _) = read(format!("{}{joined}\n", otlp_line(3)).as_bytes(), Format::OtlpJson, bound);
        let message = result.unwrap_err().to_string();
        assert!(message.contains("line 2 is over") && message.contains(&format!("{bound} bytes")), "{message}");
        // A pretty-printed document that never closes stops at the bound.
        let open = format!("{{\n\"resourceSpans\": [\n{}", "  \n".repeat(4096));
        let (result, _) = read(open.as_bytes(), Format::OtlpJson, 4 << 10);
        let message = result.unwrap_err().to_string();
        assert!(message.contains("line 1 is over 4 KiB") && message.contains("JSON lines"), "{message}");
        // A Jaeger or Zipkin document is read whole: over the bound, refused by size.
        for format in [Format::JaegerJson, Format::ZipkinJson] {
            let (result, _) = read(" ".repeat(2 << 20).as_bytes(), format, 1 << 20);
            let message = result.unwrap_err().to_string();
            assert!(message.contains("document over 1 MiB") && message.contains("fewer traces"), "{message}");
        }
        // One protobuf message, and a Collector frame that says it is longer.
        let (result, _) = read(&[0x0a; 3000], Format::OtlpProto, 1 << 10);
        let message = result.unwrap_err().to_string();
        assert!(message.contains("message over 1 KiB"), "{message}");
        assert_eq!(size_text(1 << 30), "1 GiB");
        assert_eq!(size_text(1000), "1000 bytes");
    }
}
