//! The app's pages, one module each: its HTML and its JSON API.

pub mod home;
pub mod learn;
pub mod results;
pub mod ring;
pub mod sandbox;

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::llm::RunError;

/// The navigation: (path, name), in order.
pub const PAGES: &[(&str, &str)] =
    &[("/learn", "Learn"), ("/sandbox", "Sandbox"), ("/ring", "Ring explorer"), ("/results", "Results")];

/// The LLM pages' shared stylesheet and drawing code (timeline, histogram, series, cards).
const LLM_STYLE: &str = include_str!("../../assets/llm.css");
const LLM_SCRIPT: &str = include_str!("../../assets/llm.js");

/// The `<head>` additions of an LLM page: its styles and the shared script, inline.
pub fn llm_assets() -> String {
    format!("<style>{LLM_STYLE}</style><script>{LLM_SCRIPT}</script>")
}

/// A script asset.
pub async fn script(text: &'static str) -> Response {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], text).into_response()
}

/// Runs `work` off the async workers and answers its JSON, or the error: 400 (bad
/// input, the message naming the field), 409 (replaced by a newer run), 500.
pub async fn blocking_run(work: impl FnOnce() -> Result<Value, RunError> + Send + 'static) -> Response {
    let result = tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| Err(RunError::Failed(format!("the run panicked: {e}"))));
    match result {
        Ok(value) => Json(value).into_response(),
        Err(RunError::BadInput(message)) => (StatusCode::BAD_REQUEST, Json(json!({"error": message}))).into_response(),
        Err(RunError::Cancelled) => {
            (StatusCode::CONFLICT, Json(json!({"error": "cancelled: a newer run replaced it"}))).into_response()
        }
        Err(RunError::Failed(message)) => {
            (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({"error": message}))).into_response()
        }
    }
}
