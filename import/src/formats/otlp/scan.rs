//! The fast path of the OTLP JSON reader: a scanner for the request shape OTLP
//! exporters write, reading the fields the import uses and skipping every other value
//! by matching its brackets and strings (serde_json's skipping validates every token
//! and was half the reader's time).
//!
//! It reads exactly what the serde reader would read, or gives up: any shape it does
//! not expect (an escaped string it must read, a `null` list, a float where an integer
//! goes, a field given twice, an attribute's value before its key) returns `None`, and
//! the serde reader reads the document instead — with its checks and its error
//! messages. Values the import does not read are skipped, not validated: a malformed
//! value inside a skipped one, or a raw control character in a key (which then matches
//! no key the scanner reads), is not an error here.

use std::borrow::Cow;

use memchr::memchr2;

use super::{add_span, failed, intern_resource, kind, HexId, Number, SpanAttributes, SpanFields, Status};
use crate::formats::Reader;
use crate::span::Span;

/// `None`: not a shape the scanner reads; the serde reader takes the document.
type Scan<T> = Option<T>;

/// Reads the request `text` into `spans` (names interned in `reader`), or gives up.
pub(super) fn read(text: &str, reader: &mut Reader, spans: &mut Vec<Span>) -> Scan<()> {
    let mut scanner = Scanner { text, bytes: text.as_bytes(), at: 0 };
    scanner.object(|s, key| match key {
        "resourceSpans" | "resource_spans" | "batches" => s.array(|s| s.resource(reader, spans)),
        // A wrapped request (Tempo's v2 `{"trace": …}`): the serde reader's.
        "trace" => None,
        _ => s.skip(),
    })?;
    scanner.ws();
    (scanner.at == scanner.bytes.len()).then_some(())
}

struct Scanner<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Scanner<'a> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Scan<u8> {
        self.ws();
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> Scan<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// A string without escapes, borrowed from the input, as a name to compare (a key):
    /// not checked for control characters — a key holding one matches no key the
    /// scanner reads, so its value is skipped like any unknown key's.
    fn key(&mut self) -> Scan<&'a str> {
        self.eat(b'"')?;
        let end = memchr2(b'"', b'\\', &self.bytes[self.at..])?;
        if self.bytes[self.at + end] != b'"' {
            return None;
        }
        // Both ends are at ASCII quotes: char boundaries of the (UTF-8) text.
        let key = &self.text[self.at..self.at + end];
        self.at += end + 1;
        Some(key)
    }

    /// A string whose content is kept (a name, a value): as [`Self::key`], and refused
    /// when it holds a raw control character, as JSON (and serde) refuse it.
    fn string(&mut self) -> Scan<&'a str> {
        let string = self.key()?;
        (!string.bytes().any(|b| b < 0x20)).then_some(string)
    }

    /// A hex id: a string read as `T`'s hex; one that does not parse is checked as a
    /// kept string is (it is counted as a span without an id, unless JSON refuses it).
    fn id<T: HexId>(&mut self) -> Scan<Option<T>> {
        let text = self.key()?;
        match T::from_hex(text) {
            Some(id) => Some(Some(id)),
            None => (!text.bytes().any(|b| b < 0x20)).then_some(None),
        }
    }

    /// The rest of a string whose opening quote was read, escapes and all.
    fn skip_string(&mut self) -> Scan<()> {
        loop {
            let next = memchr2(b'"', b'\\', self.bytes.get(self.at..)?)?;
            if self.bytes[self.at + next] == b'"' {
                self.at += next + 1;
                return Some(());
            }
            self.at += next + 2;
        }
    }

    /// Skips one value: a string, an object or array (by matching brackets), or a
    /// number or literal.
    fn skip(&mut self) -> Scan<()> {
        match self.peek()? {
            b'"' => {
                self.at += 1;
                self.skip_string()
            }
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    let byte = *self.bytes.get(self.at)?;
                    self.at += 1;
                    match byte {
                        b'"' => self.skip_string()?,
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                return Some(());
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {
                let start = self.at;
                while let Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'a'..=b'z' | b'E') = self.bytes.get(self.at) {
                    self.at += 1;
                }
                (self.at > start).then_some(())
            }
        }
    }

    /// Opens a container: whether it has elements (an empty one is read whole).
    fn open(&mut self, open: u8, close: u8) -> Scan<bool> {
        self.eat(open)?;
        let empty = self.peek()? == close;
        self.at += usize::from(empty);
        Some(!empty)
    }

    /// After an element: whether another follows (a comma) or the container closes.
    fn another(&mut self, close: u8) -> Scan<bool> {
        let next = self.peek()?;
        self.at += 1;
        match next {
            b',' => Some(true),
            _ if next == close => Some(false),
            _ => None,
        }
    }

    /// An object: `field` reads or skips the value of each key.
    fn object(&mut self, mut field: impl FnMut(&mut Self, &'a str) -> Scan<()>) -> Scan<()> {
        let mut more = self.open(b'{', b'}')?;
        while more {
            let key = self.key()?;
            self.eat(b':')?;
            field(self, key)?;
            more = self.another(b'}')?;
        }
        Some(())
    }

    /// An array: `element` reads each element.
    fn array(&mut self, mut element: impl FnMut(&mut Self) -> Scan<()>) -> Scan<()> {
        let mut more = self.open(b'[', b']')?;
        while more {
            element(self)?;
            more = self.another(b']')?;
        }
        Some(())
    }

    /// A number as OTLP writes it: an integer, or a string (of digits or an enum name).
    fn number(&mut self) -> Scan<Number<'a>> {
        if self.peek()? == b'"' {
            return Some(Number::Text(Cow::Borrowed(self.string()?)));
        }
        let start = self.at;
        if self.bytes.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        let digits = self.at;
        while let Some(b'0'..=b'9') = self.bytes.get(self.at) {
            self.at += 1;
        }
        // JSON writes no leading zeros (serde refuses `01`).
        if self.bytes.get(digits) == Some(&b'0') && self.at - digits > 1 {
            return None;
        }
        if let Some(b'.' | b'e' | b'E') = self.bytes.get(self.at) {
            return None;
        }
        self.text[start..self.at].parse().ok().map(Number::Integer)
    }

    /// Sets `slot` once: a field given twice is the serde reader's to refuse.
    fn once<T>(slot: &mut Option<T>, value: T) -> Scan<()> {
        slot.is_none().then(|| *slot = Some(value))
    }

    /// An `AnyValue`'s string and integer (other kinds of value skipped).
    fn any_value(&mut self) -> Scan<(Option<&'a str>, Option<Number<'a>>)> {
        let (mut string, mut int) = (None, None);
        self.object(|s, key| match key {
            "stringValue" | "string_value" => Self::once(&mut string, s.string()?),
            "intValue" | "int_value" => Self::once(&mut int, s.number()?),
            _ => s.skip(),
        })?;
        Some((string, int))
    }

    /// One `ResourceSpans`: its spans, given the resource's service and instance.
    fn resource(&mut self, reader: &mut Reader, spans: &mut Vec<Span>) -> Scan<()> {
        let first = spans.len();
        let mut at = None;
        self.object(|s, key| match key {
            "resource" => {
                // The first attribute of each key counts, as the serde reader reads them.
                let mut found: [Option<Option<&str>>; 3] = [None; 3];
                s.object(|s, key| match key {
                    "attributes" => s.array(|s| {
                        let (mut name, mut value) = (None, None);
                        s.object(|s, key| match key {
                            "key" => Self::once(&mut name, s.key()?),
                            "value" => Self::once(&mut value, s.any_value()?.0),
                            _ => s.skip(),
                        })?;
                        let keys = ["service.name", "service.instance.id", "host.name"];
                        if let Some(slot) = keys.iter().position(|k| Some(*k) == name) {
                            found[slot].get_or_insert(value.flatten());
                        }
                        name.map(|_| ())
                    }),
                    _ => s.skip(),
                })?;
                let [service, instance, host] = found.map(Option::flatten);
                Self::once(&mut at, intern_resource(reader, service, instance.or(host)))
            }
            "scopeSpans" | "scope_spans" | "instrumentationLibrarySpans" => s.array(|s| {
                s.object(|s, key| match key {
                    "spans" => s.array(|s| s.span(reader, spans)),
                    _ => s.skip(),
                })
            }),
            _ => s.skip(),
        })?;
        let (service, instance) = match at {
            Some(at) => at,
            None => intern_resource(reader, None, None),
        };
        for span in &mut spans[first..] {
            span.service = service;
            span.instance = instance;
        }
        Some(())
    }

    /// One span.
    fn span(&mut self, reader: &mut Reader, spans: &mut Vec<Span>) -> Scan<()> {
        let (mut trace, mut id, mut parent, mut name) = (None, None, None, None);
        let (mut kind_of, mut start, mut end, mut attributes, mut status) = (None, None, None, None, None);
        self.object(|s, key| match key {
            "traceId" | "trace_id" => Self::once(&mut trace, s.id()?),
            "spanId" | "span_id" => Self::once(&mut id, s.id()?),
            "parentSpanId" | "parent_span_id" => Self::once(&mut parent, s.id()?),
            "name" => Self::once(&mut name, s.string()?),
            "kind" => Self::once(&mut kind_of, kind(Some(&s.number()?))),
            "startTimeUnixNano" | "start_time_unix_nano" => Self::once(&mut start, s.number()?.integer()),
            "endTimeUnixNano" | "end_time_unix_nano" => Self::once(&mut end, s.number()?.integer()),
            "attributes" => Self::once(&mut attributes, s.attributes()?),
            "status" => {
                let mut code = None;
                s.object(|s, key| match key {
                    "code" => Self::once(&mut code, s.number()?),
                    _ => s.skip(),
                })?;
                Self::once(&mut status, failed(Some(&Status { code })))
            }
            _ => s.skip(),
        })?;
        let attributes = attributes.unwrap_or_default();
        let fields = SpanFields {
            trace: trace.flatten(),
            id: id.flatten(),
            parent: parent.flatten(),
            name: name.unwrap_or(""),
            kind: kind_of.unwrap_or(kind(None)),
            start: start.flatten(),
            end: end.flatten(),
            attributes: &attributes,
            error: status.unwrap_or(false),
        };
        add_span(reader, spans, fields);
        Some(())
    }

    /// A span's attributes: the three keys the import reads, each value read after its
    /// key (a value first is left to the serde reader).
    fn attributes(&mut self) -> Scan<SpanAttributes<'a>> {
        let mut read = SpanAttributes::default();
        self.array(|s| {
            let (mut key, mut value) = (None, None);
            s.object(|s, field| match field {
                "key" => Self::once(&mut key, s.key()?),
                "value" => match key {
                    Some(k) if super::reads_key(k) => Self::once(&mut value, s.any_value()?),
                    Some(_) => s.skip(),
                    None => None,
                },
                _ => s.skip(),
            })?;
            let Some((string, int)) = value else { return Some(()) };
            if let Some(key) = key {
                read.read(key, string.map(Cow::Borrowed), int.as_ref());
            }
            Some(())
        })?;
        Some(read)
    }
}
