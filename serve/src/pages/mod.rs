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

/// An error a JSON API answers with: its status and message (`{"error": …}`).
pub trait ApiError: Send + 'static {
    fn status_and_message(self) -> (StatusCode, String);
    /// Seconds to wait before retrying, for a refusal that is only for now (503).
    fn retry_after_s(&self) -> Option<u64> {
        None
    }
    /// The error for work that panicked.
    fn failed(message: String) -> Self;
}

impl ApiError for RunError {
    fn status_and_message(self) -> (StatusCode, String) {
        match self {
            RunError::BadInput(message) => (StatusCode::BAD_REQUEST, message),
            RunError::Cancelled => (StatusCode::CONFLICT, "cancelled: a newer run replaced it".into()),
            RunError::Failed(message) => (StatusCode::INTERNAL_SERVER_ERROR, message),
            RunError::Busy { retry_after_s } => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("the server is busy: every simulation slot is taken and the queue is full; retry in {retry_after_s} s"),
            ),
        }
    }
    fn retry_after_s(&self) -> Option<u64> {
        match self {
            RunError::Busy { retry_after_s } => Some(*retry_after_s),
            _ => None,
        }
    }
    fn failed(message: String) -> Self {
        RunError::Failed(message)
    }
}

impl ApiError for stampede_ring::JournalError {
    fn status_and_message(self) -> (StatusCode, String) {
        match self {
            Self::BadInput(message) => (StatusCode::BAD_REQUEST, message),
            Self::Io(message) => (StatusCode::INTERNAL_SERVER_ERROR, message),
        }
    }
    fn failed(message: String) -> Self {
        Self::Io(message)
    }
}

/// Runs `work` off the async workers (SQLite, a simulation) and answers its JSON, or
/// its error: 400 for bad input (the message naming the field), 409 for a run a newer
/// one replaced, 500 otherwise.
pub async fn blocking_json<E: ApiError>(work: impl FnOnce() -> Result<Value, E> + Send + 'static) -> Response {
    let result =
        tokio::task::spawn_blocking(work).await.unwrap_or_else(|e| Err(E::failed(format!("the request failed: {e}"))));
    match result {
        Ok(value) => Json(value).into_response(),
        Err(error) => {
            let retry = error.retry_after_s();
            let (status, message) = error.status_and_message();
            let mut response = (status, Json(json!({"error": message, "retry_after_s": retry}))).into_response();
            if let Some(seconds) = retry {
                response.headers_mut().insert(header::RETRY_AFTER, seconds.into());
            }
            response
        }
    }
}
