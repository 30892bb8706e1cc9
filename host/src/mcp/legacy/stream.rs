//! `GET /mcp`: a session's own SSE stream, for what the server sends
//! unprompted — `notifications/resources/updated` for the URIs the session
//! subscribed to, and `notifications/*/list_changed` after a reload changed
//! a list. A session has one current stream: opening another
//! replaces it, and the replaced one ends.
//!
//! With `[cluster]` the session may be used on other replicas meanwhile:
//! each keep-alive and each resource update reads it from Redis again (its
//! subscriptions, and whether it still exists; reading also keeps it alive).

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use std::net::SocketAddr;

use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::mcp::jsonrpc;
use crate::mcp::limits;
use crate::mcp::reply::{SESSION_HEADER, sse_frame};
use crate::mcp::request::accepts_sse;
use crate::mcp::session::{Sessions, StreamClaim};
use crate::mcp::state::McpState;
use hangar_core::call::{Change, ResourceChanges, Toolset};

/// A comment line this often keeps proxies from closing an idle stream.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// The session's stream of unprompted messages (resource updates it
/// subscribed to, lists changed by a reload), for the session `headers`
/// name: what `GET /mcp` answers, and what the stdio transport relays.
/// One client holds at most `max_streams_per_client` such streams (see
/// [`limits`]).
pub(in crate::mcp) async fn session_stream(
    st: &McpState,
    client: SocketAddr,
    token: Option<&hangar_core::call::Principal>,
    toolset: Option<hangar_core::call::Toolset>,
    headers: &HeaderMap,
) -> Response {
    if let Err(refusal) = st.policy.check(headers) {
        return refusal.into_response();
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
        Ok(claim) => open(
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

/// The session's stream: its updates as they come, keep-alive comments
/// between. `toolset` is the endpoint's (`/mcp/NAME`): only its lists'
/// changes are sent.
fn open(
    claim: StreamClaim,
    changes: &ResourceChanges,
    sessions: Sessions,
    toolset: Option<Toolset>,
) -> Response {
    let rx = changes.subscribe();
    let state = (claim, rx, sessions);
    let events = futures::stream::unfold(state, move |(claim, mut rx, sessions)| {
        let toolset = toolset.clone();
        async move {
            loop {
                let next = tokio::select! {
                    next = tokio::time::timeout(KEEPALIVE, rx.recv()) => next,
                    _ = claim.replaced() => return None,
                };
                if !claim.current() {
                    return None;
                }
                let frame = match next {
                    // A session whose client listens on its stream is in use.
                    Err(_) => {
                        claim.session().touch();
                        if !sessions.reread(claim.session()).await {
                            return None;
                        }
                        Bytes::from_static(b": keep-alive\n\n")
                    }
                    Ok(Ok(Change::Updated(uri))) => {
                        if !sessions.reread(claim.session()).await {
                            return None;
                        }
                        if !claim.session().subscribed(&uri) {
                            continue;
                        }
                        let body = jsonrpc::notification_body(
                            "notifications/resources/updated",
                            &json!({ "uri": uri }),
                        );
                        sse_frame(&body)
                    }
                    Ok(Ok(Change::ListChanged(list, reach))) => {
                        if !reach.reaches(toolset.as_ref()) {
                            continue;
                        }
                        let body = jsonrpc::notification_body(list.notification(), &json!({}));
                        sse_frame(&body)
                    }
                    Ok(Ok(Change::Task { .. })) => continue,
                    // Too slow a reader skips what it missed, and reads on.
                    Ok(Err(RecvError::Lagged(n))) => {
                        tracing::warn!(session = %claim.session().id, "GET stream lagged: {n} changes skipped");
                        continue;
                    }
                    Ok(Err(RecvError::Closed)) => return None,
                };
                return Some((Ok::<_, Infallible>(frame), (claim, rx, sessions)));
            }
        }
    });
    let primer = futures::stream::once(async { Ok(Bytes::from_static(b": stream open\n\n")) });
    (
        StatusCode::OK,
        [
            (CONTENT_TYPE, "text/event-stream"),
            (CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(futures::StreamExt::chain(primer, events)),
    )
        .into_response()
}
