//! The legacy front's session outside tool calls: `initialize`, client
//! notifications (`notifications/cancelled`), and `logging/setLevel`.

use std::net::SocketAddr;

use axum::http::HeaderValue;
use axum::response::Response;
use serde_json::{Map, Value, json};

use crate::mcp::advertised::advertised;
use crate::mcp::guard::{self, SUPPORTED_VERSIONS};
use crate::mcp::jsonrpc::RpcError;
use crate::mcp::reply::{SESSION_HEADER, reply, reply_error};
use crate::mcp::request::Request;
use crate::mcp::session::{ClientAsks, Session};
use crate::mcp::state::McpState;
use crate::mcp::{limits, replicas};
use hangar_core::call::LogLevel;

/// Opens a session for `client` (and the token subject `owner`), unless
/// either holds `max_sessions_per_client` already: then 429.
pub(super) async fn initialize(
    st: &McpState,
    id: &Value,
    params: &Map<String, Value>,
    owner: Option<String>,
    client: SocketAddr,
    toolset: Option<&hangar_core::call::Toolset>,
) -> Response {
    let held = match st
        .limits
        .sessions
        .take(limits::keys(client, owner.as_deref()))
    {
        Ok(held) => held,
        Err(refusal) => {
            tracing::info!(%client, "initialize refused: {}", refusal.message);
            return refusal.response(id);
        }
    };
    let requested = params.get("protocolVersion").and_then(Value::as_str);
    let version = requested
        .filter(|v| SUPPORTED_VERSIONS.contains(v))
        .unwrap_or(guard::LATEST_VERSION);
    let session = st
        .sessions
        .open(
            ClientAsks::from_capabilities(params.get("capabilities")),
            owner,
            version,
            held,
            st.limits.sessions.max(),
        )
        .await;
    let Some(session) = session else {
        let refusal = st
            .limits
            .sessions
            .refusal("client address or principal, across the cluster");
        tracing::info!(%client, "initialize refused: {}", refusal.message);
        return refusal.response(id);
    };
    let result = json!({
        "protocolVersion": version,
        "capabilities": advertised(st, toolset),
        "serverInfo": { "name": "hangar", "version": env!("CARGO_PKG_VERSION") },
    });
    let mut response = reply(id, &result);
    response.headers_mut().insert(
        SESSION_HEADER,
        HeaderValue::from_str(&session.id).expect("session ids are ASCII"),
    );
    response
}

/// A notification from the client: `notifications/cancelled` stops the
/// call it names, here or (`[cluster]`) on the replica that runs it.
pub(super) async fn notification(
    st: &McpState,
    session: Option<&Session>,
    method: &str,
    params: &Map<String, Value>,
) {
    if method == "notifications/cancelled"
        && let (Some(session), Some(request_id)) = (session, params.get("requestId"))
        && !session.cancel(request_id)
    {
        match &st.cluster {
            Some(cluster) => replicas::pass_cancel(cluster, &session.id, request_id).await,
            None => tracing::debug!(%request_id, "cancel for a request that is not running"),
        }
    }
}

pub(super) async fn set_level(st: &McpState, req: &Request<'_>) -> Response {
    let level = req
        .params
        .get("level")
        .and_then(|l| serde_json::from_value::<LogLevel>(l.clone()).ok());
    match (level, &req.session) {
        (None, _) => reply_error(
            &req.id,
            &RpcError::invalid_params(
                "level must be one of debug, info, notice, warning, error, critical, alert, emergency",
            ),
        ),
        (Some(level), Some(session)) => {
            st.sessions.set_log_level(session, level).await;
            reply(&req.id, &json!({}))
        }
        // Without a session there is nowhere to keep the level.
        (Some(_), None) => reply(&req.id, &json!({})),
    }
}
