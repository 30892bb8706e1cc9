//! One message of the 2025 revisions answered: `initialize` opens a
//! session; any other message names its session (`Mcp-Session-Id`), if
//! any; a response answers a question a call put to the client, a
//! notification may cancel a call, and a request is answered by method —
//! the legacy front's own methods here, the shared ones by
//! `methods::answer`.

use std::net::SocketAddr;

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::front::Legacy;
use super::lifecycle::{initialize, notification, set_level};
use crate::mcp::guard;
use crate::mcp::jsonrpc::{self, Incoming, RpcError};
use crate::mcp::methods::{Era, Method, answer};
use crate::mcp::offers;
use crate::mcp::replicas;
use crate::mcp::reply::{SESSION_HEADER, json_response, reply, reply_error};
use crate::mcp::request::Request;
use crate::mcp::state::McpState;
use hangar_core::call::{Principal, Toolset};

/// A message of the 2025 revisions (`message`, with its `headers`) from
/// `client`, with the principal of its bearer token and the endpoint's
/// toolset.
pub(in crate::mcp) async fn post(
    st: &McpState,
    client: SocketAddr,
    token: Option<Principal>,
    toolset: Option<Toolset>,
    headers: &HeaderMap,
    message: Incoming,
) -> Response {
    if let Err(refusal) = guard::check_version(headers) {
        return refusal.into_response();
    }
    if let Incoming::Request { id, method, params } = &message
        && Method::spoken_in(method, Era::Legacy) == Some(Method::Initialize)
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
            let Some(method) = Method::spoken_in(&method, Era::Legacy) else {
                let error = RpcError::new(
                    jsonrpc::METHOD_NOT_FOUND,
                    format!("Method not found: {method}"),
                );
                return reply_error(&id, &error);
            };
            let request = Request {
                id,
                params,
                session,
                headers,
                client,
                token,
                front: &Legacy,
                toolset,
            };
            match method {
                Method::Ping => reply(&request.id, &json!({})),
                Method::SetLogLevel => Box::pin(set_level(st, &request)).await,
                Method::Subscribe => Box::pin(offers::subscribe(st, &request, true)).await,
                Method::Unsubscribe => Box::pin(offers::subscribe(st, &request, false)).await,
                // Answered above, before any session was looked for: a
                // second `initialize` on a session opens another.
                Method::Initialize => unreachable!("initialize is answered before its session"),
                shared => match answer(st, shared, request).await {
                    Some(answer) => answer,
                    None => unreachable!("{} is answered above", shared.name()),
                },
            }
        }
    }
}

fn session_not_found(message: &Incoming) -> Response {
    let id = match message {
        Incoming::Request { id, .. } => id.clone(),
        _ => Value::Null,
    };
    let error = RpcError::new(-32001, "Session not found");
    json_response(StatusCode::NOT_FOUND, jsonrpc::error_body(&id, &error))
}
