//! MCP over Streamable HTTP at `/mcp`: one set of method handlers and two
//! fronts that translate to and from them, one per revision:
//! - the legacy front ([`legacy`]): protocol 2025-11-25, also 2025-06-18
//!   and 2025-03-26; sessions, `initialize`, the session's GET SSE stream,
//!   questions to the client as server-to-client requests;
//! - the modern front ([`modern`]): 2026-07-28; stateless requests that
//!   carry `_meta`, input-required rounds, `server/discover`,
//!   `subscriptions/listen` and tasks.
//!
//! `methods` names every method once and says which revisions speak it;
//! each front answers its own and hands the shared ones to `methods::answer`.
//! The shared handlers take a `Request` (`request.rs`), which carries its
//! front as a `Front`: through it they shape results and errors, read
//! what the client declared and ask it questions. They name no front: only
//! the transports do — this router, `dispatch` (which tells the fronts
//! apart) and `stdio` (`hangar serve --stdio`) — as `host/src/layers.rs`
//! checks. Both fronts check DNS rebinding first (`guard`).
//!
//! The shared handlers: `state` is what they share, `request` one request
//! being answered, `listing` `tools/list` and cursors, `calls`
//! `tools/call`, `offers` resources, prompts and completion, `advertised`
//! what `initialize` and `server/discover` say is offered; `reply` holds
//! the shapes of answers. The 2025 revisions' sessions (`session`) and
//! waiting questions (`questions`) are kept here, beside the handlers that
//! read a request's session.
//!
//! With `[cluster]`, sessions are found on any replica (see
//! [`session`]), and a `notifications/cancelled` or an answer to a
//! server-to-client request that names a call running on another replica
//! is published on the cluster's bus; the replica running it acts on it
//! (`replicas`).

mod advertised;
mod calls;
mod dispatch;
mod guard;
mod jsonrpc;
mod legacy;
mod limits;
mod listing;
mod methods;
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
use dispatch::dispatch;
use legacy::session_stream;
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
/// [`legacy::session_stream`]).
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
        return refusal.into_response();
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
