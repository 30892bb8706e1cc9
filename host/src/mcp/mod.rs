//! MCP over Streamable HTTP at `/mcp` (protocol 2025-11-25, also 2025-06-18
//! and 2025-03-26): JSON-RPC framing, sessions, SSE for calls that report
//! progress or logs, and DNS-rebinding protection.
//!
//! With `[cluster]`, sessions are found on any replica (see
//! [`session`]), and a `notifications/cancelled` or an answer to a
//! server-to-client request that names a call running on another replica
//! is published on the cluster's bus; the replica running it acts on it.

mod asks;
mod calls;
mod guard;
mod jsonrpc;
mod modern;
mod offers;
mod pins;
mod replicas;
mod session;
mod stream;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, State};
use axum::http::header::{ACCEPT, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use serde_json::{Map, Value, json};

pub use guard::{OriginPolicy, SUPPORTED_VERSIONS};

use crate::cluster::Cluster;
use crate::config::ErrorStyle;
use crate::pipeline::{CallContext, Live, LogLevel, RequestInfo, Transport};
use asks::Asks;
use guard::Refusal;
use jsonrpc::{Incoming, RpcError};
pub use session::SessionReport;
use session::{ClientAsks, Session, Sessions};

const SESSION_HEADER: &str = "mcp-session-id";

/// What the `/mcp` handlers share.
pub struct McpState {
    /// The pipeline in service; each request takes its current one once.
    pub pipeline: Live,
    pub policy: OriginPolicy,
    pub page_size: usize,
    pub errors: ErrorStyle,
    pub trace_ids: bool,
    sessions: Sessions,
    /// Questions sent to clients, waiting for their answers.
    asks: Asks,
    /// Turns true at shutdown: `subscriptions/listen` streams end gracefully.
    closing: tokio::sync::watch::Sender<bool>,
    /// Seals the `requestState` of input-required rounds.
    state_key: Arc<modern::StateKey>,
    /// The replicas' shared Redis (`[cluster]`).
    cluster: Option<Arc<Cluster>>,
    /// Tool calls running as tasks (protocol 2026-07-28's tasks extension).
    tasks: Arc<modern::Tasks>,
}

impl McpState {
    /// `max_sessions` live at once, each forgotten after `session_timeout`
    /// unused; `state_key` seals input-required rounds (random when `None`).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        pipeline: Live,
        policy: OriginPolicy,
        page_size: usize,
        errors: ErrorStyle,
        trace_ids: bool,
        max_sessions: usize,
        session_timeout: Duration,
        state_key: Option<&str>,
        cluster: Option<Arc<Cluster>>,
    ) -> McpState {
        let sessions =
            Sessions::with_on_end(max_sessions, session_timeout, session_ended(&pipeline))
                .shared_by(cluster.clone());
        let asks = Asks::default();
        if let Some(cluster) = &cluster {
            let changes = pipeline.current().changes().clone();
            changes.forward_to(replicas::to_other_replicas(cluster));
            cluster.listen(replicas::from_other_replicas(
                sessions.clone(),
                asks.clone(),
                changes,
                cluster.node().to_string(),
            ));
        }
        McpState {
            policy,
            page_size,
            errors,
            trace_ids,
            sessions,
            pipeline,
            asks,
            cluster,
            closing: tokio::sync::watch::Sender::new(false),
            state_key: Arc::new(modern::StateKey::new(state_key)),
            tasks: Arc::new(modern::Tasks::new(None)),
        }
    }

    /// Keeps tasks in `store` (the kv store); without one no call becomes a
    /// task. `shared`: other replicas use the same store (`[cluster]`).
    pub fn with_tasks(
        mut self,
        store: Option<Arc<crate::wasm::kv::KvStore>>,
        shared: bool,
    ) -> McpState {
        let tasks = modern::Tasks::new(store);
        self.tasks = Arc::new(if shared {
            tasks.shared_by_replicas()
        } else {
            tasks
        });
        self
    }

    /// Ends the sessions' GET streams (at shutdown).
    pub fn end_streams(&self) {
        self.sessions.end_streams();
        self.closing.send_replace(true);
    }

    /// Whether session `id` is live and belongs to `owner` (the subject of
    /// the request's bearer token, if any).
    pub async fn session_exists(&self, id: &str, owner: Option<&str>) -> bool {
        self.sessions.find(id, owner).await.is_some()
    }

    /// How many sessions are live, and how many were forgotten.
    pub fn session_report(&self) -> SessionReport {
        self.sessions.report()
    }
}

/// What ends with an MCP session: its upstream sessions, in the catalog in
/// service then.
fn session_ended(pipeline: &Live) -> session::OnEnd {
    let pipeline = pipeline.clone();
    Arc::new(move |id: &str| pipeline.current().session_ended(id))
}

pub fn router(state: Arc<McpState>) -> Router {
    Router::new()
        .route("/mcp", post(post_mcp).get(get_mcp).delete(delete_mcp))
        .with_state(state)
}

/// One JSON-RPC message in, one JSON or SSE answer (or 202) out.
async fn post_mcp(
    State(st): State<Arc<McpState>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    token: Option<axum::Extension<crate::pipeline::Principal>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(refusal) = st.policy.check(&headers) {
        return refused(refusal);
    }
    let message = match Incoming::parse(&body) {
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
    if modern::era(&headers, params) == modern::Era::Modern {
        return modern::post(&st, client, token.map(|t| t.0), &headers, message).await;
    }
    if let Err(refusal) = guard::check_version(&headers) {
        return refused(refusal);
    }
    if let Incoming::Request { id, method, params } = &message
        && method == "initialize"
    {
        let owner = token.as_ref().map(|t| t.0.subject.clone());
        return initialize(&st, id, params, owner).await;
    }
    let session = match headers.get(SESSION_HEADER) {
        None => None,
        Some(sid) => match st
            .sessions
            .find(
                sid.to_str().unwrap_or_default(),
                token.as_ref().map(|t| t.0.subject.as_str()),
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
            if !st.asks.answer(&id, session_id, outcome.clone()) {
                match &st.cluster {
                    Some(cluster) => replicas::pass_answer(cluster, session_id, id, outcome).await,
                    None => tracing::debug!(%id, "a response to no question waiting"),
                }
            }
            StatusCode::ACCEPTED.into_response()
        }
        Incoming::Notification { method, params } => {
            notification(&st, session.as_deref(), &method, &params).await;
            StatusCode::ACCEPTED.into_response()
        }
        Incoming::Request { id, method, params } => {
            let request = Request {
                id,
                params,
                session,
                headers: &headers,
                client,
                token: token.map(|t| t.0),
                modern: None,
            };
            match method.as_str() {
                "ping" => reply(&request.id, &json!({})),
                "tools/list" => tools_list(&st, &request).await,
                "tools/call" => calls::tools_call(&st, request).await,
                "logging/setLevel" => set_level(&st, &request).await,
                "resources/list" => offers::resources_list(&st, &request).await,
                "resources/templates/list" => offers::templates_list(&st, &request).await,
                "resources/read" => offers::resources_read(&st, &request).await,
                "resources/subscribe" => offers::subscribe(&st, &request, true).await,
                "resources/unsubscribe" => offers::subscribe(&st, &request, false).await,
                "prompts/list" => offers::prompts_list(&st, &request).await,
                "prompts/get" => offers::prompts_get(&st, &request).await,
                "completion/complete" => offers::complete(&st, &request).await,
                _ => reply_error(
                    &request.id,
                    &RpcError::new(
                        jsonrpc::METHOD_NOT_FOUND,
                        format!("Method not found: {method}"),
                    ),
                ),
            }
        }
    }
}

/// A modern (2026-07-28) request: what its `_meta` said, and its method.
pub(super) struct Modern {
    meta: modern::RequestMeta,
    method: String,
}

/// A request being answered.
struct Request<'a> {
    id: Value,
    params: Map<String, Value>,
    session: Option<Arc<Session>>,
    headers: &'a HeaderMap,
    client: SocketAddr,
    /// The principal of the request's bearer token (`[oauth]`).
    token: Option<crate::pipeline::Principal>,
    /// Set for a 2026-07-28 request; `None` for the 2025 revisions.
    modern: Option<Modern>,
}

impl Request<'_> {
    /// Answers with `result`, in the modern shape for a modern request.
    fn reply<T: serde::Serialize>(&self, result: &T) -> Response {
        match &self.modern {
            None => reply(&self.id, result),
            Some(m) => {
                let value = serde_json::to_value(result).expect("results serialize");
                reply(
                    &self.id,
                    &modern::complete(value, &m.method, self.private()),
                )
            }
        }
    }

    /// Answers with `error`. The modern revision reports an unknown
    /// resource as invalid params (-32602), not -32002.
    fn fail(&self, error: &RpcError) -> Response {
        if self.modern.is_some() && error.code == offers::RESOURCE_NOT_FOUND {
            let mut error = error.clone();
            error.code = jsonrpc::INVALID_PARAMS;
            return reply_error(&self.id, &error);
        }
        reply_error(&self.id, error)
    }

    /// What a modern request's `requestState` is bound to: the method, what
    /// it names, its arguments and the credentials sent, so a state cannot
    /// be replayed on another request or by another caller.
    fn binding(&self, name: &str, args: &Value) -> String {
        let credential = |h: &str| {
            self.headers
                .get(h)
                .and_then(|v| v.to_str().ok())
                .map_or(Value::Null, |v| json!(v))
        };
        let method = self.modern.as_ref().map_or("", |m| m.method.as_str());
        let subject = self
            .token
            .as_ref()
            .map_or(Value::Null, |t| json!(t.subject));
        modern::digest(&[
            &json!(method),
            &json!(name),
            args,
            &credential("authorization"),
            &credential("x-api-key"),
            &subject,
        ])
    }

    /// Whether the answer may depend on who asked: credentials were sent.
    fn private(&self) -> bool {
        self.token.is_some() || self.headers.contains_key(axum::http::header::AUTHORIZATION)
    }

    /// A call context for this request: trace id, session, what the auth stage sees.
    fn context(&self, st: &McpState) -> CallContext {
        let traceparent = self
            .headers
            .get("traceparent")
            .and_then(|v| v.to_str().ok());
        let mut cx = CallContext::traced(traceparent, st.trace_ids);
        cx.session_id = self.session.as_ref().map(|s| s.id.clone());
        cx.pins = self.session.as_ref().map(|s| s.pins.clone());
        cx.principal = self.token.clone();
        cx.request = Some(Arc::new(RequestInfo::new(
            Transport::Mcp,
            "POST",
            "/mcp",
            self.headers,
            Some(self.client),
        )));
        cx
    }

    fn accepts_sse(&self) -> bool {
        self.headers
            .get_all(ACCEPT)
            .iter()
            .any(|v| v.to_str().is_ok_and(|v| v.contains("text/event-stream")))
    }
}

async fn initialize(
    st: &McpState,
    id: &Value,
    params: &Map<String, Value>,
    owner: Option<String>,
) -> Response {
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
        )
        .await;
    let result = json!({
        "protocolVersion": version,
        "capabilities": capabilities(st),
        "serverInfo": { "name": "hangar", "version": env!("CARGO_PKG_VERSION") },
    });
    let mut response = reply(id, &result);
    response.headers_mut().insert(
        SESSION_HEADER,
        HeaderValue::from_str(&session.id).expect("session ids are ASCII"),
    );
    response
}

/// What the server offers now: `listChanged` is true because a reload
/// (plugins or config changed, SIGHUP) sends `notifications/*/list_changed`
/// on the session's GET stream; `subscribe` is true because resource
/// updates are sent there too.
fn capabilities(st: &McpState) -> Value {
    let pipeline = st.pipeline.current();
    let offered = pipeline.catalog().offered();
    let mut caps = json!({ "tools": { "listChanged": true }, "logging": {} });
    let artifacts = pipeline.catalog().produces_artifacts();
    if !offered.resources.is_empty() || !offered.templates.is_empty() || artifacts {
        caps["resources"] = json!({ "subscribe": true, "listChanged": true });
    }
    if !offered.prompts.is_empty() {
        caps["prompts"] = json!({ "listChanged": true });
    }
    if offered.completes() {
        caps["completions"] = json!({});
    }
    caps
}

/// A notification from the client: `notifications/cancelled` stops the
/// call it names, here or (`[cluster]`) on the replica that runs it.
async fn notification(
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

async fn tools_list(st: &McpState, req: &Request<'_>) -> Response {
    let pipeline = st.pipeline.current();
    let principal = pipeline.listing_principal(&req.context(st)).await;
    let session = req.session.as_deref();
    let (pins, id) = (
        session.map(|s| &*s.pins),
        session.map_or("", |s| s.id.as_str()),
    );
    let mode = pipeline.catalog().pinning();
    let tools: Vec<Value> = (pipeline.listed(principal.as_ref()).iter())
        .map(|def| pins::listed(pins, mode, id, def))
        .collect();
    match page(&req.params, &tools, st.page_size) {
        Ok((page, next)) => {
            let mut result = json!({ "tools": page });
            if let Some(next) = next {
                result["nextCursor"] = Value::String(next);
            }
            req.reply(&result)
        }
        Err(e) => req.fail(&e),
    }
}

/// One page of a listing from `params.cursor`, and the next page's cursor.
fn page<'a, T>(
    params: &Map<String, Value>,
    items: &'a [T],
    page_size: usize,
) -> Result<(&'a [T], Option<String>), RpcError> {
    let start = match params.get("cursor") {
        None | Some(Value::Null) => 0,
        Some(cursor) => cursor
            .as_str()
            .and_then(decode_cursor)
            .ok_or_else(|| RpcError::invalid_params("Invalid cursor"))?,
    };
    if start > items.len() {
        return Err(RpcError::invalid_params("Invalid cursor"));
    }
    let end = (start + page_size).min(items.len());
    let next = (end < items.len()).then(|| B64.encode(format!("offset:{end}")));
    Ok((&items[start..end], next))
}

fn decode_cursor(cursor: &str) -> Option<usize> {
    let bytes = B64.decode(cursor).ok()?;
    std::str::from_utf8(&bytes)
        .ok()?
        .strip_prefix("offset:")?
        .parse()
        .ok()
}

async fn set_level(st: &McpState, req: &Request<'_>) -> Response {
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

/// `GET /mcp` opens the session's stream of unprompted messages (resource
/// updates it subscribed to).
async fn get_mcp(
    State(st): State<Arc<McpState>>,
    token: Option<axum::Extension<crate::pipeline::Principal>>,
    headers: HeaderMap,
) -> Response {
    if let Err(refusal) = st.policy.check(&headers) {
        return refused(refusal);
    }
    let accepts = headers
        .get_all(ACCEPT)
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.contains("text/event-stream")));
    if !accepts {
        return (
            StatusCode::NOT_ACCEPTABLE,
            "GET /mcp answers text/event-stream only",
        )
            .into_response();
    }
    let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return (StatusCode::BAD_REQUEST, "Mcp-Session-Id header required").into_response();
    };
    let owner = token.as_ref().map(|t| t.0.subject.as_str());
    let Some(session) = st.sessions.find(id, owner).await else {
        return (StatusCode::NOT_FOUND, "Session not found").into_response();
    };
    stream::open(
        session.open_stream(),
        st.pipeline.current().changes(),
        st.sessions.clone(),
    )
}

/// Ends a session.
async fn delete_mcp(
    State(st): State<Arc<McpState>>,
    token: Option<axum::Extension<crate::pipeline::Principal>>,
    headers: HeaderMap,
) -> Response {
    if let Err(refusal) = st.policy.check(&headers) {
        return refused(refusal);
    }
    match headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) {
        None => (StatusCode::BAD_REQUEST, "Mcp-Session-Id header required").into_response(),
        Some(id)
            if st
                .sessions
                .end(id, token.as_ref().map(|t| t.0.subject.as_str()))
                .await =>
        {
            StatusCode::OK.into_response()
        }
        Some(_) => (StatusCode::NOT_FOUND, "Session not found").into_response(),
    }
}

fn refused(refusal: Refusal) -> Response {
    let (status, message) = match refusal {
        Refusal::Host(h) => (StatusCode::FORBIDDEN, format!("Host not allowed: {h}")),
        Refusal::Origin(o) => (StatusCode::FORBIDDEN, format!("Origin not allowed: {o}")),
        Refusal::Version(v) => (
            StatusCode::BAD_REQUEST,
            format!("Unsupported MCP-Protocol-Version: {v}"),
        ),
    };
    tracing::debug!(%status, "{message}");
    let error = RpcError::new(jsonrpc::INVALID_REQUEST, message);
    json_response(status, jsonrpc::error_body(&Value::Null, &error))
}

fn session_not_found(message: &Incoming) -> Response {
    let id = match message {
        Incoming::Request { id, .. } => id.clone(),
        _ => Value::Null,
    };
    let error = RpcError::new(-32001, "Session not found");
    json_response(StatusCode::NOT_FOUND, jsonrpc::error_body(&id, &error))
}

fn reply<T: serde::Serialize>(id: &Value, result: &T) -> Response {
    json_response(StatusCode::OK, jsonrpc::result_body(id, result))
}

fn reply_error(id: &Value, error: &RpcError) -> Response {
    json_response(StatusCode::OK, jsonrpc::error_body(id, error))
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    (
        status,
        [(CONTENT_TYPE, "application/json")],
        Body::from(body),
    )
        .into_response()
}
