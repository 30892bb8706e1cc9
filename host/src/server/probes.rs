//! What orchestrators, scrapers and operators ask of a running server.
//!
//! - `/livez` — the process answers (for a liveness probe).
//! - `/readyz` — it should get traffic: 503 while a reload rebuilds the
//!   catalog, or while the cluster's shared Redis is unreachable.
//! - `/metrics` — the Prometheus text exposition.
//!
//! These three answer on any Host (a kubelet or Prometheus dials the pod's
//! address), never run an auth check, and name nothing hidden: on the main
//! listener `/metrics` leaves out every tool shown only to some callers
//! (`visible_to`); on `[server] admin_listen` it shows everything.
//!
//! - `/healthz` — the detailed report, behind the Host check, for the
//!   caller: with `[oauth]` or a server-wide `[auth]` only a caller they
//!   accept gets the details; anyone else gets liveness alone.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use serde_json::json;

use super::HttpStats;
use crate::health::Health;
use crate::mcp::McpState;
use crate::oauth::ResourceServer;
use crate::pipeline::Live;
use crate::reload::ReloadStatus;
use hangar_core::call::{CallContext, Principal, RequestInfo, Surface, Toolset};

/// What the probes read.
pub struct Probes {
    pub pipeline: Live,
    pub reload: Arc<ReloadStatus>,
    /// The replicas' shared Redis (`[cluster]`).
    pub cluster: Option<Arc<hangar_core::cluster::Cluster>>,
    /// Guest instance slots in use, for `/metrics`.
    pub instances: crate::metrics::InstanceGauge,
    /// Whether `/metrics` is served (`[server] metrics`).
    pub metrics: bool,
}

/// `/livez`, `/readyz` and (unless off) `/metrics`; `full` shows every
/// tool's series (the admin listener), else only those shown to everyone.
pub fn router(probes: Arc<Probes>, full: bool) -> Router {
    let metrics_on = probes.metrics;
    let router = Router::new()
        .route("/livez", get(livez))
        .route("/readyz", get(readyz));
    let router = if metrics_on {
        router.route("/metrics", get(move |state| metrics(state, full)))
    } else {
        router
    };
    router.with_state(probes)
}

async fn livez() -> Response {
    Json(json!({ "status": "ok" })).into_response()
}

async fn readyz(State(probes): State<Arc<Probes>>) -> Response {
    let mut waiting = Vec::new();
    if probes.reload.rebuilding() {
        waiting.push("reloading");
    }
    if let Some(cluster) = &probes.cluster
        && cluster.status().await.redis != "ok"
    {
        waiting.push("cluster redis unreachable");
    }
    if waiting.is_empty() {
        Json(json!({ "status": "ready" })).into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "status": "not ready", "waiting_for": waiting })),
        )
            .into_response()
    }
}

/// `/metrics`: the Prometheus text exposition (OpenMetrics flavour).
async fn metrics(State(probes): State<Arc<Probes>>, full: bool) -> Response {
    let mut live = crate::metrics::Snapshot {
        instances: (probes.instances)(),
        ..Default::default()
    };
    let pipeline = probes.pipeline.current();
    let catalog = pipeline.catalog();
    catalog.db_live(&mut live);
    live.auth = pipeline.door().counts();
    let mut body = pipeline.metrics().render(&live);
    if !full && catalog.has_restricted() {
        let hidden: Vec<&str> = catalog
            .tools()
            .iter()
            .filter(|t| t.stages.visible_to.is_some())
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

/// What `/healthz` reads: the catalog's health (for the caller), the
/// connection and session counters, and who may see them.
pub struct HealthState {
    pub health: Health,
    pub mcp: Arc<McpState>,
    pub http: Arc<HttpStats>,
    pub cluster: Option<Arc<hangar_core::cluster::Cluster>>,
    /// `[oauth]`: the details need a bearer token it accepts.
    pub oauth: Option<Arc<ResourceServer>>,
}

/// Who asks `/healthz`: `None` when the server checks callers and this
/// one did not pass; else the principal the report is built for.
async fn asker(
    state: &HealthState,
    headers: &HeaderMap,
    client: SocketAddr,
) -> Option<Option<Principal>> {
    if let Some(rs) = &state.oauth {
        return rs
            .authenticate(headers, Some(client.ip()))
            .await
            .ok()
            .map(Some);
    }
    let pipeline = state.health.pipeline().current();
    let Some(auth) = pipeline.catalog().default_auth() else {
        // No one is checked on this server: everyone sees the details.
        return Some(None);
    };
    let cx = healthz_context(headers, client, None);
    pipeline.door().lister(auth, &cx).await.map(Some)
}

/// The context a `/healthz` request's checks run in.
fn healthz_context(
    headers: &HeaderMap,
    client: SocketAddr,
    toolset: Option<Toolset>,
) -> CallContext {
    let mut cx = CallContext::new(None);
    cx.toolset = toolset;
    cx.request = Some(Arc::new(RequestInfo::new(
        Surface::Rest,
        "GET",
        "/healthz",
        headers,
        Some(client),
    )));
    cx
}

/// A toolset with its own auth check counts what that check's caller sees
/// through it (its listings' principal), not what the server-wide check's
/// does: a caller the toolset refuses is told it holds nothing.
async fn count_guarded_toolsets(
    state: &HealthState,
    headers: &HeaderMap,
    client: SocketAddr,
    report: &mut serde_json::Value,
) {
    let pipeline = state.health.pipeline().current();
    let catalog = pipeline.catalog();
    let guarded: Vec<Toolset> = (catalog.toolsets().names())
        .map(Toolset::new)
        .filter(|t| catalog.scope(Some(t)).auth().is_some())
        .collect();
    for toolset in guarded {
        let cx = healthz_context(headers, client, Some(toolset.clone()));
        let principal = pipeline.listing_principal(&cx).await;
        if let Some(entry) = report
            .get_mut("toolsets")
            .and_then(|t| t.get_mut(toolset.name()))
        {
            entry["tools"] = json!(catalog.toolset_tools(toolset.name(), principal.as_ref()));
        }
    }
}

/// `/healthz`: liveness for anyone; the details for a caller the server's
/// checks accept, built the way `GET /tools` is for that caller.
pub async fn healthz(
    State(state): State<Arc<HealthState>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    let Some(principal) = asker(&state, &headers, client).await else {
        return Json(json!({ "status": "ok" })).into_response();
    };
    let mut report = state.health.report(principal.as_ref());
    count_guarded_toolsets(&state, &headers, client, &mut report).await;
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

/// `hangar probe`: one `GET path` to a server at `listen` (an unspecified
/// address, `0.0.0.0:8080` say, is asked on loopback), for a container's
/// health check where no curl exists. `Ok` only for a 200 within `timeout`;
/// the error says what came instead. Plain HTTP/1.0 over std: the probe
/// starts no runtime and reads at most the status line.
pub fn probe(listen: SocketAddr, path: &str, timeout: std::time::Duration) -> Result<(), String> {
    use std::io::{BufRead, BufReader, Read, Write};
    let mut addr = listen;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    let fail = |e: std::io::Error| format!("{addr}{path}: {e}");
    let mut stream = std::net::TcpStream::connect_timeout(&addr, timeout).map_err(fail)?;
    stream.set_read_timeout(Some(timeout)).map_err(fail)?;
    stream.set_write_timeout(Some(timeout)).map_err(fail)?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").map_err(fail)?;
    let mut status = String::new();
    BufReader::new(stream.take(256))
        .read_line(&mut status)
        .map_err(fail)?;
    let status = status.trim_end();
    match status.split(' ').nth(1) {
        Some("200") => Ok(()),
        _ if status.is_empty() => Err(format!("{addr}{path}: no answer")),
        _ => Err(format!("{addr}{path}: {status}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::time::Duration;

    /// A one-shot server answering `reply` to the first request.
    fn answering(reply: &'static str) -> SocketAddr {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut buf = [0u8; 512];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(reply.as_bytes());
        });
        addr
    }

    #[test]
    fn a_probe_passes_only_on_200() {
        let ok = answering("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
        assert_eq!(probe(ok, "/livez", Duration::from_secs(5)), Ok(()));
        let busy = answering("HTTP/1.1 503 Service Unavailable\r\n\r\n");
        let e = probe(busy, "/readyz", Duration::from_secs(5)).unwrap_err();
        assert!(
            e.ends_with("/readyz: HTTP/1.1 503 Service Unavailable"),
            "{e}"
        );
        let silent = answering("");
        let e = probe(silent, "/livez", Duration::from_secs(5)).unwrap_err();
        assert!(e.ends_with("no answer"), "{e}");
    }

    #[test]
    fn an_unspecified_address_is_probed_on_loopback() {
        let ok = answering("HTTP/1.0 200 OK\r\n\r\n");
        let any: SocketAddr = format!("0.0.0.0:{}", ok.port()).parse().unwrap();
        assert_eq!(probe(any, "/livez", Duration::from_secs(5)), Ok(()));
    }
}
