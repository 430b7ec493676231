//! TOML values into typed structs, with the failing field named by its dotted
//! path, and values shown the way a user wrote them.

use serde::de::DeserializeOwned;

use super::error::{Error, Result};

/// Deserialises `value` into `T`, reporting the failing field by its dotted path.
pub fn typed<T: DeserializeOwned>(value: toml::Value) -> Result<T> {
    typed_at("", value)
}

/// Like [`typed`] for a section found at `prefix`.
pub(crate) fn typed_at<T: DeserializeOwned>(prefix: &str, value: toml::Value) -> Result<T> {
    serde_path_to_error::deserialize(value).map_err(|error| {
        let inner = error.path().to_string();
        let path = match (prefix.is_empty(), inner.as_str()) {
            (true, _) => inner.clone(),
            (false, ".") => prefix.to_string(),
            (false, _) => format!("{prefix}.{inner}"),
        };
        let path = if path == "." { "top level".to_string() } else { path };
        // toml's message ends with its own "in `key`" line; the path above says it better.
        let message = error.into_inner().to_string();
        let message = message.split("\nin `").next().unwrap_or_default().trim_end();
        Error::bad_input(format!("scenario field {path}: {}", plain_words(message)))
    })
}

/// serde's messages name Rust types (`expected u32`, `struct QueueConfig`); say
/// what a user writes instead.
fn plain_words(message: &str) -> String {
    let mut text = message.to_string();
    for (rust, words) in [
        ("u8", "a whole number from 0 to 255"),
        ("u16", "a whole number from 0 to 65535"),
        ("u32", "a whole number from 0 to 4294967295"),
        ("u64", "a whole number of at least 0"),
        ("usize", "a whole number of at least 0"),
        ("i64", "a whole number"),
        ("f64", "a number"),
        ("a sequence", "a list"),
        ("a map", "a table"),
    ] {
        text = text.replace(&format!("expected {rust}"), &format!("expected {words}"));
    }
    // `struct QueueConfig`, `struct variant …`: a table.
    while let Some(start) = text.find("struct ") {
        let end =
            text[start + 7..].find(|c: char| !(c.is_alphanumeric() || c == '_')).map_or(text.len(), |e| start + 7 + e);
        text.replace_range(start..end, "a table");
    }
    text
}

/// Parses scenario text. `origin` names it in messages (a path or `built-in x`).
pub fn parse_text(text: &str, origin: &str) -> Result<toml::Table> {
    text.parse::<toml::Table>()
        .map_err(|error| Error::bad_input(format!("{origin} is not valid TOML: {}", error.to_string().trim_end())))
}

/// A value as it would be written in TOML, for messages and column values.
pub fn describe(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

/// A struct serialised as a TOML table (for `stampede show` and fixture overrides).
pub(crate) fn to_table<T: serde::Serialize>(value: &T) -> toml::Table {
    match toml::Value::try_from(value).expect("configurations serialise") {
        toml::Value::Table(table) => table,
        _ => unreachable!("a struct serialises to a table"),
    }
}
