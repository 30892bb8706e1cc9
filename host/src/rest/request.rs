//! What every REST handler starts from: the shared [`Rest`] state and the
//! [`Caller`] extractor (state, client address, bearer principal, headers),
//! which makes the call context and the listing principal, so no handler
//! repeats that preamble.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRequestParts, State};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};

use crate::pipeline::{Live, Pipeline};
use hangar_core::call::{CallContext, Principal, RequestInfo, Surface, Toolset};

/// What the REST handlers share.
pub struct Rest {
    /// The pipeline in service; each request takes its current one once.
    pub pipeline: Live,
    /// `false` answers every call with 403 (the catalog stays browsable).
    pub allow_execute: bool,
    /// `false`: no trace ids are made, and results carry no `_meta`.
    pub trace_ids: bool,
    /// Serve the explorer page at `/ui`.
    pub ui: bool,
    /// The MCP revisions `/mcp` speaks, which the explorer's landing view
    /// names (the server knows both surfaces; REST does not ask MCP).
    pub protocols: Vec<&'static str>,
}

/// The principal of a request's bearer token, when `[oauth]` protects REST.
pub(crate) type Token = Option<axum::Extension<hangar_core::call::Principal>>;

/// The toolset a REST router serves (`/toolsets/NAME/…`), when it serves one.
type ToolsetOf = Option<axum::Extension<Toolset>>;

/// Who asks, as every REST handler sees it: the shared state, the
/// client's address, the bearer token's principal (`[oauth]` with
/// `rest = true`) and the request headers.
pub(super) struct Caller {
    pub(super) rest: Arc<Rest>,
    client: SocketAddr,
    token: Token,
    headers: HeaderMap,
    /// The toolset the route serves; `None`: the whole catalog.
    pub(super) toolset: Option<Toolset>,
}

impl FromRequestParts<Arc<Rest>> for Caller {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<Rest>) -> Result<Self, Response> {
        let State(rest) = State::<Arc<Rest>>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let ConnectInfo(client) = ConnectInfo::<SocketAddr>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let token = <Token as FromRequestParts<Arc<Rest>>>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let headers = HeaderMap::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let toolset = <ToolsetOf as FromRequestParts<Arc<Rest>>>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(Caller {
            rest,
            client,
            token,
            headers,
            toolset: toolset.map(|t| t.0),
        })
    }
}

impl Caller {
    /// A context for this REST request, as the auth stage sees it.
    pub(super) fn context(&self, method: &str, path: &str) -> CallContext {
        let info = RequestInfo::new(
            Surface::Rest,
            method,
            path,
            &self.headers,
            Some(self.client),
        );
        let mut cx = CallContext::traced(info.traceparent(), self.rest.trace_ids);
        // `[oauth]` with `rest = true`: the bearer token's principal, which the
        // middleware put in place of the `Authorization` header.
        cx.principal = self.token.clone().map(|t| t.0);
        cx.toolset = self.toolset.clone();
        cx.request = Some(Arc::new(info));
        cx
    }

    /// The pipeline in service and who asks it for a listing: what every
    /// listing handler (tools, one tool, the OpenAPI document, resources,
    /// prompts) starts with, so each lists what that caller may see.
    pub(super) async fn listing(&self, path: &str) -> (Arc<Pipeline>, Option<Principal>) {
        let cx = self.context("GET", path);
        let pipeline = self.rest.pipeline.for_listing().await;
        let principal = pipeline.listing_principal(&cx).await;
        (pipeline, principal)
    }
}
