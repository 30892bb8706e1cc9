//! Dispatching one modern POST: admitted, then handed to the same handlers
//! the 2025 revisions use, with no session, through this front
//! ([`ModernRequest`]); what only this revision has (`server/discover`,
//! tasks, `subscriptions/listen`) is answered here.

use std::collections::HashSet;
use std::net::SocketAddr;

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::admit::{admit, all_versions};
use super::front::{Modern, ModernRequest};
use super::listen::{Filter, open as listen};
use super::meta::RequestMeta;
use super::task_calls::{self, missing_extension, owner};
use super::tasks::EXTENSION;
use crate::mcp::advertised::advertised;
use crate::mcp::jsonrpc::{self, Incoming, RpcError};
use crate::mcp::methods::{Era, Method, answer};
use crate::mcp::reply::json_response;
use crate::mcp::request::Request;
use crate::mcp::state::McpState;
use crate::mcp::{calls, limits};

/// A modern POST: admitted (`_meta`, headers, version) and dispatched with
/// no session. Each request stands alone; answers are modern results.
pub(in crate::mcp) async fn post(
    st: &McpState,
    modern: &Modern,
    client: SocketAddr,
    token: Option<hangar_core::call::Principal>,
    toolset: Option<hangar_core::call::Toolset>,
    headers: &HeaderMap,
    message: Incoming,
) -> Response {
    let (id, method, params) = match message {
        Incoming::Request { id, method, params } => (id, method, params),
        // No client notification is defined on HTTP; cancelling is closing the stream.
        Incoming::Notification { .. } => return StatusCode::ACCEPTED.into_response(),
        Incoming::Response { id, .. } => {
            let error = RpcError::new(
                jsonrpc::INVALID_REQUEST,
                "Invalid Request: clients send no JSON-RPC responses in protocol 2026-07-28",
            );
            return json_response(StatusCode::BAD_REQUEST, jsonrpc::error_body(&id, &error));
        }
    };
    let meta = match admit(headers, &method, &params) {
        Ok(meta) => meta,
        Err(refused) => {
            return json_response(refused.status, jsonrpc::error_body(&id, &refused.error));
        }
    };
    let Some(method) = Method::spoken_in(&method, Era::Modern) else {
        let error = RpcError::new(
            jsonrpc::METHOD_NOT_FOUND,
            format!("Method not found: {method}"),
        );
        return json_response(StatusCode::NOT_FOUND, jsonrpc::error_body(&id, &error));
    };
    let front = ModernRequest {
        meta,
        method,
        per_caller: st.pipeline.current().catalog().per_caller(),
        modern,
    };
    let request = Request {
        id,
        params,
        session: None,
        headers,
        client,
        token,
        front: &front,
        toolset,
    };
    let meta = &front.meta;
    match method {
        Method::Discover => discover(st, modern, &request),
        // A tool that runs as a task is answered by the tasks extension.
        Method::ToolsCall => match task_calls::tools_call(st, modern, meta, &request).await {
            Some(answer) => answer,
            None => calls::tools_call(st, request).await,
        },
        Method::TasksGet | Method::TasksCancel | Method::TasksUpdate => {
            task_calls::handle(st, modern, meta, &request, method).await
        }
        Method::Listen => Box::pin(subscriptions_listen(st, meta, client, &request)).await,
        shared => match answer(st, shared, request).await {
            Some(answer) => answer,
            None => unreachable!("{} is answered above", shared.name()),
        },
    }
}

/// `subscriptions/listen`: a stream of the changes and task updates the
/// filter names, within the client's `max_streams_per_client`.
async fn subscriptions_listen(
    st: &McpState,
    meta: &RequestMeta,
    client: SocketAddr,
    request: &Request<'_>,
) -> Response {
    let filter = match Filter::parse(&request.params) {
        Ok(filter) => filter,
        Err(e) => return request.fail(&e),
    };
    if filter.wants_tasks() && !meta.declares_extension(EXTENSION) {
        return missing_extension(request, "task notifications need it");
    }
    if filter.watched() > st.limits.max_subscriptions {
        return request.fail(&RpcError::invalid_params(format!(
            "too many resourceSubscriptions or taskIds: at most {} each",
            st.limits.max_subscriptions
        )));
    }
    // One of the client's and principal's `max_streams_per_client`.
    let subject = request.token.as_ref().map(|t| t.subject.as_str());
    let slot = match st.limits.streams.take(limits::keys(client, subject)) {
        Ok(slot) => slot,
        Err(refusal) => {
            tracing::info!(%client, "subscriptions/listen refused: {}", refusal.message);
            return refusal.response(&request.id);
        }
    };
    // Each resource watched passes what `resources/subscribe` checks; one
    // that does not is left out of the acknowledgement.
    let pipeline = st.pipeline.current();
    let mut honoured = HashSet::new();
    for uri in filter.uris() {
        let mut cx = request.context(st);
        if pipeline.watchable(uri, &mut cx).await.is_ok() {
            honoured.insert(uri.clone());
        }
    }
    let filter = (filter.watching(honoured))
        .owned_by(owner(request))
        .at(request.toolset.clone());
    listen(
        request.id.clone(),
        filter,
        pipeline.changes(),
        st.closing.subscribe(),
        slot,
    )
}

/// `server/discover`: the revisions spoken, what is offered, who answers.
fn discover(st: &McpState, modern: &Modern, req: &Request<'_>) -> Response {
    let mut caps = advertised(st, req.toolset.as_ref());
    // Logging is opted into per request in this revision.
    if let Some(caps) = caps.as_object_mut() {
        caps.remove("logging");
        if modern.tasks.available() {
            let extensions = caps.entry("extensions").or_insert_with(|| json!({}));
            extensions[EXTENSION] = json!({});
        }
    }
    req.reply(&json!({
        "supportedVersions": all_versions(),
        "capabilities": caps,
    }))
}
