//! One `/mcp` message handed to its front: checked against DNS rebinding,
//! parsed, and given whole to the front of the revision it speaks
//! (`legacy/` or `modern/`). `POST /mcp` (the router in the parent module)
//! and the stdio transport (`stdio.rs`) both answer through [`dispatch`];
//! what they share of the fronts is [`Fronts`].

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::FromRef;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use super::jsonrpc::{self, Incoming};
use super::legacy;
use super::methods::Era;
use super::modern::{self, Modern};
use super::reply::json_response;
use super::state::McpState;

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
        return refusal.into_response();
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
    if modern::era(headers, params) == Era::Modern {
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
    legacy::post(st, client, token, toolset, headers, message).await
}
