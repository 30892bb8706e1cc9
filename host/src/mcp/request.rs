//! `Request`: one JSON-RPC request being answered, with what came with it
//! (session, headers, client, token), and the answers it can give.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::http::HeaderMap;
use axum::http::header::ACCEPT;
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::jsonrpc::{self, RpcError};
use super::modern::{meta::RequestMeta, result, state::digest};
use super::reply::{reply, reply_error};
use super::session::Session;
use super::state::McpState;
use crate::pipeline::{CallContext, RequestInfo, Transport};

/// A modern (2026-07-28) request: what its `_meta` said, and its method.
pub(super) struct Modern {
    pub(super) meta: RequestMeta,
    pub(super) method: String,
    /// The catalog answers per caller (see `Catalog::per_caller`).
    pub(super) per_caller: bool,
}

/// A request being answered.
pub(super) struct Request<'a> {
    pub(super) id: Value,
    pub(super) params: Map<String, Value>,
    pub(super) session: Option<Arc<Session>>,
    pub(super) headers: &'a HeaderMap,
    pub(super) client: SocketAddr,
    /// The principal of the request's bearer token (`[oauth]`).
    pub(super) token: Option<crate::pipeline::Principal>,
    /// Set for a 2026-07-28 request; `None` for the 2025 revisions.
    pub(super) modern: Option<Modern>,
}

impl Request<'_> {
    /// Answers with `result`, in the modern shape for a modern request.
    pub(super) fn reply<T: serde::Serialize>(&self, result: &T) -> Response {
        match &self.modern {
            None => reply(&self.id, result),
            Some(m) => {
                let value = serde_json::to_value(result).expect("results serialize");
                reply(
                    &self.id,
                    &result::complete(value, &m.method, self.private()),
                )
            }
        }
    }

    /// Answers with `error`. The modern revision reports an unknown
    /// resource as invalid params (-32602), not -32002.
    pub(super) fn fail(&self, error: &RpcError) -> Response {
        if self.modern.is_some() && error.code == jsonrpc::RESOURCE_NOT_FOUND {
            let mut error = error.clone();
            error.code = jsonrpc::INVALID_PARAMS;
            return reply_error(&self.id, &error);
        }
        reply_error(&self.id, error)
    }

    /// What a modern request's `requestState` is bound to: the method, what
    /// it names, its arguments and the credentials sent, so a state cannot
    /// be replayed on another request or by another caller.
    pub(super) fn binding(&self, name: &str, args: &Value) -> String {
        let credential = |h: &str| {
            self.headers
                .get(h)
                .and_then(|v| v.to_str().ok())
                .map_or(Value::Null, |v| json!(v))
        };
        let method = self.modern.as_ref().map_or("", |m| m.method.as_str());
        let subject = self
            .token
            .as_ref()
            .map_or(Value::Null, |t| json!(t.subject));
        digest(&[
            &json!(method),
            &json!(name),
            args,
            &credential("authorization"),
            &credential("x-api-key"),
            &subject,
        ])
    }

    /// Whether the answer may depend on who asked, so a shared cache must
    /// not keep it: a principal (bearer token) shaped it, credentials were
    /// sent, or the catalog answers per caller (an auth stage or
    /// `visible_to` anywhere, or a server-wide auth check).
    pub(super) fn private(&self) -> bool {
        const CREDENTIALS: [&str; 3] = ["authorization", "x-api-key", "cookie"];
        self.token.is_some()
            || self.modern.as_ref().is_some_and(|m| m.per_caller)
            || CREDENTIALS.iter().any(|h| self.headers.contains_key(*h))
    }

    /// A call context for this request: trace id, session, what the auth stage sees.
    pub(super) fn context(&self, st: &McpState) -> CallContext {
        let info = RequestInfo::new(
            Transport::Mcp,
            "POST",
            "/mcp",
            self.headers,
            Some(self.client),
        );
        let mut cx = CallContext::traced(info.traceparent(), st.trace_ids);
        cx.session_id = self.session.as_ref().map(|s| s.id.clone());
        cx.pins = self.session.as_ref().map(|s| s.pins.clone());
        cx.principal = self.token.clone();
        cx.request = Some(Arc::new(info));
        cx
    }

    pub(super) fn accepts_sse(&self) -> bool {
        accepts_sse(self.headers)
    }
}

/// Whether a request's `Accept` takes an SSE stream (`text/event-stream`).
pub(super) fn accepts_sse(headers: &HeaderMap) -> bool {
    headers
        .get_all(ACCEPT)
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.contains("text/event-stream")))
}
