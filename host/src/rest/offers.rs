//! `GET /resources`, `GET /resources/read?uri=…`, `GET /prompts` and
//! `POST /prompts/{name}/get`: small handlers over the pipeline answering
//! MCP's result shapes, and [`OfferError`], the one place their failures
//! become statuses.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;
use serde_json::{Map, Value};

use super::reply::{Traced, error, retry_later};
use super::request::{Caller, Rest};
use crate::catalog::{Provider, ResolvedResource};
use hangar_core::call::{CallContext, CallError, ErrorKind, PromptDef, ResourceDef, TemplateDef};

pub(super) fn routes() -> Router<Arc<Rest>> {
    Router::new()
        .route("/resources", get(list_resources))
        .route("/resources/read", get(read_resource))
        .route("/prompts", get(list_prompts))
        .route("/prompts/{name}/get", post(get_prompt))
}

/// Why a resource or prompt request has no result.
#[derive(Debug)]
enum OfferError {
    /// The request is malformed; found before the pipeline runs.
    BadRequest(&'static str),
    /// The pipeline stopped, with the trace id of the attempt (boxed: a
    /// `CallError` is large, and most of these results are `Ok`).
    Call(Box<CallError>, String),
}

impl OfferError {
    fn call(e: CallError, cx: &CallContext) -> OfferError {
        OfferError::Call(Box::new(e), cx.trace_id.clone())
    }
}

#[derive(Serialize)]
struct ErrorBody {
    error: String,
}

/// Unknown or hidden → 404, refused by auth → 401, a bad request or bad
/// arguments → 400 (`{"error": …}`, as the tools routes answer); busy → 503
/// with `Retry-After`, any other failure → 500, both with the trace id.
impl IntoResponse for OfferError {
    fn into_response(self) -> Response {
        let (e, trace_id) = match self {
            OfferError::BadRequest(message) => return error(StatusCode::BAD_REQUEST, message),
            OfferError::Call(e, trace_id) => (*e, trace_id),
        };
        let traced = |status| {
            let body = ErrorBody {
                error: e.to_string(),
            };
            (status, Json(Traced::new(&body, &trace_id))).into_response()
        };
        match e.kind {
            ErrorKind::NotFound => error(StatusCode::NOT_FOUND, &e.to_string()),
            ErrorKind::Unauthorized => error(StatusCode::UNAUTHORIZED, "Unauthorized"),
            ErrorKind::InsufficientScope => error(StatusCode::FORBIDDEN, "insufficient_scope"),
            ErrorKind::Invalid => error(StatusCode::BAD_REQUEST, &e.to_string()),
            ErrorKind::Busy => retry_later(traced(StatusCode::SERVICE_UNAVAILABLE)),
            ErrorKind::Limit
            | ErrorKind::Cancelled
            | ErrorKind::Failed
            | ErrorKind::RateLimited => traced(StatusCode::INTERNAL_SERVER_ERROR),
        }
    }
}

/// What `GET /resources` answers: MCP's two listings in one.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Resources<'a> {
    resources: Vec<Sourced<&'a ResourceDef>>,
    resource_templates: Vec<Sourced<&'a TemplateDef>>,
}

/// A resource or template as MCP lists it, with the plugin or upstream
/// that serves it: an MCP App's view may read only its own server's
/// resources, which the explorer tells by these.
#[derive(Serialize)]
struct Sourced<T> {
    #[serde(flatten)]
    def: T,
    #[serde(skip_serializing_if = "Option::is_none")]
    plugin: Option<Server>,
    #[serde(skip_serializing_if = "Option::is_none")]
    upstream: Option<Server>,
    /// What serves it: the explorer's groups.
    source: super::source::Source,
}

/// A plugin's name, or `[upstreams.NAME]`.
#[derive(Serialize)]
struct Server {
    name: String,
}

impl<T> Sourced<T> {
    /// `def`, served by `provider` (a `[[resources]]` statement: by neither).
    fn new(def: T, provider: Option<&Provider>) -> Sourced<T> {
        let server = |name: &str| {
            Some(Server {
                name: name.to_string(),
            })
        };
        let (plugin, upstream) = match provider {
            Some(Provider::Wasm(plugin)) => (server(plugin.name()), None),
            Some(Provider::Upstream(upstream)) => (None, server(&upstream.name)),
            Some(Provider::Sql(_)) | None => (None, None),
        };
        Sourced {
            def,
            plugin,
            upstream,
            source: super::source::Source::of_provider(provider),
        }
    }
}

#[derive(Serialize)]
struct Prompts<'a> {
    prompts: Vec<Sourced<&'a PromptDef>>,
}

async fn list_resources(caller: Caller) -> Response {
    let (pipeline, principal) = caller.listing("/resources").await;
    let offered = pipeline.catalog().offered();
    let resources = pipeline.listed_resources(principal.as_ref(), caller.toolset.as_ref());
    let templates = pipeline.listed_templates(principal.as_ref(), caller.toolset.as_ref());
    let by_template: HashMap<&str, &Provider> = (offered.templates.iter())
        .map(|t| (t.def.uri_template.as_str(), &t.provider))
        .collect();
    Json(Resources {
        resources: resources
            .into_iter()
            .map(|def| {
                let provider = match offered.resolve_resource(&def.uri) {
                    Ok(ResolvedResource::Fixed(r)) => Some(&r.provider),
                    _ => None,
                };
                Sourced::new(def, provider)
            })
            .collect(),
        resource_templates: templates
            .into_iter()
            .map(|def| Sourced::new(def, by_template.get(def.uri_template.as_str()).copied()))
            .collect(),
    })
    .into_response()
}

async fn list_prompts(caller: Caller) -> Response {
    let (pipeline, principal) = caller.listing("/prompts").await;
    let offered = pipeline.catalog().offered();
    let provider = |name: &str| {
        (offered.prompts.iter())
            .find(|p| p.def.name == name)
            .map(|p| &p.provider)
    };
    Json(Prompts {
        prompts: pipeline
            .listed_prompts(principal.as_ref(), caller.toolset.as_ref())
            .into_iter()
            .map(|def| Sourced::new(def, provider(&def.name)))
            .collect(),
    })
    .into_response()
}

/// A `ReadResourceResult`, with the trace id in `_meta` (beside what an
/// upstream server put there; Hangar's key wins).
async fn read_resource(caller: Caller, RawQuery(query): RawQuery) -> Result<Response, OfferError> {
    let uri = uri_param(query.as_deref())?;
    let mut cx = caller.context("GET", "/resources/read");
    let result = caller
        .rest
        .pipeline
        .current()
        .read_resource(&uri, &mut cx)
        .await;
    let mut result = result.map_err(|e| OfferError::call(e, &cx))?;
    if !cx.trace_id.is_empty() {
        let meta = result.meta.get_or_insert_default();
        meta.insert("_trace_id".into(), Value::String(cx.trace_id.clone()));
    }
    Ok(Json(result).into_response())
}

/// A `GetPromptResult`, with the trace id in `_meta`.
async fn get_prompt(
    Path(name): Path<String>,
    caller: Caller,
    body: Bytes,
) -> Result<Response, OfferError> {
    let arguments = prompt_arguments(&body)?;
    let path = format!("/prompts/{name}/get");
    let mut cx = caller.context("POST", &path);
    let result = caller
        .rest
        .pipeline
        .current()
        .get_prompt(&name, &arguments, &mut cx)
        .await;
    let result = result.map_err(|e| OfferError::call(e, &cx))?;
    Ok(Json(Traced::new(&result, &cx.trace_id)).into_response())
}

/// The `uri` query parameter (percent-decoded), which must be there and
/// not be empty.
fn uri_param(query: Option<&str>) -> Result<String, OfferError> {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .find(|(key, _)| key == "uri")
        .map(|(_, uri)| uri.into_owned())
        .filter(|uri| !uri.is_empty())
        .ok_or(OfferError::BadRequest(
            "the uri query parameter is required",
        ))
}

/// A prompt's arguments: the body's JSON object (no body or `null`: none).
/// The pipeline checks that each is a string and the required are there.
fn prompt_arguments(body: &[u8]) -> Result<Map<String, Value>, OfferError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice(body) {
        Ok(Value::Object(arguments)) => Ok(arguments),
        Ok(Value::Null) => Ok(Map::new()),
        _ => Err(OfferError::BadRequest(
            "the body must be a JSON object of string arguments",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hangar_core::call::Stage;

    fn status(e: OfferError) -> StatusCode {
        e.into_response().status()
    }

    #[test]
    fn each_kind_of_failure_gets_its_status() {
        let call = |kind| {
            OfferError::Call(
                Box::new(CallError::new(Stage::Handler, kind, "m")),
                "t".into(),
            )
        };
        assert_eq!(
            status(OfferError::call(
                CallError::resource_not_found("x://y"),
                &CallContext::default()
            )),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            status(call(ErrorKind::Unauthorized)),
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(status(call(ErrorKind::Invalid)), StatusCode::BAD_REQUEST);
        assert_eq!(
            status(call(ErrorKind::Failed)),
            StatusCode::INTERNAL_SERVER_ERROR
        );
        assert_eq!(
            status(call(ErrorKind::Limit)),
            StatusCode::INTERNAL_SERVER_ERROR
        );
        let busy = call(ErrorKind::Busy).into_response();
        assert_eq!(busy.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(busy.headers()["retry-after"], "1");
        assert_eq!(
            status(OfferError::BadRequest("no")),
            StatusCode::BAD_REQUEST
        );
    }

    #[test]
    fn the_uri_is_decoded_and_required() {
        let uri = uri_param(Some("uri=test%3A%2F%2Fa%20b&x=1")).unwrap();
        assert_eq!(uri, "test://a b");
        for query in [None, Some(""), Some("uri="), Some("url=test://a")] {
            assert!(uri_param(query).is_err(), "{query:?}");
        }
    }

    #[test]
    fn prompt_arguments_are_an_object_or_nothing() {
        assert!(prompt_arguments(b"").unwrap().is_empty());
        assert!(prompt_arguments(b" null ").unwrap().is_empty());
        let args = prompt_arguments(br#"{"arg1": "a"}"#).unwrap();
        assert_eq!(args["arg1"], "a");
        for body in [&b"[1]"[..], b"\"a\"", b"{oops"] {
            assert!(prompt_arguments(body).is_err());
        }
    }
}
