//! One `/mcp` message answered: which front it speaks (a modern one goes
//! to that front whole), and the 2025 front's dispatch by method. `POST /mcp` (the router in the
//! parent module) and the stdio transport (`stdio.rs`) both answer
//! through [`dispatch`]; what they share of the fronts is [`Fronts`].

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::FromRef;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::guard::{self, Refusal};
use super::jsonrpc::{self, Incoming, RpcError};
use super::lifecycle::{initialize, notification, set_level};
use super::listing::tools_list;
use super::modern::{self, Modern};
use super::reply::{SESSION_HEADER, json_response, reply, reply_error};
use super::request::{Request, accepts_sse};
use super::state::McpState;
use super::{calls, limits, offers, replicas, stream};

/// What the router and the stdio transport hold: the shared handlers'
/// state, and what the modern front keeps, which only the dispatch passes
/// on (to that front alone).
#[derive(Clone)]
pub struct Fronts {
    pub(super) shared: Arc<McpState>,
    modern: Arc<Modern>,
}

impl Fronts {
    pub fn new(shared: Arc<McpState>, modern: Modern) -> Fronts {
        Fronts {
            shared,
            modern: Arc::new(modern),
        }
    }

    /// The shared handlers' state.
    pub fn state(&self) -> &Arc<McpState> {
        &self.shared
    }
}

impl FromRef<Fronts> for Arc<McpState> {
    fn from_ref(fronts: &Fronts) -> Arc<McpState> {
        fronts.shared.clone()
    }
}

/// One message of `client`'s, with its headers and the principal of its
/// bearer token, answered as `POST /mcp` answers it. The stdio transport
/// (`stdio.rs`) hands each line here too.
pub(super) async fn dispatch(
    fronts: &Fronts,
    client: SocketAddr,
    token: Option<hangar_core::call::Principal>,
    toolset: Option<hangar_core::call::Toolset>,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let st = &*fronts.shared;
    if let Err(refusal) = st.policy.check(headers) {
        return refused(refusal);
    }
    let message = match Incoming::parse(body) {
        Ok(m) => m,
        Err(rej) => {
            return json_response(
                StatusCode::BAD_REQUEST,
                jsonrpc::error_body(&rej.id, &rej.error),
            );
        }
    };
    let params = match &message {
        Incoming::Request { params, .. } | Incoming::Notification { params, .. } => Some(params),
        Incoming::Response { .. } => None,
    };
    if modern::era(headers, params) == modern::Era::Modern {
        return Box::pin(modern::post(
            st,
            &fronts.modern,
            client,
            token,
            toolset,
            headers,
            message,
        ))
        .await;
    }
    if let Err(refusal) = guard::check_version(headers) {
        return refused(refusal);
    }
    if let Incoming::Request { id, method, params } = &message
        && method == "initialize"
    {
        let owner = token.as_ref().map(|t| t.subject.clone());
        return Box::pin(initialize(st, id, params, owner, client, toolset.as_ref())).await;
    }
    let session = match headers.get(SESSION_HEADER) {
        None => None,
        Some(sid) => match st
            .sessions
            .find(
                sid.to_str().unwrap_or_default(),
                token.as_ref().map(|t| t.subject.as_str()),
            )
            .await
        {
            Some(s) => Some(s),
            None => return session_not_found(&message),
        },
    };
    match message {
        Incoming::Response { id, outcome } => {
            let session_id = session.as_ref().map(|s| s.id.as_str());
            if !st.questions.answer(&id, session_id, outcome.clone()) {
                match &st.cluster {
                    Some(cluster) => {
                        Box::pin(replicas::pass_answer(cluster, session_id, id, outcome)).await
                    }
                    None => tracing::debug!(%id, "a response to no question waiting"),
                }
            }
            StatusCode::ACCEPTED.into_response()
        }
        Incoming::Notification { method, params } => {
            Box::pin(notification(st, session.as_deref(), &method, &params)).await;
            StatusCode::ACCEPTED.into_response()
        }
        Incoming::Request { id, method, params } => {
            let request = Request {
                id,
                params,
                session,
                headers,
                client,
                token,
                front: None,
                toolset,
            };
            // Every method but `tools/call` (whose pipeline runs boxed in a
            // task of its own) is boxed where it is awaited: inline, the
            // largest of them (~4.5 KB) would size this handler's future,
            // which axum boxes, and copies, for every request.
            match method.as_str() {
                "ping" => reply(&request.id, &json!({})),
                "tools/list" => Box::pin(tools_list(st, &request)).await,
                "tools/call" => calls::tools_call(st, request).await,
                "logging/setLevel" => Box::pin(set_level(st, &request)).await,
                "resources/list" => Box::pin(offers::resources_list(st, &request)).await,
                "resources/templates/list" => Box::pin(offers::templates_list(st, &request)).await,
                "resources/read" => Box::pin(offers::resources_read(st, &request)).await,
                "resources/subscribe" => Box::pin(offers::subscribe(st, &request, true)).await,
                "resources/unsubscribe" => Box::pin(offers::subscribe(st, &request, false)).await,
                "prompts/list" => Box::pin(offers::prompts_list(st, &request)).await,
                "prompts/get" => Box::pin(offers::prompts_get(st, &request)).await,
                "completion/complete" => Box::pin(offers::complete(st, &request)).await,
                _ => reply_error(
                    &request.id,
                    &RpcError::new(
                        jsonrpc::METHOD_NOT_FOUND,
                        format!("Method not found: {method}"),
                    ),
                ),
            }
        }
    }
}

/// The session's stream of unprompted messages (resource updates it
/// subscribed to, lists changed by a reload), for the session `headers`
/// name: what `GET /mcp` answers, and what the stdio transport relays.
/// One client holds at most `max_streams_per_client` such streams (see
/// [`limits`]).
pub(super) async fn session_stream(
    st: &McpState,
    client: SocketAddr,
    token: Option<&hangar_core::call::Principal>,
    toolset: Option<hangar_core::call::Toolset>,
    headers: &HeaderMap,
) -> Response {
    if let Err(refusal) = st.policy.check(headers) {
        return refused(refusal);
    }
    if !accepts_sse(headers) {
        return (
            StatusCode::NOT_ACCEPTABLE,
            "GET /mcp answers text/event-stream only",
        )
            .into_response();
    }
    let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return (StatusCode::BAD_REQUEST, "Mcp-Session-Id header required").into_response();
    };
    let owner = token.map(|t| t.subject.as_str());
    let Some(session) = st.sessions.find(id, owner).await else {
        return (StatusCode::NOT_FOUND, "Session not found").into_response();
    };
    // The session's stream slot if it has a stream already, or a new one
    // within the client's and principal's `max_streams_per_client`.
    let keys = limits::keys(client, owner);
    match session.open_stream(|| st.limits.streams.take(keys)) {
        Ok(claim) => stream::open(
            claim,
            st.pipeline.current().changes(),
            st.sessions.clone(),
            toolset,
        ),
        Err(refusal) => {
            tracing::info!(%client, "GET /mcp refused: {}", refusal.message);
            refusal.response(&Value::Null)
        }
    }
}

pub(super) fn refused(refusal: Refusal) -> Response {
    let (status, message) = match refusal {
        Refusal::Host(h) => (StatusCode::FORBIDDEN, format!("Host not allowed: {h}")),
        Refusal::Origin(o) => (StatusCode::FORBIDDEN, format!("Origin not allowed: {o}")),
        Refusal::Version(v) => (
            StatusCode::BAD_REQUEST,
            format!("Unsupported MCP-Protocol-Version: {v}"),
        ),
    };
    tracing::debug!(%status, "{message}");
    let error = RpcError::new(jsonrpc::INVALID_REQUEST, message);
    json_response(status, jsonrpc::error_body(&Value::Null, &error))
}

fn session_not_found(message: &Incoming) -> Response {
    let id = match message {
        Incoming::Request { id, .. } => id.clone(),
        _ => Value::Null,
    };
    let error = RpcError::new(-32001, "Session not found");
    json_response(StatusCode::NOT_FOUND, jsonrpc::error_body(&id, &error))
}
