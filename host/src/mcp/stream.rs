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
use axum::http::StatusCode;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;

use super::jsonrpc;
use super::reply::sse_frame;
use super::session::{Sessions, StreamClaim};
use hangar_core::call::{Change, ResourceChanges, Toolset};

/// A comment line this often keeps proxies from closing an idle stream.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// The session's stream: its updates as they come, keep-alive comments
/// between. `toolset` is the endpoint's (`/mcp/NAME`): only its lists'
/// changes are sent.
pub(super) fn open(
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
