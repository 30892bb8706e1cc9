//! `tools/call`: runs the pipeline and answers with JSON, or with an SSE
//! stream when the call reports progress or logs before its result.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::jsonrpc::{self, RpcError};
use super::session::InFlight;
use super::{McpState, Request, json_response, reply_error};
use crate::config::ErrorStyle;
use crate::pipeline::{
    CallError, CallEvent, CancelOnDrop, ErrorKind, EventSink, Stage, ToolResult,
};

type CallOutcome = Result<ToolResult, CallError>;

/// Events buffered between a running guest and the answer's stream; when the
/// client reads slower than the guest reports, the excess is dropped and counted.
const EVENT_CHANNEL: usize = 1024;

/// Everything that must live as long as the answer to one call.
struct Running {
    id: Value,
    trace_id: String,
    progress_token: Option<Value>,
    events: mpsc::Receiver<CallEvent>,
    /// The call's sink, read at the end for the count of dropped events.
    sink: EventSink,
    task: JoinHandle<CallOutcome>,
    /// Cancels the call if the answer is dropped before the result (client gone).
    cancel_on_drop: CancelOnDrop,
    _in_flight: Option<InFlight>,
    errors: ErrorStyle,
}

pub(super) async fn tools_call(st: &McpState, req: Request<'_>) -> Response {
    let Some(name) = req
        .params
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return reply_error(
            &req.id,
            &RpcError::invalid_params("tools/call needs a tool name"),
        );
    };
    let args = req.params.get("arguments").cloned().unwrap_or(Value::Null);
    if !(args.is_object() || args.is_null()) {
        return reply_error(
            &req.id,
            &RpcError::invalid_params("arguments must be an object"),
        );
    }
    let progress_token = req
        .params
        .get("_meta")
        .and_then(|m| m.get("progressToken"))
        .cloned();

    let sse = req.accepts_sse();
    let (tx, rx) = mpsc::channel(EVENT_CHANNEL);
    let mut cx = req.context(st);
    let min_log = req
        .session
        .as_ref()
        .and_then(|s| s.log_level())
        .filter(|_| sse);
    cx.events = EventSink::new(tx, min_log, sse && progress_token.is_some());

    let mut running = Running {
        sink: cx.events.clone(),
        trace_id: cx.trace_id.clone(),
        progress_token,
        events: rx,
        cancel_on_drop: cx.cancel.drop_guard(),
        _in_flight: req
            .session
            .as_ref()
            .map(|s| s.track(&req.id, cx.cancel.clone())),
        task: {
            let pipeline = st.pipeline.clone();
            tokio::spawn(async move { pipeline.call(&name, args, &mut cx).await })
        },
        id: req.id,
        errors: st.errors,
    };

    // Events that come before the result turn the answer into a stream.
    tokio::select! {
        biased;
        Some(first) = running.events.recv() => stream(running, first),
        joined = &mut running.task => {
            let body = outcome_body(&running.id, &running.trace_id, running.errors, joined);
            match body {
                Some(body) => json_response(StatusCode::OK, body),
                None => StatusCode::ACCEPTED.into_response(),
            }
        }
    }
}

/// The JSON-RPC body for a finished call; `None` when it was cancelled
/// (a cancelled request gets no response).
fn outcome_body(
    id: &Value,
    trace_id: &str,
    errors: ErrorStyle,
    joined: Result<CallOutcome, tokio::task::JoinError>,
) -> Option<Vec<u8>> {
    match joined {
        Ok(Ok(result)) => Some(jsonrpc::result_body(id, &result)),
        Ok(Err(e)) if e.kind == ErrorKind::Cancelled => None,
        // Past resolution, errors can be reported as results instead.
        Ok(Err(e)) if errors == ErrorStyle::Result && e.stage != Stage::Resolve => {
            Some(jsonrpc::result_body(id, &ToolResult::error(e.to_string())))
        }
        Ok(Err(e)) => Some(jsonrpc::error_body(id, &call_error(&e, trace_id))),
        Err(e) => {
            tracing::error!(trace_id, "call task failed: {e}");
            let error = RpcError::new(-32603, "Internal error");
            Some(jsonrpc::error_body(id, &error))
        }
    }
}

/// The one place a `CallError` becomes a JSON-RPC error.
pub(super) fn call_error(e: &CallError, trace_id: &str) -> RpcError {
    let code = match e.kind {
        ErrorKind::NotFound => jsonrpc::METHOD_NOT_FOUND,
        _ => jsonrpc::SERVER_ERROR,
    };
    RpcError {
        code,
        message: e.to_string(),
        data: Some(if trace_id.is_empty() {
            json!({ "stage": e.stage.as_str() })
        } else {
            json!({ "stage": e.stage.as_str(), "trace_id": trace_id })
        }),
    }
}

fn notification(event: CallEvent, progress_token: &Option<Value>) -> Vec<u8> {
    match event {
        CallEvent::Log {
            level,
            logger,
            message,
        } => jsonrpc::notification_body(
            "notifications/message",
            &json!({ "level": level, "logger": logger, "data": message }),
        ),
        CallEvent::Progress {
            progress,
            total,
            message,
        } => {
            let mut params = json!({ "progressToken": progress_token, "progress": progress });
            if let Some(total) = total {
                params["total"] = json!(total);
            }
            if let Some(message) = message {
                params["message"] = json!(message);
            }
            jsonrpc::notification_body("notifications/progress", &params)
        }
    }
}

fn sse_frame(json: &[u8]) -> Bytes {
    let mut frame = Vec::with_capacity(json.len() + 24);
    frame.extend_from_slice(b"event: message\ndata: ");
    frame.extend_from_slice(json);
    frame.extend_from_slice(b"\n\n");
    Bytes::from(frame)
}

/// Streams the call's events, then its result, then ends.
fn stream(running: Running, first: CallEvent) -> Response {
    let first = sse_frame(&notification(first, &running.progress_token));
    let rest = futures::stream::unfold(Some(running), |state| async move {
        let mut r = state?;
        tokio::select! {
            biased;
            Some(event) = r.events.recv() => {
                let frame = sse_frame(&notification(event, &r.progress_token));
                Some((Ok::<_, Infallible>(frame), Some(r)))
            }
            joined = &mut r.task => {
                let Running { id, trace_id, cancel_on_drop, errors, mut events, sink, progress_token, .. } = r;
                cancel_on_drop.disarm();
                // Events still queued, then the one notice of what was dropped, then the result.
                let mut frames = Vec::new();
                while let Ok(event) = events.try_recv() {
                    frames.extend_from_slice(&sse_frame(&notification(event, &progress_token)));
                }
                if let Some(notice) = sink.dropped_notice() {
                    frames.extend_from_slice(&sse_frame(&notification(notice, &progress_token)));
                }
                if let Some(body) = outcome_body(&id, &trace_id, errors, joined) {
                    frames.extend_from_slice(&sse_frame(&body));
                }
                Some((Ok(Bytes::from(frames)), None))
            }
        }
    });
    let body = futures::StreamExt::chain(futures::stream::once(async { Ok(first) }), rest);
    (
        StatusCode::OK,
        [
            (CONTENT_TYPE, "text/event-stream"),
            (CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(body),
    )
        .into_response()
}
