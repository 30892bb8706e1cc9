//! MCP over Streamable HTTP at `/mcp`: one set of method handlers and two
//! fronts that translate to and from them. The 2025 front (protocol
//! 2025-11-25, also 2025-06-18 and 2025-03-26) is here: sessions,
//! `initialize`, the session's GET SSE stream, questions to the client as
//! server-to-client requests. The 2026-07-28 front is [`modern`]: stateless
//! requests that carry `_meta`, input-required rounds, `server/discover`,
//! `subscriptions/listen` and tasks. Both check DNS rebinding first.
//!
//! The shared handlers take a `Request` (`request.rs`); one that came
//! through the modern front carries it as a `Front`, through which the
//! handlers shape results and errors and ask questions in rounds. They
//! name no front: only this router does (`host/src/layers.rs` checks it).
//!
//! With `[cluster]`, sessions are found on any replica (see
//! [`session`]), and a `notifications/cancelled` or an answer to a
//! server-to-client request that names a call running on another replica
//! is published on the cluster's bus; the replica running it acts on it.
//!
//! Here: the `/mcp` routes (POST, GET, DELETE), which front a POST speaks,
//! and the 2025 front's dispatch by method; `reply` holds the shapes of
//! answers. The shared handlers: `state` is what they share, `request` one
//! request being answered, `lifecycle` initialize, notifications and
//! `logging/setLevel`, `listing` `tools/list` and cursors, `calls`
//! `tools/call`, `offers` resources, prompts and completion.

mod asks;
mod calls;
mod caps;
mod guard;
mod jsonrpc;
mod lifecycle;
mod listing;
mod modern;
mod offers;
mod pins;
mod replicas;
mod reply;
mod request;
mod session;
mod state;
mod stream;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, FromRef, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

pub use caps::Caps;
pub use guard::{OriginPolicy, SUPPORTED_VERSIONS};
pub use modern::Modern;
pub use state::McpState;

use guard::Refusal;
use jsonrpc::{Incoming, RpcError};
use lifecycle::{initialize, notification, set_level};
use listing::tools_list;
use reply::{SESSION_HEADER, json_response, reply, reply_error};
use request::Request;
pub use session::SessionReport;

/// The `/mcp` routes over the handlers' shared state and the modern
/// front's own.
pub fn router(state: Arc<McpState>, modern: Modern) -> Router {
    router_at(state, Arc::new(modern), "/mcp")
}

/// The MCP routes at `path`: `/mcp`, or a toolset's `/mcp/NAME` (whose
/// router carries the toolset as a request extension).
pub fn router_at(state: Arc<McpState>, modern: Arc<Modern>, path: &str) -> Router {
    Router::new()
        .route(path, post(post_mcp).get(get_mcp).delete(delete_mcp))
        .with_state(Fronts {
            shared: state,
            modern,
        })
}

/// What the router holds: the shared handlers' state, and what the modern
/// front keeps, which it passes to that front alone.
#[derive(Clone)]
struct Fronts {
    shared: Arc<McpState>,
    modern: Arc<Modern>,
}

impl FromRef<Fronts> for Arc<McpState> {
    fn from_ref(fronts: &Fronts) -> Arc<McpState> {
        fronts.shared.clone()
    }
}

/// One JSON-RPC message in, one JSON or SSE answer (or 202) out.
async fn post_mcp(
    State(fronts): State<Fronts>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    token: Option<axum::Extension<crate::pipeline::Principal>>,
    toolset: Option<axum::Extension<crate::pipeline::Toolset>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let toolset = toolset.map(|t| t.0);
    let st = &*fronts.shared;
    if let Err(refusal) = st.policy.check(&headers) {
        return refused(refusal);
    }
    let message = match Incoming::parse(&body) {
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
    if modern::era(&headers, params) == modern::Era::Modern {
        return Box::pin(modern::post(
            st,
            &fronts.modern,
            client,
            token.map(|t| t.0),
            toolset,
            &headers,
            message,
        ))
        .await;
    }
    if let Err(refusal) = guard::check_version(&headers) {
        return refused(refusal);
    }
    if let Incoming::Request { id, method, params } = &message
        && method == "initialize"
    {
        let owner = token.as_ref().map(|t| t.0.subject.clone());
        return Box::pin(initialize(st, id, params, owner, client)).await;
    }
    let session = match headers.get(SESSION_HEADER) {
        None => None,
        Some(sid) => match st
            .sessions
            .find(
                sid.to_str().unwrap_or_default(),
                token.as_ref().map(|t| t.0.subject.as_str()),
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
            if !st.asks.answer(&id, session_id, outcome.clone()) {
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
                headers: &headers,
                client,
                token: token.map(|t| t.0),
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

/// `GET /mcp` opens the session's stream of unprompted messages (resource
/// updates it subscribed to); one client holds at most
/// `max_streams_per_client` such streams (see [`caps`]).
async fn get_mcp(
    State(st): State<Arc<McpState>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    token: Option<axum::Extension<crate::pipeline::Principal>>,
    headers: HeaderMap,
) -> Response {
    if let Err(refusal) = st.policy.check(&headers) {
        return refused(refusal);
    }
    if !request::accepts_sse(&headers) {
        return (
            StatusCode::NOT_ACCEPTABLE,
            "GET /mcp answers text/event-stream only",
        )
            .into_response();
    }
    let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return (StatusCode::BAD_REQUEST, "Mcp-Session-Id header required").into_response();
    };
    let owner = token.as_ref().map(|t| t.0.subject.as_str());
    let Some(session) = st.sessions.find(id, owner).await else {
        return (StatusCode::NOT_FOUND, "Session not found").into_response();
    };
    // The session's stream slot if it has a stream already, or a new one
    // within the client's and principal's `max_streams_per_client`.
    let keys = caps::keys(client, owner);
    match session.open_stream(|| st.caps.streams.take(keys)) {
        Ok(claim) => stream::open(claim, st.pipeline.current().changes(), st.sessions.clone()),
        Err(refusal) => {
            tracing::info!(%client, "GET /mcp refused: {}", refusal.message);
            refusal.response(&Value::Null)
        }
    }
}

/// Ends a session.
async fn delete_mcp(
    State(st): State<Arc<McpState>>,
    token: Option<axum::Extension<crate::pipeline::Principal>>,
    headers: HeaderMap,
) -> Response {
    if let Err(refusal) = st.policy.check(&headers) {
        return refused(refusal);
    }
    match headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) {
        None => (StatusCode::BAD_REQUEST, "Mcp-Session-Id header required").into_response(),
        Some(id)
            if st
                .sessions
                .end(id, token.as_ref().map(|t| t.0.subject.as_str()))
                .await =>
        {
            StatusCode::OK.into_response()
        }
        Some(_) => (StatusCode::NOT_FOUND, "Session not found").into_response(),
    }
}

fn refused(refusal: Refusal) -> Response {
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
