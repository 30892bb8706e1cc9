//! The baseline of `scripts/bench`: the least a server can do for the same
//! requests, built with the same profile and the same HTTP stack as Hangar.
//!
//! - `POST /echo`: reads a JSON-RPC request, answers a fixed small result.
//! - `POST /query`: reads `{"id": n}`, runs the bench DB tool's statement
//!   through the same kind of pool (deadpool, `prepare_cached`), answers the rows.
//! - `POST /query-reset`: the same, with the session reset Hangar's
//!   Postgres connector sends after every read-only statement, pipelined
//!   with it (two messages a call, as Hangar's): what the reset costs apart
//!   from the rest of Hangar.
//! - `GET /hello`: a small text — the upstream of the outbound-call scenario.
//! - `POST /fetch`: makes the request a guest's `fetch` makes — `GET /hello`
//!   on this server, over a new connection (as Hangar's client does) — and
//!   answers its body.
//!
//! Usage: `hangar-baseline ADDR [DATABASE_URL]`

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use http_body_util::{BodyExt, Empty};
use serde_json::{Value, json};

const QUERY: &str = "SELECT id, name FROM bench_items WHERE id = $1";

async fn echo(body: Bytes) -> impl IntoResponse {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let reply = json!({
        "jsonrpc": "2.0",
        "id": request.get("id").cloned().unwrap_or(Value::Null),
        "result": { "content": [{ "type": "text", "text": "hello" }], "isError": false }
    });
    (
        [(CONTENT_TYPE, "application/json")],
        serde_json::to_vec(&reply).unwrap(),
    )
}

/// What Hangar's connector sends after a read-only statement
/// (`host/src/db/postgres.rs`, `READ_ONLY_RESET`).
const RESET: &str = "SET SESSION AUTHORIZATION DEFAULT; RESET ALL; CLOSE ALL; \
     UNLISTEN *; SELECT pg_advisory_unlock_all()";

async fn query(State(pool): State<Arc<Pool>>, body: Bytes) -> impl IntoResponse {
    run_query(&pool, &body, false).await
}

async fn query_reset(State(pool): State<Arc<Pool>>, body: Bytes) -> impl IntoResponse {
    run_query(&pool, &body, true).await
}

async fn run_query(pool: &Pool, body: &[u8], reset: bool) -> impl IntoResponse + use<> {
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let id = request.get("id").and_then(Value::as_i64).unwrap_or(0) as i32;
    let client = pool.get().await.expect("connection");
    let stmt = client.prepare_cached(QUERY).await.expect("prepare");
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&id];
    let found = if reset {
        // Both sent when first polled, together; answered in order.
        let (found, reset) =
            futures::join!(client.query(&stmt, &params), client.batch_execute(RESET));
        reset.expect("reset");
        found
    } else {
        client.query(&stmt, &params).await
    };
    let rows: Vec<Value> = found
        .expect("query")
        .iter()
        .map(|r| json!({ "id": r.get::<_, i32>(0), "name": r.get::<_, String>(1) }))
        .collect();
    (
        [(CONTENT_TYPE, "application/json")],
        serde_json::to_vec(&json!({ "rows": rows })).unwrap(),
    )
}

async fn hello() -> &'static str {
    "hello from upstream"
}

/// OTLP/HTTP exports received (`POST /v1/traces`), each thrown away: the
/// traced Hangar's collector, costing the machine as little as one can.
static EXPORTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

async fn otlp_traces(_body: Bytes) -> impl IntoResponse {
    EXPORTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    ([(CONTENT_TYPE, "application/x-protobuf")], "")
}

async fn otlp_exports() -> String {
    EXPORTS
        .load(std::sync::atomic::Ordering::Relaxed)
        .to_string()
}

/// The outbound request of the `fetch` scenario, made by the host itself.
async fn fetch(State(upstream): State<Arc<String>>) -> impl IntoResponse {
    let tcp = tokio::net::TcpStream::connect(upstream.as_str())
        .await
        .expect("connect");
    let _ = tcp.set_nodelay(true);
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
            .await
            .expect("handshake");
    tokio::spawn(conn);
    let request = hyper::Request::get("/hello")
        .header("host", upstream.as_str())
        .body(Empty::<Bytes>::new())
        .expect("request");
    let response = sender.send_request(request).await.expect("send");
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let text = format!("{status} {}", String::from_utf8_lossy(&body));
    let reply = json!({
        "jsonrpc": "2.0", "id": 1,
        "result": { "content": [{ "type": "text", "text": text }], "isError": false }
    });
    (
        [(CONTENT_TYPE, "application/json")],
        serde_json::to_vec(&reply).unwrap(),
    )
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:9090".into());
    let mut app = Router::new()
        .route("/echo", post(echo))
        .route("/hello", get(hello))
        .route("/v1/traces", post(otlp_traces).get(otlp_exports))
        .merge(
            Router::new()
                .route("/fetch", post(fetch))
                .with_state(Arc::new(addr.clone())),
        );
    if let Some(url) = args.next() {
        let config: tokio_postgres::Config = url.parse().expect("database url");
        let manager = Manager::from_config(
            config,
            tokio_postgres::NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager).max_size(16).build().expect("pool");
        app = app.merge(
            Router::new()
                .route("/query", post(query))
                .route("/query-reset", post(query_reset))
                .with_state(Arc::new(pool)),
        );
    }
    let listener = tokio::net::TcpListener::bind(&addr).await.expect("bind");
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app).await.expect("serve");
}
