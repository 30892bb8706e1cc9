//! How a request body is taken: its type and size judged from the head,
//! before a byte of it is read, then read whole within `body_timeout`.
//!
//! This layer sits *inside* each surface's door (the OAuth check), so a
//! caller that has not proved who it is never gets its body read; and a
//! body that is not JSON, or says it is larger than the route takes, is
//! refused from its head alone.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{CONNECTION, CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Json, Response};
use http_body::Body as _;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::json;

use super::HttpStats;

/// How the request bodies of one group of routes are read.
pub struct BodyLimits {
    pub timeout: Option<Duration>,
    pub max_bytes: usize,
    pub stats: Arc<HttpStats>,
}

/// Reads the request body before the handler runs: a client that sends its
/// head and then too little of its body gets 408 and its connection closed,
/// instead of holding a handler waiting; a body over the limit gets 413,
/// from its `Content-Length` when it gives one; a body that does not say it
/// is JSON gets 415 (a browser's no-cors `text/plain` POST is one).
pub async fn read_body(
    State(limits): State<Arc<BodyLimits>>,
    req: Request,
    next: Next,
) -> Response {
    let (parts, body) = req.into_parts();
    if body.is_end_stream() {
        return next.run(Request::from_parts(parts, body)).await;
    }
    if !is_json(&parts.headers) {
        return unsupported(parts.uri.path(), "application/json");
    }
    let max_bytes = limits.max_bytes;
    if declared_length(&parts.headers).is_some_and(|n| n > max_bytes as u64) {
        return too_large(max_bytes);
    }
    let collect = Limited::new(body, max_bytes).collect();
    let collected = match limits.timeout {
        None => collect.await,
        Some(timeout) => match tokio::time::timeout(timeout, collect).await {
            Ok(collected) => collected,
            Err(_) => {
                limits.stats.body_timed_out();
                return timed_out(timeout);
            }
        },
    };
    match collected {
        Ok(collected) => {
            let body = Body::from(collected.to_bytes());
            next.run(Request::from_parts(parts, body)).await
        }
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => too_large(max_bytes),
        Err(e) => closing(
            StatusCode::BAD_REQUEST,
            format!("cannot read the request body: {e}"),
        ),
    }
}

/// The length a request's head declares for its body.
pub fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// The media type of a request's body, without parameters, as sent (media
/// types compare case-insensitively: see [`is_type`]).
pub fn media_type(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(CONTENT_TYPE)?.to_str().ok()?;
    let essence = value.split(';').next()?.trim();
    (!essence.is_empty()).then_some(essence)
}

/// Whether the body's media type is `expected` (lower-case).
pub fn is_type(headers: &HeaderMap, expected: &str) -> bool {
    media_type(headers).is_some_and(|t| t.eq_ignore_ascii_case(expected))
}

/// `application/json`, or a `+json` type (`application/merge-patch+json`).
fn is_json(headers: &HeaderMap) -> bool {
    media_type(headers).is_some_and(|t| {
        let b = t.as_bytes();
        t.eq_ignore_ascii_case("application/json")
            || (b.len() > 17
                && b[..12].eq_ignore_ascii_case(b"application/")
                && b[b.len() - 5..].eq_ignore_ascii_case(b"+json"))
    })
}

/// 415 for a body of another type than `expected`; on `/mcp` the body is
/// a JSON-RPC error, as every other refusal there.
pub fn unsupported(path: &str, expected: &str) -> Response {
    let message = format!("the request body must be {expected} (Content-Type)");
    if path == "/mcp" {
        let body = json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": { "code": -32600, "message": message },
        });
        let mut response = (StatusCode::UNSUPPORTED_MEDIA_TYPE, Json(body)).into_response();
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
        return response;
    }
    closing(StatusCode::UNSUPPORTED_MEDIA_TYPE, message)
}

pub fn too_large(max_bytes: usize) -> Response {
    closing(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the request body is over {max_bytes} bytes (max_body_bytes)"),
    )
}

pub fn timed_out(timeout: Duration) -> Response {
    closing(
        StatusCode::REQUEST_TIMEOUT,
        format!("the request body did not arrive within {timeout:?} (body_timeout)"),
    )
}

/// An error answer after which the connection closes (the rest of the
/// request body was not read).
pub fn closing(status: StatusCode, message: String) -> Response {
    let mut response = (status, Json(json!({ "error": message }))).into_response();
    response
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_type(t: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(CONTENT_TYPE, HeaderValue::from_str(t).unwrap());
        h
    }

    #[test]
    fn json_types_are_told_from_others() {
        assert!(is_json(&with_type("application/json")));
        assert!(is_json(&with_type("Application/JSON; charset=utf-8")));
        assert!(is_json(&with_type("application/merge-patch+json")));
        assert!(!is_json(&with_type("text/plain")));
        assert!(!is_json(&with_type("application/x-www-form-urlencoded")));
        assert!(!is_json(&with_type("multipart/form-data; boundary=x")));
        assert!(!is_json(&HeaderMap::new()));
    }

    #[test]
    fn a_declared_length_is_read_from_the_head() {
        let mut h = HeaderMap::new();
        assert_eq!(declared_length(&h), None);
        h.insert(CONTENT_LENGTH, HeaderValue::from_static("52428800"));
        assert_eq!(declared_length(&h), Some(52_428_800));
    }
}
