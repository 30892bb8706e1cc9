//! The shapes REST answers share: a result with its trace id, a JSON
//! error, a `busy` answer's `Retry-After`.

use axum::Json;
use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Value, json};

/// A result with the trace id in `_meta` (no `_meta` without one), merged
/// with the `_meta` the result has (an upstream's): Hangar's keys win.
#[derive(Serialize)]
pub(super) struct Traced<'a, T> {
    #[serde(flatten)]
    result: &'a T,
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    meta: Option<Value>,
}

impl<'a, T: Serialize> Traced<'a, T> {
    pub(super) fn new(result: &'a T, trace_id: &str) -> Self {
        Traced {
            result,
            meta: (!trace_id.is_empty()).then(|| json!({ "_trace_id": trace_id })),
        }
    }
}

/// Asks the caller to retry a `busy` answer in a second.
pub(super) fn retry_later(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

pub(super) fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}
