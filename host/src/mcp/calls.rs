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
use super::questions::{QuestionGuard, Questions};
use super::reply::{json_response, sse_frame};
use super::request::{Request, Rounds};
use super::session::InFlight;
use super::state::McpState;
use hangar_config::ErrorStyle;
use hangar_core::call::{
    Askable, CallError, CallEvent, CancelOnDrop, CancelToken, ErrorKind, EventSink, Stage,
    ToolResult,
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
    /// The call's events; `None` when it can send none (no logs asked for,
    /// no progress token, no question it may put): then no channel is made.
    events: Option<mpsc::Receiver<CallEvent>>,
    /// The call's sink, read at the end for the count of dropped events.
    sink: EventSink,
    task: JoinHandle<CallOutcome>,
    /// Cancels the call if the answer is dropped before the result (client gone).
    cancel_on_drop: CancelOnDrop,
    _in_flight: Option<InFlight>,
    errors: ErrorStyle,
    /// Where questions to the client wait for their answers.
    questions: Questions,
    session_id: Option<String>,
    /// The questions this call sent; forgotten when the stream ends.
    _asked: Vec<QuestionGuard>,
    /// The front's input-required rounds (a 2026-07-28 request); its
    /// result is sent in the front's shape.
    rounds: Option<FrontCall>,
}

/// What a call through a front with rounds keeps beside its run: the
/// rounds, and how to stop a guest that asks without end.
struct FrontCall {
    rounds: Box<dyn Rounds>,
    cancel: CancelToken,
}

pub(super) async fn tools_call(st: &McpState, mut req: Request<'_>) -> Response {
    let Some(name) = req
        .params
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return req.fail(&RpcError::invalid_params("tools/call needs a tool name"));
    };
    // Taken out of the request, not copied: nothing reads them there again
    // (a front's rounds are handed them beside the request).
    let args = req.params.remove("arguments").unwrap_or(Value::Null);
    if !(args.is_object() || args.is_null()) {
        return req.fail(&RpcError::invalid_params("arguments must be an object"));
    }
    let progress_token = req
        .params
        .get("_meta")
        .and_then(|m| m.get("progressToken"))
        .cloned();

    let sse = req.accepts_sse();
    let mut cx = req.context(st);
    let min_log = req.front.log_level(&req).filter(|_| sse);
    let rounds = match req.front.rounds(&req, &name, &args) {
        Ok(rounds) => rounds,
        Err(e) => return req.fail(&e),
    };
    let askable = req.front.askable(&req, sse);
    let progress = sse && progress_token.is_some();
    // A call that can send no event (most: no logs asked for, no progress
    // token, no client to ask) gets a sink with no channel behind it, and
    // keeps its context's budget.
    let rx = if min_log.is_some() || progress || matches!(askable, Askable::Yes { .. }) {
        let (tx, rx) = mpsc::channel(EVENT_CHANNEL);
        cx.events = EventSink::new(tx, min_log, progress).with_askable(askable);
        Some(rx)
    } else {
        cx.events = std::mem::take(&mut cx.events).with_askable(askable);
        None
    };

    let cx_cancel = cx.cancel.clone();
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
            // The pipeline's future (~4.6 KB) is boxed where it starts, so
            // the task holds a pointer to it and spawning copies ~100 bytes,
            // not the whole future, twice over.
            tokio::spawn(async move { Box::pin(pipeline.call(&name, args, &mut cx)).await })
        },
        id: req.id,
        errors: st.errors,
        questions: st.questions.clone(),
        session_id: req.session.as_ref().map(|s| s.id.clone()),
        _asked: Vec::new(),
        rounds: rounds.map(|rounds| FrontCall {
            rounds,
            cancel: cx_cancel,
        }),
    };

    // Events that come before the result turn the answer into a stream
    // (a question answered by the rounds sends nothing).
    loop {
        tokio::select! {
            biased;
            Some(event) = next_event(&mut running.events) => {
                if let Some(first) = running.message(event) {
                    return stream(running, first);
                }
            }
            joined = &mut running.task => {
                if let Ok(Err(e)) = &joined
                    && let Some(scope) = &e.required_scope
                {
                    return insufficient_scope(&running.id, e, scope);
                }
                return match running.finish(joined) {
                    Some((status, body)) => json_response(status, body),
                    None => StatusCode::ACCEPTED.into_response(),
                };
            }
        }
    }
}

/// The call's next event; never, for a call that has no channel.
async fn next_event(events: &mut Option<mpsc::Receiver<CallEvent>>) -> Option<CallEvent> {
    match events {
        Some(events) => events.recv().await,
        None => std::future::pending().await,
    }
}

/// The JSON-RPC body for a finished call; `None` when it was cancelled
/// (a cancelled request gets no response).
fn outcome_body(
    id: &Value,
    trace_id: &str,
    errors: ErrorStyle,
    rounds: Option<&dyn Rounds>,
    joined: Result<CallOutcome, tokio::task::JoinError>,
) -> Option<Vec<u8>> {
    let result_body = |result: &ToolResult| match rounds {
        Some(rounds) => {
            let value = serde_json::to_value(result).expect("results serialize");
            jsonrpc::result_body(id, &rounds.result(value))
        }
        None => jsonrpc::result_body(id, result),
    };
    match joined {
        Ok(Ok(result)) => Some(result_body(&result)),
        Ok(Err(e)) if e.kind == ErrorKind::Cancelled => None,
        // Past resolution, errors can be reported as results instead.
        Ok(Err(e)) if errors == ErrorStyle::Result && e.stage != Stage::Resolve => {
            Some(result_body(&ToolResult::error(e.to_string())))
        }
        Ok(Err(e)) => Some(jsonrpc::error_body(id, &RpcError::from_call(&e, trace_id))),
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
    let body = jsonrpc::error_body(id, &RpcError::from(e));
    let mut response = json_response(StatusCode::FORBIDDEN, body);
    response.headers_mut().insert(
        axum::http::header::WWW_AUTHENTICATE,
        crate::oauth::insufficient_scope(scope),
    );
    response
}

impl Running {
    /// The frame of one event: a notification, or a request to the client
    /// (registered so its answer finds its way back). `None` when the
    /// front's rounds took the question.
    fn message(&mut self, event: CallEvent) -> Option<Bytes> {
        let body = match event {
            CallEvent::Question(ask) => match &mut self.rounds {
                Some(m) => {
                    if !m.rounds.ask(ask) {
                        m.cancel.cancel();
                    }
                    return None;
                }
                None => {
                    let (body, guard) = self.questions.send(ask, self.session_id.as_deref());
                    self._asked.push(guard);
                    body
                }
            },
            other => notification(other, &self.progress_token),
        };
        Some(sse_frame(&body))
    }

    /// The status and body of the call's answer; `None` when it was
    /// cancelled. A call through a front with rounds whose guest asked
    /// questions without answers gets the input-required round instead of
    /// its result.
    fn finish(
        &self,
        joined: Result<CallOutcome, tokio::task::JoinError>,
    ) -> Option<(StatusCode, Vec<u8>)> {
        if let Some(m) = &self.rounds {
            if let Some(round) = m.rounds.input_required() {
                return Some((StatusCode::OK, jsonrpc::result_body(&self.id, &round)));
            }
            let failed = match &joined {
                Ok(Ok(result)) => result.is_error,
                _ => true,
            };
            if failed && let Some(e) = m.rounds.missing_capability() {
                return Some((StatusCode::BAD_REQUEST, jsonrpc::error_body(&self.id, &e)));
            }
        }
        outcome_body(
            &self.id,
            &self.trace_id,
            self.errors,
            self.rounds.as_ref().map(|m| &*m.rounds),
            joined,
        )
        .map(|body| (StatusCode::OK, body))
    }
}

fn notification(event: CallEvent, progress_token: &Option<Value>) -> Vec<u8> {
    match event {
        CallEvent::Question(_) => unreachable!("questions are sent by Running::message"),
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

/// Streams the call's events, then its result, then ends.
fn stream(running: Running, first: Bytes) -> Response {
    let rest = futures::stream::unfold(Some(running), |state| async move {
        let mut r = state?;
        tokio::select! {
            biased;
            Some(event) = next_event(&mut r.events) => {
                let frame = r.message(event).unwrap_or_default();
                Some((Ok::<_, Infallible>(frame), Some(r)))
            }
            joined = &mut r.task => {
                // Events still queued, then the one notice of what was dropped, then the result.
                let mut frames = Vec::new();
                while let Some(Ok(event)) = r.events.as_mut().map(mpsc::Receiver::try_recv) {
                    if let Some(frame) = r.message(event) {
                        frames.extend_from_slice(&frame);
                    }
                }
                if let Some(notice) = r.sink.dropped_notice() {
                    frames.extend_from_slice(&sse_frame(&notification(notice, &r.progress_token)));
                }
                if let Some((_, body)) = r.finish(joined) {
                    frames.extend_from_slice(&sse_frame(&body));
                }
                r.cancel_on_drop.disarm();
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
