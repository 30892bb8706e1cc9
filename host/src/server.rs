//! The HTTP server: routes and the door in front of them; request bodies
//! in [`body`], probes and `/healthz` in [`probes`], the client behind a
//! proxy in [`clients`], connections (limits, timeouts, sockets tuned for
//! request/response latency) in [`conn`].
//!
//! One door for every route that reaches a tool, resource, prompt, upload
//! or the OpenAPI document: with `[oauth]`, `/mcp`, `/uploads` and (unless
//! `rest = "public"`) the REST surface need a bearer token, checked before
//! any body is read. The probes (`/livez`, `/readyz`, `/metrics`) stand
//! outside it and outside the Host check, and name nothing hidden. A
//! personal token ([`tokens`]) passes every door, `[oauth]` or none.

mod body;
mod clients;
mod conn;
mod connect;
mod files;
mod probes;
mod stop;
mod tokens;
mod toolsets;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use serde_json::json;

pub use conn::{ConnLimits, HttpStats};
pub use probes::probe;

use crate::Hangar;
use crate::health::Health;
use crate::mcp::{self, McpState, OriginPolicy};
use crate::rest;
use hangar_core::call::Toolset;
pub use stop::Stop;
use toolsets::in_toolset;

/// Builds the whole HTTP application for a loaded Hangar. Every route but
/// the probes, and the answer to a path that is none, is behind the
/// Host/Origin check (DNS rebinding); `/mcp` checks the same policy itself
/// and answers in JSON-RPC. `http` is where the connection layer counts
/// what `/healthz` shows.
pub fn app(hangar: &Hangar, http: Arc<HttpStats>) -> Router {
    routes(hangar, http).0
}

/// [`app`], and the MCP fronts (whose streams end at shutdown, and which
/// the stdio transport serves too).
fn routes(hangar: &Hangar, http: Arc<HttpStats>) -> (Router, mcp::Fronts) {
    let server = &hangar.config.server;
    let policy = Arc::new(OriginPolicy::of(server));
    let mcp_state = Arc::new(McpState::new(
        hangar.pipeline.clone(),
        server,
        hangar.loader.cluster().cloned(),
    ));
    // The 2026-07-28 front's own: the key sealing input-required rounds,
    // and the tasks.
    let modern = mcp::Modern::new(
        server.request_state_key.as_deref(),
        hangar.loader.kv(),
        hangar.loader.cluster().is_some(),
        server.max_tasks_per_owner,
    );
    let fronts = mcp::Fronts::new(mcp_state.clone(), modern);
    // `[oauth]`: bearer tokens at the door; refused tokens count against
    // the client's `auth_failures` allowance, as refused auth checks do.
    // Personal tokens (`hangar token`), taken at every door.
    let personal = Arc::new(tokens::PersonalDoor {
        tokens: hangar_core::accounts::Tokens::new(hangar.loader.kv()),
        door: hangar.pipeline.current().door().clone(),
    });
    let oauth = hangar.config.oauth.as_ref().map(|config| {
        crate::oauth::ResourceServer::new(
            config,
            hangar.pipeline.current().door().clone(),
            hangar.loader.outbound_tls(),
            personal.tokens.clone(),
        )
    });
    let door = |router: Router, closed: bool| match &oauth {
        Some(rs) if closed => crate::oauth::protect(router, rs),
        _ => tokens::accept(router, &personal),
    };
    // Bodies are read inside the door: nobody unproven gets one read.
    let body = Arc::new(body::BodyLimits {
        timeout: Some(server.body_timeout).filter(|t| !t.is_zero()),
        max_bytes: server.max_body_bytes,
        stats: http.clone(),
    });
    let read_body = middleware::from_fn_with_state(body, body::read_body);
    let rest_router = |ui: bool| {
        rest::router(rest::Rest {
            pipeline: hangar.pipeline.clone(),
            allow_execute: server.allow_execute,
            trace_ids: server.trace_ids,
            ui,
            protocols: mcp::protocol_versions(),
        })
        .layer(read_body.clone())
    };
    let rest_closed = oauth.as_ref().is_some_and(|rs| rs.protects_rest());
    // `[server] default_toolset`: what `/mcp` and `/tools…` serve.
    let default_toolset = server.default_toolset.as_deref().map(Toolset::new);
    let rest = door(
        in_toolset(rest_router(server.ui), &default_toolset),
        rest_closed,
    );
    // Uploads read their own (multipart) body, after the caller is known.
    let uploads = files::uploads_router(Arc::new(files::FilesState {
        files: hangar.files.clone(),
        mcp: mcp_state.clone(),
        pipeline: hangar.pipeline.clone(),
        body_timeout: Some(server.body_timeout).filter(|t| !t.is_zero()),
    }));
    // `/mcp` checks the Host/Origin policy itself and answers in JSON-RPC;
    // `/uploads` is checked here, before its door. Each route gets only its
    // own layers: a layer on the merged router would run (and clone its
    // boxed service) on every `/mcp` request too.
    let uploads =
        door(uploads, true).layer(middleware::from_fn_with_state(policy.clone(), origin_guard));
    let mcp_router = |path: &str| mcp::router_at(fronts.clone(), path).layer(read_body.clone());
    let sets = toolsets::routes(
        &hangar.config.toolsets,
        oauth.as_ref(),
        &personal,
        rest_closed,
        mcp_router,
        || rest_router(server.ui),
    );
    // `/mcp/t/TOKEN`: `/mcp` for a client given only a URL.
    let mcp_in_path = door(
        in_toolset(mcp_router("/mcp/t/{token}"), &default_toolset),
        true,
    );
    let mcp_routes = door(in_toolset(mcp_router("/mcp"), &default_toolset), true)
        .merge(tokens::in_path(mcp_in_path))
        .merge(sets.mcp)
        .merge(uploads);
    let metadata = (oauth.as_ref().map(crate::oauth::routes))
        .unwrap_or_default()
        .merge(sets.metadata);
    let health = Arc::new(probes::HealthState {
        health: Health::live(
            hangar.pipeline.clone(),
            hangar.facts.clone(),
            hangar.reload.clone(),
        ),
        mcp: mcp_state.clone(),
        http,
        cluster: hangar.loader.cluster().cloned(),
        oauth: oauth.clone(),
    });
    let no_route_policy = policy.clone();
    let no_route = move |headers: axum::http::HeaderMap| async move {
        // A path that is none is answered as the routes are: 403 to a
        // foreign Host or Origin (it says nothing of what exists), else 404.
        match no_route_policy.check(&headers) {
            Ok(()) => (
                StatusCode::NOT_FOUND,
                Json(json!({ "error": "no such route" })),
            )
                .into_response(),
            Err(refusal) => foreign(refusal),
        }
    };
    // `/connect`: users connect their own accounts. Outside the OAuth door
    // (a provider's redirect carries no bearer token): it proves callers itself.
    let connect = connect::router(Arc::new(connect::ConnectState {
        accounts: hangar.loader.accounts().clone(),
        pipeline: hangar.pipeline.clone(),
        oauth: oauth.clone(),
        personal: personal.clone(),
        secure: (server.public_url.as_deref()).is_some_and(|u| u.starts_with("https://")),
    }));
    let guarded = Router::new()
        .merge(rest)
        .merge(connect)
        .merge(sets.rest)
        .merge(files::artifacts_router(hangar.files.clone()))
        .route("/healthz", get(probes::healthz).with_state(health))
        .layer(middleware::from_fn_with_state(policy.clone(), origin_guard));
    let router = Router::new()
        .merge(mcp_routes)
        .merge(metadata)
        .merge(guarded)
        .merge(probes::router(probes_of(hangar), false))
        .fallback(no_route)
        .layer(DefaultBodyLimit::max(server.max_body_bytes));
    // Without trusted proxies the peer is the client: no layer to pass.
    let router = if server.trusted_proxies.is_empty() {
        router
    } else {
        let proxies = Arc::new(clients::Proxies(server.trusted_proxies.clone()));
        router.layer(middleware::from_fn_with_state(
            proxies,
            clients::real_client,
        ))
    };
    (router, fronts)
}

/// What the probes read, for either listener.
fn probes_of(hangar: &Hangar) -> Arc<probes::Probes> {
    Arc::new(probes::Probes {
        pipeline: hangar.pipeline.clone(),
        reload: hangar.reload.clone(),
        cluster: hangar.loader.cluster().cloned(),
        instances: instance_gauge(hangar),
        metrics: hangar.config.server.metrics,
    })
}

/// The instance slots in use, read from the runtime's scheduler at
/// scrape time.
fn instance_gauge(hangar: &Hangar) -> crate::metrics::InstanceGauge {
    let sched = hangar.runtime().scheduler().clone();
    Arc::new(move || {
        let (tools, stages) = sched.in_use();
        vec![("tools", tools.into()), ("stages", stages.into())]
    })
}

/// Serves until `stop` (Ctrl-C or SIGTERM): HTTP on `listen`, MCP on stdin
/// and stdout with `stdio`, or both. With `stdio`, the end of stdin ends
/// the process too (once the requests running on it are answered).
pub async fn serve(
    hangar: &Hangar,
    listen: Option<SocketAddr>,
    stdio: Option<mcp::StdioOptions>,
    stop: &Stop,
) -> anyhow::Result<()> {
    let stats = Arc::new(HttpStats::default());
    let (app, fronts) = routes(hangar, stats.clone());
    hangar.files.start_sweeper();
    let mcp = fronts.state().clone();
    let stdin_ended = async move {
        match stdio {
            Some(options) => mcp::serve_stdio(fronts, options).await,
            None => std::future::pending().await,
        }
    };
    let Some(listen) = listen else {
        // stdio alone: no port is bound.
        tokio::select! {
            () = stdin_ended => {}
            () = stop.requested() => {}
        }
        mcp.end_streams();
        return Ok(());
    };
    let listener = bind(listen).map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
    tracing::info!("listening on http://{}", listener.local_addr()?);
    let limits = ConnLimits::from_config(&hangar.config.server);
    // Open GET streams end at once; running calls get the grace.
    let asked = stop.requested();
    let ended = async move {
        tokio::select! {
            () = stdin_ended => {}
            () = asked => {}
        }
        mcp.end_streams();
    };
    if let Some(admin) = hangar.config.server.admin_listen {
        let listener = bind(admin)
            .map_err(|e| anyhow::anyhow!("cannot listen on {admin} (admin_listen): {e}"))?;
        tracing::info!("probes and metrics on http://{}", listener.local_addr()?);
        let app = probes::router(probes_of(hangar), true);
        tokio::spawn(conn::run(
            listener,
            app,
            limits,
            Arc::new(HttpStats::default()),
            stop.requested(),
        ));
    }
    conn::run(listener, app, limits, stats, ended).await;
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

/// Refuses requests whose Host or Origin is not allowed (DNS rebinding).
async fn origin_guard(
    State(policy): State<Arc<OriginPolicy>>,
    req: Request,
    next: Next,
) -> Response {
    match policy.check(req.headers()) {
        Ok(()) => next.run(req).await,
        Err(refusal) => foreign(refusal),
    }
}

/// The 403 a request from a Host or Origin that is not allowed gets.
fn foreign(refusal: impl std::fmt::Debug) -> Response {
    (
        StatusCode::FORBIDDEN,
        Json(json!({ "error": format!("{refusal:?}") })),
    )
        .into_response()
}
