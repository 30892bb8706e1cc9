//! The HTTP server: routes, body limits and timeouts, health; connections
//! (limits, timeouts, sockets tuned for request/response latency) in [`conn`].

mod conn;
mod files;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Request, State};
use axum::http::header::CONNECTION;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use http_body::Body as _;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::json;

pub use conn::{ConnLimits, HttpStats};

use crate::Hangar;
use crate::health::Health;
use crate::mcp::{self, McpState, OriginPolicy};
use crate::pipeline::{CallContext, RequestInfo, Transport};
use crate::rest;

/// Builds the whole HTTP application for a loaded Hangar. Every route,
/// and the answer to a path that is none, is behind the Host/Origin check
/// (DNS rebinding); `/mcp` checks the same policy itself and answers in
/// JSON-RPC. `http` is where the connection layer counts what `/healthz`
/// shows.
pub fn app(hangar: &Hangar, http: Arc<HttpStats>) -> Router {
    routes(hangar, http).0
}

/// [`app`], and the MCP state (whose streams end at shutdown).
fn routes(hangar: &Hangar, http: Arc<HttpStats>) -> (Router, Arc<McpState>) {
    let server = &hangar.config.server;
    let policy = Arc::new(OriginPolicy {
        allowed_hosts: server.allowed_hosts.clone(),
        allowed_origins: server.allowed_origins.clone(),
    });
    let mcp_state = Arc::new(
        McpState::new(
            hangar.pipeline.clone(),
            (*policy).clone(),
            server.page_size.max(1),
            server.errors,
            server.trace_ids,
            server.max_sessions.max(1),
            server.session_timeout,
            server.request_state_key.as_deref(),
            hangar.loader.cluster().cloned(),
        )
        .with_tasks(hangar.loader.kv(), hangar.loader.cluster().is_some()),
    );
    let rest = rest::router(rest::Rest {
        pipeline: hangar.pipeline.clone(),
        allow_execute: server.allow_execute,
        trace_ids: server.trace_ids,
        ui: server.ui,
    });
    let health = Arc::new(HealthState {
        health: Health::live(
            hangar.pipeline.clone(),
            hangar.facts.clone(),
            hangar.reload.clone(),
        ),
        mcp: mcp_state.clone(),
        http: http.clone(),
        cluster: hangar.loader.cluster().cloned(),
    });
    let files = hangar.files.clone();
    let body = Arc::new(BodyLimits {
        timeout: Some(server.body_timeout).filter(|t| !t.is_zero()),
        max_bytes: server.max_body_bytes,
        upload_bytes: files.max_upload_request().max(server.max_body_bytes),
        stats: http,
    });
    let uploads = files::uploads_router(Arc::new(files::FilesState {
        files: files.clone(),
        mcp: mcp_state.clone(),
        pipeline: hangar.pipeline.clone(),
    }));
    // `[oauth]`: bearer tokens on /mcp (and REST with `rest = true`).
    let oauth = hangar
        .config
        .oauth
        .as_ref()
        .map(crate::oauth::ResourceServer::new);
    // Uploads belong to a session, so they are guarded as /mcp is.
    let (mcp_routes, rest, metadata) = match &oauth {
        None => (
            mcp::router(mcp_state.clone()).merge(uploads),
            rest,
            Router::new(),
        ),
        Some(rs) => (
            crate::oauth::protect(mcp::router(mcp_state.clone()).merge(uploads), rs),
            if rs.protects_rest() {
                crate::oauth::protect(rest, rs)
            } else {
                rest
            },
            crate::oauth::routes(rs),
        ),
    };
    let mut guarded = Router::new()
        .merge(rest)
        .merge(files::artifacts_router(files))
        .route("/healthz", get(healthz).with_state(health));
    if server.metrics {
        let state = Arc::new(MetricsState {
            pipeline: hangar.pipeline.clone(),
            sched: hangar.runtime().scheduler().clone(),
        });
        guarded = guarded.route("/metrics", get(metrics).with_state(state));
    }
    let guarded = guarded.layer(middleware::from_fn_with_state(policy, origin_guard));
    // /mcp checks the Host/Origin policy itself; /uploads is behind it here.
    let mcp_routes = Router::new()
        .merge(mcp_routes)
        .layer(middleware::from_fn_with_state(
            Arc::new(OriginPolicy {
                allowed_hosts: server.allowed_hosts.clone(),
                allowed_origins: server.allowed_origins.clone(),
            }),
            uploads_origin_guard,
        ));
    let router = Router::new()
        .merge(mcp_routes)
        .merge(metadata)
        .merge(guarded)
        .layer(DefaultBodyLimit::max(server.max_body_bytes))
        .layer(middleware::from_fn_with_state(body, read_body));
    (router, mcp_state)
}

/// Serves until Ctrl-C or SIGTERM.
pub async fn serve(hangar: &Hangar, listen: SocketAddr) -> anyhow::Result<()> {
    let stats = Arc::new(HttpStats::default());
    let (app, mcp) = routes(hangar, stats.clone());
    hangar.files.start_sweeper();
    let listener = bind(listen).map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
    tracing::info!("listening on http://{}", listener.local_addr()?);
    let limits = ConnLimits::from_config(&hangar.config.server);
    // Open GET streams end at once; running calls get the grace.
    let shutdown = async move {
        shutdown().await;
        mcp.end_streams();
    };
    conn::run(listener, app, limits, stats, shutdown).await;
    Ok(())
}

/// Connections the kernel queues before they are accepted. The usual 128
/// drops connections (clients retry after 1 s) when a burst of them meets a
/// busy moment.
const LISTEN_BACKLOG: u32 = 1024;

fn bind(listen: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if listen.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(listen)?;
    socket.listen(LISTEN_BACKLOG)
}

/// How a request body is read: whole, within `body_timeout`, at most `max_body_bytes`.
struct BodyLimits {
    timeout: Option<Duration>,
    max_bytes: usize,
    /// The limit of `POST /uploads`: a session's whole upload quota.
    upload_bytes: usize,
    stats: Arc<HttpStats>,
}

/// Reads the request body before any handler runs: a client that sends its
/// head and then too little of its body gets 408 and its connection closed,
/// instead of holding a handler waiting; a body over the limit gets 413.
async fn read_body(State(limits): State<Arc<BodyLimits>>, req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    if body.is_end_stream() {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let max_bytes = if parts.uri.path() == "/uploads" {
        limits.upload_bytes
    } else {
        limits.max_bytes
    };
    let collect = Limited::new(body, max_bytes).collect();
    let collected = match limits.timeout {
        None => collect.await,
        Some(timeout) => match tokio::time::timeout(timeout, collect).await {
            Ok(collected) => collected,
            Err(_) => {
                limits.stats.body_timed_out();
                let message =
                    format!("the request body did not arrive within {timeout:?} (body_timeout)");
                return closing(StatusCode::REQUEST_TIMEOUT, message);
            }
        },
    };
    match collected {
        Ok(collected) => {
            let body = Body::from(collected.to_bytes());
            next.run(Request::from_parts(parts, body)).await
        }
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => closing(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body is over {max_bytes} bytes (max_body_bytes)"),
        ),
        Err(e) => closing(
            StatusCode::BAD_REQUEST,
            format!("cannot read the request body: {e}"),
        ),
    }
}

/// An error answer after which the connection closes (the rest of the
/// request body was not read).
fn closing(status: StatusCode, message: String) -> Response {
    let mut response = (status, Json(json!({ "error": message }))).into_response();
    response
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

async fn shutdown() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("install SIGTERM handler");
        tokio::select! { _ = ctrl_c => {}, _ = term.recv() => {} }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    tracing::info!("shutting down");
}

/// The Host/Origin check for `/uploads`, which shares its router with
/// `/mcp` (that one answers refusals in JSON-RPC itself).
async fn uploads_origin_guard(
    State(policy): State<Arc<OriginPolicy>>,
    req: Request,
    next: Next,
) -> Response {
    if req.uri().path() == "/uploads" {
        return origin_guard(State(policy), req, next).await;
    }
    next.run(req).await
}

/// Refuses requests whose Host or Origin is not allowed (DNS rebinding).
async fn origin_guard(
    State(policy): State<Arc<OriginPolicy>>,
    req: Request,
    next: Next,
) -> Response {
    match policy.check(req.headers()) {
        Ok(()) => next.run(req).await,
        Err(refusal) => (
            StatusCode::FORBIDDEN,
            Json(json!({ "error": format!("{refusal:?}") })),
        )
            .into_response(),
    }
}

/// What `/healthz` reads: the catalog's health (for the caller) and the
/// connection and session counters (the same for everyone: they name
/// nothing).
struct HealthState {
    health: Health,
    mcp: Arc<McpState>,
    http: Arc<HttpStats>,
    /// The replicas' shared Redis (`[cluster]`), pinged on each request.
    cluster: Option<Arc<crate::cluster::Cluster>>,
}

/// `/healthz`, for the caller: who it is comes from the server-wide auth
/// check, as for `GET /tools`.
async fn healthz(
    State(state): State<Arc<HealthState>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    let mut cx = CallContext::new(None);
    cx.request = Some(Arc::new(RequestInfo::new(
        Transport::Rest,
        "GET",
        "/healthz",
        &headers,
        Some(client),
    )));
    let principal = state
        .health
        .pipeline()
        .current()
        .listing_principal(&cx)
        .await;
    let mut report = state.health.report(principal.as_ref());
    report["http"] = json!(state.http.report());
    report["sessions"] = json!(state.mcp.session_report());
    // A replica that cannot reach the shared Redis still serves what needs
    // no shared state, and says it is degraded.
    if let Some(cluster) = &state.cluster {
        let status = cluster.status().await;
        if status.redis != "ok" {
            report["status"] = json!("degraded");
        }
        report["cluster"] = json!(status);
    }
    Json(report).into_response()
}

/// What `/metrics` reads: the pipeline's registry and catalog, and the
/// scheduler's instance slots.
struct MetricsState {
    pipeline: crate::pipeline::Live,
    sched: Arc<crate::wasm::sched::Scheduler>,
}

/// `/metrics`: the Prometheus text exposition (OpenMetrics flavour). The
/// series of tools hidden from the caller (`visible_to`) are left out, as
/// `/healthz` leaves out what names them.
async fn metrics(
    State(state): State<Arc<MetricsState>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    let (tools, stages) = state.sched.in_use();
    let mut live = crate::metrics::Live {
        instances: vec![("tools", tools.into()), ("stages", stages.into())],
        ..Default::default()
    };
    let pipeline = state.pipeline.current();
    let catalog = pipeline.catalog();
    catalog.db_live(&mut live);
    let mut body = pipeline.metrics().render(&live);
    if catalog.has_restricted() {
        let mut cx = CallContext::new(None);
        cx.request = Some(Arc::new(RequestInfo::new(
            Transport::Rest,
            "GET",
            "/metrics",
            &headers,
            Some(client),
        )));
        let principal = pipeline.listing_principal(&cx).await;
        let hidden: Vec<&str> = catalog
            .tools()
            .iter()
            .filter(|t| !t.stages.visible(principal.as_ref()))
            .map(|t| t.def.name.as_str())
            .collect();
        body = crate::metrics::without_tools(&body, &hidden);
    }
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        body,
    )
        .into_response()
}
