//! `Request`: one JSON-RPC request being answered, with what came with it
//! (session, headers, client, token, the front it came through), and the
//! answers it can give. `Front` and `Rounds` are what a revision's front
//! supplies to the shared handlers, which name no front.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::http::HeaderMap;
use axum::http::header::ACCEPT;
use axum::response::Response;
use serde_json::{Map, Value};

use super::jsonrpc::RpcError;
use super::reply::{reply, reply_error};
use super::session::Session;
use super::state::McpState;
use hangar_core::call::{Askable, CallContext, LogLevel, Question, RequestInfo, Surface};

/// What a revision's front adds to the shared handlers: the shape of its
/// results and errors, what its client declared, and its way to ask the
/// client questions. The legacy front (`mcp/legacy/`: the 2025 revisions,
/// plain results, a session's declarations, questions sent on the call's
/// SSE stream) is one; the modern front (`mcp/modern/`: 2026-07-28) is the
/// other.
pub(super) trait Front: Sync {
    /// Whether results take a shape of this revision's ([`Front::result`]);
    /// when not, they are written as they are, unconverted.
    fn reshapes(&self) -> bool;

    /// `result`, the answer to `req`, in this revision's shape.
    fn result(&self, req: &Request<'_>, result: Value) -> Value;

    /// The code this revision reports a handler's error `code` under.
    fn error_code(&self, code: i64) -> i64;

    /// The least level of the call's logs the client asked for, if any.
    fn log_level(&self, req: &Request<'_>) -> Option<LogLevel>;

    /// Whether the client declared it renders MCP Apps.
    fn runs_apps(&self, req: &Request<'_>) -> bool;

    /// What a run for `req` may ask its client; `sse`: the answer may be an
    /// SSE stream.
    fn askable(&self, req: &Request<'_>, sse: bool) -> Askable;

    /// The rounds in which a run for `req` of `name` with `args` asks the
    /// client its questions, for a front that asks in rounds (`None`: its
    /// questions go out on the call's stream); an error for answers or a
    /// state that fail their checks.
    fn rounds(
        &self,
        req: &Request<'_>,
        name: &str,
        args: &Value,
    ) -> Result<Option<Box<dyn Rounds>>, RpcError>;
}

/// A front's input-required rounds for one run (a tool call or
/// `prompts/get`): the questions the guest asks are answered from what the
/// client sent, or kept for it, and the run's result takes the front's shape.
pub(super) trait Rounds: Send {
    /// Answers a question of the running guest, or keeps it for the client.
    /// False when the run has left too many questions unanswered and must stop.
    fn ask(&mut self, ask: Question) -> bool;

    /// The result to answer with instead of the run's, when it left
    /// questions unanswered.
    fn input_required(&self) -> Option<Value>;

    /// The error for a run that failed after the guest was refused a
    /// capability the client did not declare.
    fn missing_capability(&self) -> Option<RpcError>;

    /// The run's own `result`, in the front's shape.
    fn result(&self, result: Value) -> Value;
}

/// A request being answered.
pub(super) struct Request<'a> {
    pub(super) id: Value,
    pub(super) params: Map<String, Value>,
    pub(super) session: Option<Arc<Session>>,
    pub(super) headers: &'a HeaderMap,
    pub(super) client: SocketAddr,
    /// The principal of the request's bearer token (`[oauth]`).
    pub(super) token: Option<hangar_core::call::Principal>,
    /// The front the request came through.
    pub(super) front: &'a dyn Front,
    /// The toolset the endpoint serves (`/mcp/NAME`); `None`: everything.
    pub(super) toolset: Option<hangar_core::call::Toolset>,
}

impl Request<'_> {
    /// Answers with `result`, in the front's shape.
    pub(super) fn reply<T: serde::Serialize>(&self, result: &T) -> Response {
        if !self.front.reshapes() {
            return reply(&self.id, result);
        }
        let value = serde_json::to_value(result).expect("results serialize");
        reply(&self.id, &self.front.result(self, value))
    }

    /// Answers with `error`, under the front's code for it.
    pub(super) fn fail(&self, error: &RpcError) -> Response {
        let code = self.front.error_code(error.code);
        if code != error.code {
            let mut error = error.clone();
            error.code = code;
            return reply_error(&self.id, &error);
        }
        reply_error(&self.id, error)
    }

    /// A call context for this request: trace id, session, what the auth stage sees.
    pub(super) fn context(&self, st: &McpState) -> CallContext {
        let info = RequestInfo::new(
            Surface::Mcp,
            "POST",
            "/mcp",
            self.headers,
            Some(self.client),
        );
        let mut cx = CallContext::traced(info.traceparent(), st.trace_ids);
        cx.session_id = self.session.as_ref().map(|s| s.id.clone());
        cx.pins = self.session.as_ref().map(|s| s.pins.clone());
        cx.principal = self.token.clone();
        cx.toolset = self.toolset.clone();
        cx.request = Some(Arc::new(info));
        cx
    }

    pub(super) fn accepts_sse(&self) -> bool {
        accepts_sse(self.headers)
    }

    /// Whether the client declared it renders MCP Apps: in its session's
    /// `initialize` (2025), in the request's `_meta` (2026-07-28).
    pub(super) fn client_runs_apps(&self) -> bool {
        self.front.runs_apps(self)
    }
}

/// Whether a request's `Accept` takes an SSE stream (`text/event-stream`).
pub(super) fn accepts_sse(headers: &HeaderMap) -> bool {
    headers
        .get_all(ACCEPT)
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.contains("text/event-stream")))
}
