//! The shapes of answers on `/mcp`: a JSON-RPC body as an HTTP response
//! (result, error, any status) and one SSE frame. Every handler and both
//! revisions' fronts answer through these, so they sit below all of them.

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::jsonrpc::{self, RpcError};

/// The header naming a 2025 session.
pub(super) const SESSION_HEADER: &str = "mcp-session-id";

pub(super) fn reply<T: serde::Serialize>(id: &Value, result: &T) -> Response {
    json_response(StatusCode::OK, jsonrpc::result_body(id, result))
}

pub(super) fn reply_error(id: &Value, error: &RpcError) -> Response {
    json_response(StatusCode::OK, jsonrpc::error_body(id, error))
}

pub(super) fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    (
        status,
        [(CONTENT_TYPE, "application/json")],
        Body::from(body),
    )
        .into_response()
}

/// One JSON-RPC message as an SSE `message` event.
pub(super) fn sse_frame(json: &[u8]) -> Bytes {
    let mut frame = Vec::with_capacity(json.len() + 24);
    frame.extend_from_slice(b"event: message\ndata: ");
    frame.extend_from_slice(json);
    frame.extend_from_slice(b"\n\n");
    Bytes::from(frame)
}
