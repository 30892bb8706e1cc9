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
//! Here: the `/mcp` routes (POST, GET, DELETE); `dispatch` tells which
//! front a message speaks and holds the 2025 front's dispatch by method,
//! which `stdio` (`hangar serve --stdio`: one message a line on stdin and
//! stdout) drives too; `reply` holds the shapes of answers. The shared handlers: `state` is what they share, `request` one
//! request being answered, `lifecycle` initialize, notifications and
//! `logging/setLevel`, `listing` `tools/list` and cursors, `calls`
//! `tools/call`, `offers` resources, prompts and completion.

mod calls;
mod dispatch;
mod guard;
mod jsonrpc;
mod lifecycle;
mod limits;
mod listing;
mod modern;
mod offers;
mod pins;
mod questions;
mod replicas;
mod reply;
mod request;
mod session;
mod state;
mod stdio;
mod stream;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;

pub use guard::{OriginPolicy, SUPPORTED_VERSIONS};
pub use limits::ClientLimits;
pub use modern::Modern;
pub use state::McpState;
pub use stdio::{StdioOptions, serve_stdio};

pub use dispatch::Fronts;
use dispatch::{dispatch, refused, session_stream};
use reply::SESSION_HEADER;
pub use session::SessionReport;

/// The `/mcp` routes over the handlers' shared state and the modern
/// front's own.
pub fn router(fronts: Fronts) -> Router {
    router_at(fronts, "/mcp")
}

/// The MCP routes at `path`: `/mcp`, or a toolset's `/mcp/NAME` (whose
/// router carries the toolset as a request extension).
pub fn router_at(fronts: Fronts, path: &str) -> Router {
    Router::new()
        .route(path, post(post_mcp).get(get_mcp).delete(delete_mcp))
        .with_state(fronts)
}

/// One JSON-RPC message in, one JSON or SSE answer (or 202) out.
async fn post_mcp(
    State(fronts): State<Fronts>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    token: Option<axum::Extension<hangar_core::call::Principal>>,
    toolset: Option<axum::Extension<hangar_core::call::Toolset>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let toolset = toolset.map(|t| t.0);
    dispatch(
        &fronts,
        client,
        token.map(|t| t.0),
        toolset,
        &headers,
        &body,
    )
    .await
}

/// `GET /mcp` opens the session's stream of unprompted messages (see
/// [`dispatch::session_stream`]).
async fn get_mcp(
    State(st): State<Arc<McpState>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    token: Option<axum::Extension<hangar_core::call::Principal>>,
    toolset: Option<axum::Extension<hangar_core::call::Toolset>>,
    headers: HeaderMap,
) -> Response {
    let (token, toolset) = (token.as_ref().map(|t| &t.0), toolset.map(|t| t.0));
    session_stream(&st, client, token, toolset, &headers).await
}

/// Ends a session.
async fn delete_mcp(
    State(st): State<Arc<McpState>>,
    token: Option<axum::Extension<hangar_core::call::Principal>>,
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

/// Every MCP revision `/mcp` speaks, newest first: the 2026 revision
/// (per request) and the 2025 ones (per session).
pub fn protocol_versions() -> Vec<&'static str> {
    (modern::codes::MODERN_VERSIONS.iter())
        .chain(SUPPORTED_VERSIONS)
        .copied()
        .collect()
}
