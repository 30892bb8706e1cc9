//! The HTTP server: routes, body limits, health, and sockets tuned for
//! request/response latency.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use serde_json::json;

use crate::Hangar;
use crate::mcp::{self, McpState, OriginPolicy};
use crate::rest;
use crate::wasm::LoadFailure;

/// Builds the whole HTTP application for a loaded Hangar.
pub fn app(hangar: &Hangar) -> Router {
    let server = &hangar.config.server;
    let policy = Arc::new(OriginPolicy {
        allowed_hosts: server.allowed_hosts.clone(),
        allowed_origins: server.allowed_origins.clone(),
    });
    let mcp_state = Arc::new(McpState::new(
        hangar.pipeline.clone(),
        (*policy).clone(),
        server.page_size.max(1),
        server.errors,
        server.trace_ids,
    ));
    let rest = rest::router(rest::Rest {
        pipeline: hangar.pipeline.clone(),
        allow_execute: server.allow_execute,
        trace_ids: server.trace_ids,
        ui: server.ui,
    })
    .layer(middleware::from_fn_with_state(policy, origin_guard));
    let health = Arc::new(Health {
        pipeline: hangar.pipeline.clone(),
        problems: hangar.problems.clone(),
    });
    Router::new()
        .merge(mcp::router(mcp_state))
        .merge(rest)
        .route("/healthz", get(healthz).with_state(health))
        .layer(DefaultBodyLimit::max(server.max_body_bytes))
}

/// Serves until Ctrl-C or SIGTERM.
pub async fn serve(hangar: &Hangar, listen: SocketAddr) -> anyhow::Result<()> {
    let app = app(hangar);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
    tracing::info!("listening on http://{}", listener.local_addr()?);
    // Without TCP_NODELAY a small response can wait ~40 ms for the client's delayed ACK.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!("cannot set TCP_NODELAY: {e}");
        }
    });
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown())
    .await?;
    Ok(())
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

/// Refuses REST requests whose Host or Origin is not allowed (DNS rebinding).
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

/// What `/healthz` reports.
struct Health {
    pipeline: crate::pipeline::Pipeline,
    problems: Vec<LoadFailure>,
}

async fn healthz(State(h): State<Arc<Health>>) -> Response {
    let status = if h.problems.is_empty() {
        "ok"
    } else {
        "degraded"
    };
    let catalog = h.pipeline.catalog();
    let caches: serde_json::Map<String, serde_json::Value> = catalog
        .cache_stats()
        .into_iter()
        .map(|(name, stats)| (name.to_string(), json!(stats)))
        .collect();
    let mut body =
        json!({ "status": status, "tools": catalog.tools().len(), "problems": h.problems });
    if !caches.is_empty() {
        body["result_cache"] = serde_json::Value::Object(caches);
    }
    Json(body).into_response()
}
