//! The REST surface: `GET /tools`, `GET /tools/{name}`,
//! `POST /tools/{name}/call`, resources and prompts (see [`offers`]),
//! `GET /openapi.json`, and the explorer page at `/ui` (with `/ui/frame`,
//! where it renders an MCP App's view).

mod app_frame;
mod explorer;
mod offers;
mod openapi;
mod reply;
mod request;
mod source;

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Serialize;
use serde_json::{Value, json};

use crate::catalog::{Annotations, Backend};
use crate::pipeline::meta;
use hangar_core::call::{CallError, ErrorKind, ToolResult};
use reply::{error, retry_later};
use request::Caller;
pub use request::Rest;

pub fn router(rest: Rest) -> Router {
    let ui = rest.ui;
    let router = Router::new()
        .route("/tools", get(list))
        .route("/tools/{name}", get(describe))
        .route("/tools/{name}/call", post(call))
        .merge(offers::routes())
        .route("/openapi.json", get(openapi_json));
    let router = if ui {
        router
            .route("/ui", get(explorer_page))
            .route("/ui/frame", get(app_frame::frame))
    } else {
        router
    };
    router.with_state(Arc::new(rest))
}

/// The document for the caller: the tools `GET /tools` lists it, no others.
async fn openapi_json(caller: Caller) -> Response {
    let (pipeline, principal) = caller.listing("/openapi.json").await;
    let listed = pipeline
        .listed(principal.as_ref(), caller.toolset.as_ref())
        .await;
    let tools: Vec<_> = listed.iter().map(|d| d.as_ref()).collect();
    Json(openapi::document(&tools)).into_response()
}

/// `/ui`, or `/toolsets/NAME/ui`: the explorer of that toolset alone (the
/// default toolset served at `/ui` is the page's whole catalog, as
/// `/tools` is).
async fn explorer_page(
    State(rest): State<Arc<Rest>>,
    axum::extract::OriginalUri(uri): axum::extract::OriginalUri,
    toolset: Option<axum::Extension<hangar_core::call::Toolset>>,
) -> Response {
    let pipeline = rest.pipeline.current();
    let connections = (pipeline.catalog().accounts()).is_some_and(|a| a.configured());
    let nested = uri.path().starts_with("/toolsets/");
    let toolset = toolset.as_ref().filter(|_| nested).map(|t| t.name());
    explorer::page(rest.allow_execute, connections, toolset, &rest.protocols)
}

/// A catalog entry as `GET /tools` lists it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Summary<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<&'a Annotations>,
    /// The tool's `_meta` (an MCP App's `ui.resourceUri`), as MCP lists it.
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    meta: Option<&'a hangar_core::call::Meta>,
    /// A plugin's tool: which plugin, and the name the plugin gives it.
    #[serde(skip_serializing_if = "Option::is_none")]
    plugin: Option<OwnName>,
    /// An upstream's tool: which upstream, and the name it gives the tool.
    /// An MCP App's view names the tools it calls as its own server does,
    /// and may call only its own server's: the explorer maps a view's
    /// names to Hangar's, and refuses the rest, with these two.
    #[serde(skip_serializing_if = "Option::is_none")]
    upstream: Option<OwnName>,
    /// What the tool is (a Rust component, SQL, an upstream…): the
    /// explorer's groups.
    source: source::Source,
}

/// Where a plugin's or an upstream's tool comes from.
#[derive(Serialize)]
struct OwnName {
    /// The plugin's name, or `[upstreams.NAME]`.
    name: String,
    /// The tool's name in that plugin or on that server (before any prefix
    /// or rename).
    tool: String,
}

/// The plugin and the upstream the catalog's tool `name` comes from (at
/// most one of them), and its source. A meta tool (`search_tools`,
/// `call_tool`…) comes from neither, even where a tool of the catalog bears
/// its name: it is the one a call of that name runs, and it reaches every
/// tool; its source is Hangar.
fn origins(
    pipeline: &crate::pipeline::Pipeline,
    name: &str,
) -> (Option<OwnName>, Option<OwnName>, source::Source) {
    let catalog = pipeline.catalog();
    if meta::is_meta(catalog, None, name) {
        return (None, None, source::Source::hangar());
    }
    let Ok(tool) = catalog.resolve(name) else {
        return (None, None, source::Source::hangar());
    };
    let source = source::Source::of_backend(&tool.backend);
    let own = |name: &str, tool: &str| {
        Some(OwnName {
            name: name.to_string(),
            tool: tool.to_string(),
        })
    };
    match &tool.backend {
        Backend::Wasm {
            plugin, guest_name, ..
        } => (own(plugin.name(), guest_name), None, source),
        Backend::Upstream { upstream, remote } => (None, own(&upstream.name, remote), source),
        Backend::Sql(_) | Backend::UploadUrl(_) => (None, None, source),
    }
}

async fn list(caller: Caller) -> Response {
    let (pipeline, principal) = caller.listing("/tools").await;
    let listed = pipeline
        .listed(principal.as_ref(), caller.toolset.as_ref())
        .await;
    let tools: Vec<Summary> = listed
        .iter()
        .map(|d| {
            let (plugin, upstream, source) = origins(&pipeline, &d.name);
            Summary {
                name: &d.name,
                description: &d.description,
                input_schema: &d.input_schema,
                annotations: d.annotations.as_ref(),
                meta: d.meta.as_ref(),
                plugin,
                upstream,
                source,
            }
        })
        .collect();
    Json(tools).into_response()
}

async fn describe(Path(name): Path<String>, caller: Caller) -> Response {
    let path = format!("/tools/{name}");
    let (pipeline, principal) = caller.listing(&path).await;
    let listed = pipeline
        .listed(principal.as_ref(), caller.toolset.as_ref())
        .await;
    let Some(def) = listed.into_iter().find(|d| d.name == name) else {
        return error(StatusCode::NOT_FOUND, &CallError::not_found(&name).message);
    };
    // The definition as MCP lists it, with where it comes from and the
    // limits its calls run under (the explorer's tool page).
    let tool = pipeline.catalog().resolve(&name).ok();
    // A component's imports of the host and what its plugin is granted.
    let grants = tool.as_ref().and_then(|t| match &t.backend {
        Backend::Wasm { plugin, .. } => Some(plugin.reach().to_vec()),
        _ => None,
    });
    let limits = tool.map(|t| {
        json!({
            "fuel": t.limits.fuel,
            "deadline_ms": t.limits.deadline.as_millis() as u64,
            "memory_mib": t.limits.memory_mib,
            "max_concurrent": t.limits.max_concurrent,
            "max_output_bytes": t.limits.max_output_bytes,
        })
    });
    let mut described = serde_json::to_value(&*def).expect("a definition serializes");
    if let Value::Object(fields) = &mut described {
        let source = source::Source::of_tool(&pipeline, &name);
        fields.insert("source".into(), json!(source));
        if let Some(limits) = limits {
            fields.insert("limits".into(), limits);
        }
        if let Some(grants) = grants {
            fields.insert("grants".into(), json!(grants));
        }
    }
    Json(described).into_response()
}

/// Preconditions in order: execution allowed, tool known, body (non-JSON is
/// `{}`), auth; then the pipeline.
async fn call(Path(name): Path<String>, caller: Caller, body: Bytes) -> Response {
    let rest = &caller.rest;
    if !rest.allow_execute {
        return error(StatusCode::FORBIDDEN, "Tool execution is disabled.");
    }
    let p = rest.pipeline.current();
    if let Err(e) = p.resolve(&name, caller.toolset.as_ref())
        && !meta::is_meta(p.catalog(), caller.toolset.as_ref(), &name)
    {
        return error(StatusCode::NOT_FOUND, &e.message);
    }
    // A body that is not JSON is taken as no arguments.
    let args: Value = serde_json::from_slice(&body).unwrap_or_else(|_| json!({}));
    let path = format!("/tools/{name}/call");
    let mut cx = caller.context("POST", &path);
    // The call runs in a task of its own, cancelled when this handler is
    // dropped (hyper drops it when the client hangs up): it then ends
    // through the pipeline as a cancelled call, with its access line and
    // its count, instead of vanishing mid-stage with neither. The call's
    // span keeps the trace id it began with.
    let _cancel_on_drop = cx.cancel.drop_guard();
    let trace_id = cx.trace_id.clone();
    let task = tokio::spawn(async move { Box::pin(p.call(&name, args, &mut cx)).await });
    let outcome = match task.await {
        Ok(ended) => ended,
        Err(e) => {
            tracing::error!("call task failed: {e}");
            return error(StatusCode::INTERNAL_SERVER_ERROR, "Internal error");
        }
    };
    let result = match outcome {
        Ok(result) => result,
        Err(e) => return call_error(&e, &trace_id),
    };
    let status = if result.is_error {
        StatusCode::INTERNAL_SERVER_ERROR
    } else {
        StatusCode::OK
    };
    traced(status, &result, &trace_id)
}

/// The one place a `CallError` becomes a REST response.
fn call_error(e: &CallError, trace_id: &str) -> Response {
    match e.kind {
        ErrorKind::NotFound => error(StatusCode::NOT_FOUND, &e.message),
        ErrorKind::Unauthorized => error(StatusCode::UNAUTHORIZED, "Unauthorized"),
        ErrorKind::InsufficientScope => {
            let mut response = error(StatusCode::FORBIDDEN, "insufficient_scope");
            let scope = e.required_scope.as_deref().unwrap_or_default();
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                crate::oauth::insufficient_scope(scope),
            );
            response
        }
        ErrorKind::Busy => retry_later(traced(
            StatusCode::SERVICE_UNAVAILABLE,
            &ToolResult::error(e.to_string()),
            trace_id,
        )),
        ErrorKind::RateLimited => {
            let mut response = traced(
                StatusCode::TOO_MANY_REQUESTS,
                &ToolResult::error(e.to_string()),
                trace_id,
            );
            // Whole seconds, rounded up: a client waiting that long fits.
            let secs = e
                .retry_after
                .map_or(1, |d| d.as_millis().div_ceil(1000).max(1));
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(secs as u64));
            response
        }
        _ => traced(
            StatusCode::INTERNAL_SERVER_ERROR,
            &ToolResult::error(e.to_string()),
            trace_id,
        ),
    }
}

/// A tool result with the trace id added to its `_meta` (which may already
/// hold what the tool, a mapper or Hangar put there).
fn traced(status: StatusCode, result: &ToolResult, trace_id: &str) -> Response {
    if trace_id.is_empty() {
        return (status, Json(result)).into_response();
    }
    let mut result = result.clone();
    result.set_meta("_trace_id", json!(trace_id));
    (status, Json(result)).into_response()
}
