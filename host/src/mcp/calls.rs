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

use super::asks::{AskGuard, Asks};
use super::jsonrpc::{self, RpcError};
use super::session::InFlight;
use super::{McpState, Request, json_response, reply_error};
use crate::config::ErrorStyle;
use crate::pipeline::{
    Askable, CallError, CallEvent, CancelOnDrop, ErrorKind, EventSink, Stage, ToolResult,
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
    /// Where questions to the client wait for their answers.
    asks: Asks,
    session_id: Option<String>,
    /// The questions this call sent; forgotten when the stream ends.
    _asked: Vec<AskGuard>,
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
    let askable = match (&req.session, sse) {
        (_, false) => Askable::No("the request did not accept an SSE stream (text/event-stream)"),
        (None, true) => {
            Askable::No("the call has no MCP session, so the client's capabilities are unknown")
        }
        (Some(session), true) => session.askable(),
    };
    cx.events = EventSink::new(tx, min_log, sse && progress_token.is_some()).with_askable(askable);

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
            let pipeline = st.pipeline.current();
            tokio::spawn(async move { pipeline.call(&name, args, &mut cx).await })
        },
        id: req.id,
        errors: st.errors,
        asks: st.asks.clone(),
        session_id: req.session.as_ref().map(|s| s.id.clone()),
        _asked: Vec::new(),
    };

    // Events that come before the result turn the answer into a stream.
    tokio::select! {
        biased;
        Some(first) = running.events.recv() => stream(running, first),
        joined = &mut running.task => {
            if let Ok(Err(e)) = &joined
                && let Some(scope) = &e.required_scope
            {
                return insufficient_scope(&running.id, e, scope);
            }
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

/// A tool the token lacks scopes for: HTTP 403 with the step-up challenge
/// (the MCP authorization spec), the JSON-RPC error in the body.
fn insufficient_scope(id: &Value, e: &CallError, scope: &str) -> Response {
    let body = jsonrpc::error_body(id, &call_error(e, ""));
    let mut response = json_response(StatusCode::FORBIDDEN, body);
    response.headers_mut().insert(
        axum::http::header::WWW_AUTHENTICATE,
        crate::oauth::insufficient_scope(scope),
    );
    response
}

/// The one place a `CallError` becomes a JSON-RPC error.
pub(super) fn call_error(e: &CallError, trace_id: &str) -> RpcError {
    // An upstream MCP server's own error goes on unchanged.
    if let Some(upstream) = &e.upstream_error
        && let Ok(error) = serde_json::from_value::<RpcError>(upstream.clone())
    {
        return error;
    }
    let code = match e.kind {
        ErrorKind::NotFound => jsonrpc::METHOD_NOT_FOUND,
        _ => jsonrpc::SERVER_ERROR,
    };
    let mut data = json!({ "stage": e.stage.as_str() });
    if !trace_id.is_empty() {
        data["trace_id"] = json!(trace_id);
    }
    if let Some(wait) = e.retry_after {
        data["retry_after_ms"] = json!(wait.as_millis().max(1) as u64);
    }
    RpcError {
        code,
        message: e.to_string(),
        data: Some(data),
    }
}

impl Running {
    /// The JSON of one event: a notification, or a request to the client
    /// (registered so its answer finds its way back).
    fn message(&mut self, event: CallEvent) -> Vec<u8> {
        match event {
            CallEvent::Ask(ask) => {
                let (body, guard) = self.asks.send(ask, self.session_id.as_deref());
                self._asked.push(guard);
                body
            }
            other => notification(other, &self.progress_token),
        }
    }
}

fn notification(event: CallEvent, progress_token: &Option<Value>) -> Vec<u8> {
    match event {
        CallEvent::Ask(_) => unreachable!("questions are sent by Running::message"),
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

pub(super) fn sse_frame(json: &[u8]) -> Bytes {
    let mut frame = Vec::with_capacity(json.len() + 24);
    frame.extend_from_slice(b"event: message\ndata: ");
    frame.extend_from_slice(json);
    frame.extend_from_slice(b"\n\n");
    Bytes::from(frame)
}

/// Streams the call's events, then its result, then ends.
fn stream(mut running: Running, first: CallEvent) -> Response {
    let first = sse_frame(&running.message(first));
    let rest = futures::stream::unfold(Some(running), |state| async move {
        let mut r = state?;
        tokio::select! {
            biased;
            Some(event) = r.events.recv() => {
                let frame = sse_frame(&r.message(event));
                Some((Ok::<_, Infallible>(frame), Some(r)))
            }
            joined = &mut r.task => {
                // Events still queued, then the one notice of what was dropped, then the result.
                let mut frames = Vec::new();
                while let Ok(event) = r.events.try_recv() {
                    let message = r.message(event);
                    frames.extend_from_slice(&sse_frame(&message));
                }
                let Running { id, trace_id, cancel_on_drop, errors, sink, progress_token, .. } = r;
                cancel_on_drop.disarm();
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
