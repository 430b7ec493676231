//! Server-sent events read structurally (the WHATWG HTML standard's
//! `text/event-stream`, §9.2.6), and the provider error events found in them: only an
//! event whose type is `error`, or whose data is a JSON object that says it is an
//! error (Anthropic's `{"type": "error", …}`, OpenAI's `{"error": {…}}` at its top
//! level), is one. Text inside a delta — an assistant explaining SSE, writing
//! `event: error` in its answer — is data, never an error.
//!
//! Stateless per frame: each frame is read as whole events (a frame ends the event it
//! holds). No allocation beyond an event's data lines joined, and no JSON parser: a
//! small scanner reads an object's top-level fields and skips nested values.

use stampede_policy::classify::Outcome;

/// One event: its type (`message` when the stream names none) and its data lines,
/// joined by `\n`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event` field's last value, or `message`.
    pub event: String,
    /// The `data` lines, joined by `\n`.
    pub data: String,
}

/// The events of `text`: lines end with CRLF, LF or CR; a blank line dispatches the
/// event; `:` starts a comment; a field is `name: value` (one leading space dropped) or
/// a bare `name`; `event` sets the type, `data` adds a line; the rest is ignored. An
/// event with no data is not dispatched (as the standard says); the frame's end
/// dispatches the last one.
pub fn events(text: &str) -> Vec<SseEvent> {
    let mut out = Vec::new();
    let (mut event, mut data, mut has_data) = (String::new(), String::new(), false);
    let mut dispatch = |event: &mut String, data: &mut String, has_data: &mut bool| {
        if *has_data {
            let kind = if event.is_empty() { "message".to_string() } else { std::mem::take(event) };
            out.push(SseEvent { event: kind, data: std::mem::take(data) });
        }
        event.clear();
        data.clear();
        *has_data = false;
    };
    for line in text.split("\r\n").flat_map(|l| l.split(['\n', '\r'])) {
        if line.is_empty() {
            dispatch(&mut event, &mut data, &mut has_data);
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (name, value) = match line.split_once(':') {
            Some((name, value)) => (name, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match name {
            "event" => event = value.to_string(),
            "data" => {
                if has_data {
                    data.push('\n');
                }
                data.push_str(value);
                has_data = true;
            }
            _ => {}
        }
    }
    dispatch(&mut event, &mut data, &mut has_data);
    out
}

/// The provider error an event carries, if it is one: an `error` event, or data whose
/// top-level object has `"type": "error"` or an `"error"` that is not null. Its kind
/// comes from the error object's `type` and `code`: `overloaded…` an overload,
/// `rate_limit…` a rate limit, anything else a server error.
pub fn provider_error(event: &SseEvent) -> Option<Outcome> {
    let fields = object_fields(&event.data);
    let field = |name: &str| fields.as_ref()?.iter().find(|(key, _)| key == name).map(|(_, value)| *value);
    let typed_error = field("type").and_then(string_value).as_deref() == Some("error");
    let error_object = field("error").filter(|value| value.trim() != "null");
    if !(event.event == "error" || typed_error || error_object.is_some()) {
        return None;
    }
    let kinds: Vec<String> = error_object
        .and_then(object_fields)
        .into_iter()
        .flatten()
        .filter(|(key, _)| key == "type" || key == "code")
        .filter_map(|(_, value)| string_value(value))
        .collect();
    let said = |what: &str| kinds.iter().any(|kind| kind.contains(what));
    Some(if said("overloaded") {
        Outcome::Overloaded
    } else if said("rate_limit") {
        Outcome::RateLimited
    } else {
        Outcome::ServerError
    })
}

fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while bytes.get(at).is_some_and(|b| b.is_ascii_whitespace()) {
        at += 1;
    }
    at
}

/// The end (one past the closing quote) of the JSON string starting at `at`.
fn string_end(bytes: &[u8], at: usize) -> Option<usize> {
    let mut i = at + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// The end of the JSON value starting at `at` (strings, nested objects and arrays
/// skipped whole; a scalar runs to the next delimiter).
fn value_end(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes.get(at)? {
        b'"' => string_end(bytes, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            while i < bytes.len() {
                match bytes[i] {
                    b'"' => {
                        i = string_end(bytes, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => Some(
            (at..bytes.len())
                .find(|&i| matches!(bytes[i], b',' | b'}' | b']') || bytes[i].is_ascii_whitespace())
                .unwrap_or(bytes.len()),
        ),
    }
}

/// A JSON string's text (the common escapes decoded; `\u` kept as written), or `None`
/// for any other value.
fn string_value(raw: &str) -> Option<String> {
    let inner = raw.trim().strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some(other) => out.push(other),
            None => {}
        }
    }
    Some(out)
}

/// The top-level fields of the JSON object `text`, as (key, raw value); `None` when
/// `text` is not one.
fn object_fields(text: &str) -> Option<Vec<(String, &str)>> {
    let bytes = text.as_bytes();
    let mut at = skip_space(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    at = skip_space(bytes, at + 1);
    let mut fields = Vec::new();
    if bytes.get(at) == Some(&b'}') {
        return Some(fields);
    }
    loop {
        if bytes.get(at) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(bytes, at)?;
        let key = string_value(&text[at..key_end])?;
        at = skip_space(bytes, key_end);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        at = skip_space(bytes, at + 1);
        let end = value_end(bytes, at)?;
        fields.push((key, &text[at..end]));
        at = skip_space(bytes, end);
        match bytes.get(at)? {
            b',' => at = skip_space(bytes, at + 1),
            b'}' => return Some(fields),
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_follow_the_event_stream_format() {
        let text = ": a comment\r\nevent: content_block_delta\r\ndata: {\"a\":1}\r\n\r\ndata: one\ndata:two\n\nevent: ping\n\n\
                    data: last";
        let got = events(text);
        assert_eq!(
            got,
            vec![
                SseEvent { event: "content_block_delta".into(), data: "{\"a\":1}".into() },
                SseEvent { event: "message".into(), data: "one\ntwo".into() },
                SseEvent { event: "message".into(), data: "last".into() },
            ],
            "a ping with no data is not dispatched; the frame's end dispatches the last"
        );
    }

    #[test]
    fn only_error_events_and_error_objects_are_errors() {
        let error = |text: &str| events(text).iter().find_map(provider_error);
        let anthropic = "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \
                         \"message\": \"Overloaded\"}}\n\n";
        assert_eq!(error(anthropic), Some(Outcome::Overloaded));
        let limited = "data: {\"error\": {\"message\": \"slow down\", \"type\": \"requests\", \"code\": \
                       \"rate_limit_exceeded\"}}\n\n";
        assert_eq!(error(limited), Some(Outcome::RateLimited));
        assert_eq!(error("data: {\"error\": {\"type\": \"server_error\"}}\n\n"), Some(Outcome::ServerError));
        // An answer that talks about SSE errors is an answer.
        let delta = "event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"delta\": {\"type\": \
                     \"text_delta\", \"text\": \"send event: error then data: {\\\"type\\\":\\\"error\\\"} and \
                     overloaded_error\"}}\n\n";
        assert_eq!(error(delta), None);
        let openai =
            "data: {\"choices\": [{\"delta\": {\"content\": \"an \\\"error\\\": rate_limit\"}}], \"error\": null}\n\n";
        assert_eq!(error(openai), None);
        assert_eq!(error("data: [DONE]\n\n"), None);
    }
}
