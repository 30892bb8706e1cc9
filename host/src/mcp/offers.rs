//! `resources/*`, `prompts/*` and `completion/complete`: small handlers
//! over the pipeline, and the one place their `CallError`s become JSON-RPC.

use axum::response::Response;
use serde::Serialize;
use serde_json::{Map, Value, json};

use tokio::sync::mpsc;

use super::jsonrpc::{self, RpcError};
use super::listing::page;
use super::reply::{json_response, reply};
use super::request::{Request, Rounds};
use super::state::McpState;
use hangar_core::call::{CallError, CallEvent, CompletionRef, ErrorKind, EventSink, Stage};

/// A listing method's answer: one page of `items` under `key`.
fn listing<T: Serialize>(
    req: &Request<'_>,
    key: &str,
    items: Vec<&T>,
    page_size: usize,
) -> Response {
    match page(&req.params, &items, page_size) {
        Ok((items, next)) => {
            let mut result = json!({ key: items });
            if let Some(next) = next {
                result["nextCursor"] = Value::String(next);
            }
            req.reply(&result)
        }
        Err(e) => req.fail(&e),
    }
}

pub(super) async fn resources_list(st: &McpState, req: &Request<'_>) -> Response {
    let pipeline = st.pipeline.for_listing().await;
    let principal = pipeline.listing_principal(&req.context(st)).await;
    let mut items = pipeline.listed_resources(principal.as_ref(), req.toolset.as_ref());
    // The session's artifacts follow (its own, or its principal's without one).
    let subject = principal.as_ref().or(req.token.as_ref());
    let artifacts = pipeline.listed_artifacts(
        req.session.as_ref().map(|s| s.id.as_str()),
        subject.map(|p| p.subject.as_str()),
    );
    items.extend(artifacts.iter());
    listing(req, "resources", items, st.page_size)
}

pub(super) async fn templates_list(st: &McpState, req: &Request<'_>) -> Response {
    let pipeline = st.pipeline.for_listing().await;
    let principal = pipeline.listing_principal(&req.context(st)).await;
    let items = pipeline.listed_templates(principal.as_ref(), req.toolset.as_ref());
    listing(req, "resourceTemplates", items, st.page_size)
}

pub(super) async fn prompts_list(st: &McpState, req: &Request<'_>) -> Response {
    let pipeline = st.pipeline.current();
    let principal = pipeline.listing_principal(&req.context(st)).await;
    let items = pipeline.listed_prompts(principal.as_ref(), req.toolset.as_ref());
    // Pinned as tools are (`[server] pinning`).
    let session = req.session.as_deref();
    let (pins, id) = (
        session.map(|s| &*s.pins),
        session.map_or("", |s| s.id.as_str()),
    );
    let mode = pipeline.catalog().pinning();
    let items: Vec<Value> = (items.into_iter())
        .map(|def| super::pins::listed(pins, mode, id, def))
        .collect();
    listing(req, "prompts", items.iter().collect(), st.page_size)
}

fn uri_param(req: &Request<'_>) -> Result<String, RpcError> {
    match req.params.get("uri") {
        Some(Value::String(uri)) if !uri.is_empty() => Ok(uri.clone()),
        _ => Err(RpcError::invalid_params("uri must be a non-empty string")),
    }
}

pub(super) async fn resources_read(st: &McpState, req: &Request<'_>) -> Response {
    let uri = match uri_param(req) {
        Ok(uri) => uri,
        Err(e) => return req.fail(&e),
    };
    let mut cx = req.context(st);
    match st.pipeline.current().read_resource(&uri, &mut cx).await {
        Ok(result) => req.reply(&result),
        Err(e) => req.fail(&offer_error(&e, &cx.trace_id, Some(&uri))),
    }
}

/// The longest URI a session may subscribe to: subscriptions are kept on
/// the session (with `[cluster]`, in its Redis record), so they are
/// bounded in number (`max_subscriptions_per_session`) and in length.
const MAX_SUBSCRIBED_URI_BYTES: usize = 2048;

/// `resources/subscribe`: remembered on the session; updates of the URI
/// are sent on the session's GET stream. Only what the caller could read
/// can be watched: a resource hidden from it (`visible_to`) answers as an
/// unknown one, and a session holds at most `max_subscriptions_per_session`.
pub(super) async fn subscribe(st: &McpState, req: &Request<'_>, on: bool) -> Response {
    let uri = match uri_param(req) {
        Ok(uri) => uri,
        Err(e) => return req.fail(&e),
    };
    let Some(session) = &req.session else {
        return req.fail(&RpcError::invalid_params(
            "subscriptions need a session (Mcp-Session-Id)",
        ));
    };
    if on {
        if uri.len() > MAX_SUBSCRIBED_URI_BYTES {
            return req.fail(&RpcError::invalid_params(format!(
                "uri longer than {MAX_SUBSCRIBED_URI_BYTES} bytes"
            )));
        }
        let mut cx = req.context(st);
        if let Err(e) = st.pipeline.current().watchable(&uri, &mut cx).await {
            return req.fail(&offer_error(&e, &cx.trace_id, Some(&uri)));
        }
    }
    let max = st.limits.max_subscriptions;
    if !st.sessions.subscribe(session, &uri, on, max).await {
        return req.fail(&RpcError {
            code: jsonrpc::SERVER_ERROR,
            message: format!(
                "Too many subscriptions: at most {max} per session; unsubscribe from one first"
            ),
            data: Some(json!({ "max_subscriptions_per_session": max })),
        });
    }
    req.reply(&json!({}))
}

/// Prompt arguments are strings by name.
fn string_map(v: Option<&Value>, what: &str) -> Result<Map<String, Value>, RpcError> {
    match v {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(m)) if m.values().all(Value::is_string) => Ok(m.clone()),
        Some(_) => Err(RpcError::invalid_params(format!(
            "{what} must be an object of strings"
        ))),
    }
}

pub(super) async fn prompts_get(st: &McpState, req: &Request<'_>) -> Response {
    let Some(name) = req.params.get("name").and_then(Value::as_str) else {
        return req.fail(&RpcError::invalid_params("prompts/get needs a name"));
    };
    let args = match string_map(req.params.get("arguments"), "arguments") {
        Ok(a) => a,
        Err(e) => return req.fail(&e),
    };
    match req.front.rounds(req, name, &Value::Object(args.clone())) {
        Ok(Some(rounds)) => return prompt_in_rounds(st, req, rounds, name, args).await,
        Ok(None) => {}
        Err(e) => return req.fail(&e),
    }
    let mut cx = req.context(st);
    match st.pipeline.current().get_prompt(name, &args, &mut cx).await {
        Ok(result) => req.reply(&result),
        Err(e) => req.fail(&offer_error(&e, &cx.trace_id, None)),
    }
}

/// `prompts/get` through a front that asks in rounds: the prompt's
/// questions to the client become its input-required rounds, as a tool
/// call's do.
async fn prompt_in_rounds(
    st: &McpState,
    req: &Request<'_>,
    mut rounds: Box<dyn Rounds>,
    name: &str,
    args: Map<String, Value>,
) -> Response {
    let (tx, mut rx) = mpsc::channel(16);
    let mut cx = req.context(st);
    cx.events = EventSink::new(tx, None, false).with_askable(req.front.askable(req, true));
    let cancel = cx.cancel.clone();
    let _cancel_on_drop = cx.cancel.drop_guard();
    let pipeline = st.pipeline.current();
    let prompt = name.to_string();
    let mut task = tokio::spawn(async move {
        let result = pipeline.get_prompt(&prompt, &args, &mut cx).await;
        (result, cx.trace_id)
    });
    let joined = loop {
        tokio::select! {
            biased;
            Some(event) = rx.recv() => {
                if let CallEvent::Question(ask) = event
                    && !rounds.ask(ask)
                {
                    cancel.cancel();
                }
            }
            joined = &mut task => break joined,
        }
    };
    if let Some(round) = rounds.input_required() {
        return reply(&req.id, &round);
    }
    match joined {
        Ok((Ok(result), _)) => req.reply(&result),
        Ok((Err(e), trace_id)) => match rounds.missing_capability() {
            Some(missing) => json_response(
                axum::http::StatusCode::BAD_REQUEST,
                jsonrpc::error_body(&req.id, &missing),
            ),
            None => req.fail(&offer_error(&e, &trace_id, None)),
        },
        Err(e) => {
            tracing::error!("prompt task failed: {e}");
            req.fail(&RpcError::new(-32603, "Internal error"))
        }
    }
}

pub(super) async fn complete(st: &McpState, req: &Request<'_>) -> Response {
    let reference = req.params.get("ref");
    let kind = reference
        .and_then(|r| r.get("type"))
        .and_then(Value::as_str);
    let reference = match kind {
        Some("ref/prompt") => reference
            .and_then(|r| r.get("name"))
            .and_then(Value::as_str)
            .map(|n| CompletionRef::Prompt(n.to_string())),
        Some("ref/resource") => reference
            .and_then(|r| r.get("uri"))
            .and_then(Value::as_str)
            .map(|u| CompletionRef::ResourceTemplate(u.to_string())),
        _ => None,
    };
    let Some(reference) = reference else {
        return req.fail(&RpcError::invalid_params(
            "ref must be {type: \"ref/prompt\", name} or {type: \"ref/resource\", uri}",
        ));
    };
    let argument = req.params.get("argument");
    let (Some(arg_name), Some(value)) = (
        argument.and_then(|a| a.get("name")).and_then(Value::as_str),
        argument
            .and_then(|a| a.get("value"))
            .and_then(Value::as_str),
    ) else {
        return req.fail(&RpcError::invalid_params(
            "argument must be {name, value} strings",
        ));
    };
    let context = match string_map(
        req.params.get("context").and_then(|c| c.get("arguments")),
        "context.arguments",
    ) {
        Ok(c) => c,
        Err(e) => return req.fail(&e),
    };
    let mut cx = req.context(st);
    match st
        .pipeline
        .current()
        .complete(&reference, arg_name, value, &context, &mut cx)
        .await
    {
        Ok(completion) => req.reply(&json!({ "completion": completion })),
        Err(e) => req.fail(&offer_error(&e, &cx.trace_id, None)),
    }
}

/// The one place a resource, prompt or completion `CallError` becomes a
/// JSON-RPC error: an unknown resource is `-32002`, an unknown prompt or a
/// bad argument `-32602`; the rest as for tools.
fn offer_error(e: &CallError, trace_id: &str, uri: Option<&str>) -> RpcError {
    match (e.kind, uri) {
        (ErrorKind::NotFound, Some(uri)) => RpcError {
            code: jsonrpc::RESOURCE_NOT_FOUND,
            message: "Resource not found".into(),
            data: Some(json!({ "uri": uri })),
        },
        (ErrorKind::NotFound, None) | (ErrorKind::Invalid, _)
            if matches!(e.stage, Stage::Resolve | Stage::Validate | Stage::Handler) =>
        {
            RpcError::invalid_params(e.to_string())
        }
        _ => RpcError::from_call(e, trace_id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_resources_and_prompts_get_their_codes() {
        let e = offer_error(&CallError::resource_not_found("x://y"), "", Some("x://y"));
        assert_eq!(e.code, super::super::jsonrpc::RESOURCE_NOT_FOUND);
        let e = offer_error(&CallError::prompt_not_found("p"), "", None);
        assert_eq!(e.code, super::super::jsonrpc::INVALID_PARAMS);
        let e = CallError::new(Stage::Handler, ErrorKind::Failed, "boom");
        assert_eq!(
            offer_error(&e, "t", None).code,
            super::super::jsonrpc::SERVER_ERROR
        );
    }
}
