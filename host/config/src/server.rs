//! `[server]`: where and how Hangar listens, its HTTP limits, sessions,
//! instance slots and what its surfaces show.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;

use super::{Pinning, RateLimit};

/// How `tools/call` reports a failure after resolution.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ErrorStyle {
    /// JSON-RPC errors (-32000 with `data.stage`).
    #[default]
    Jsonrpc,
    /// A `CallToolResult` with `isError: true`, for clients that show the
    /// model only results.
    Result,
}

/// What the presenter does with a result that does not match its tool's
/// `outputSchema`.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum OutputValidation {
    /// The call fails with stage `output`, naming the path and what was
    /// expected.
    #[default]
    Strict,
    /// Logged and counted (`hangar_output_invalid_total`); the result is
    /// passed on as it is.
    Warn,
    /// Not checked.
    Off,
}

#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// The address MCP and REST are served on (`--listen` wins over it).
    pub listen: SocketAddr,
    /// The base of the URLs Hangar hands out for browsers to open (e.g.
    /// `https://mcp.example.com`): the connect pages of per-user providers
    /// and their callbacks. Required with a per-user provider.
    pub public_url: Option<String>,
    /// A caller's listings leave out the tools that `requires` a provider
    /// that resolves to nothing for that caller (not connected, no team or
    /// default value).
    pub hide_unconnected: bool,
    /// The folder every `*.wasm` of is loaded at startup (`--plugins` wins
    /// over it).
    pub plugins: PathBuf,
    /// Where compiled components are cached, keyed by content and engine.
    pub cache_dir: PathBuf,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Origins allowed besides loopback ones (e.g. `https://app.example.com`).
    pub allowed_origins: Vec<String>,
    /// Host names allowed besides loopback ones (e.g. `mcp.example.com`).
    pub allowed_hosts: Vec<String>,
    /// How many guest instances may be live at once (the pooling allocator's size).
    pub max_instances: u32,
    /// Of `max_instances`, the slots kept for auth checks and mappers, so
    /// tool calls that fill the pool never make auth fail. Default: a
    /// quarter, at least 2.
    pub stage_instances: Option<u32>,
    /// How many long-running calls may run guest code at once; the others
    /// wait their turn at each epoch tick. Default: CPU cores − 1, at least 1.
    pub long_running_slots: Option<u32>,
    /// A call whose guest code has run this long (in epoch ticks run into,
    /// not time spent waiting) counts as long-running.
    #[serde(with = "humantime_serde")]
    #[schemars(with = "super::schema::Humantime")]
    pub long_running_after: Duration,
    /// Tools per `tools/list` page.
    pub page_size: usize,
    /// How `tools/call` reports a failure after resolution: `jsonrpc`
    /// errors, or `result`s with `isError: true`.
    pub errors: ErrorStyle,
    /// `false` refuses every REST tool call with 403 (the explorer page says so).
    pub allow_execute: bool,
    /// Serve the explorer page at `/ui`.
    pub ui: bool,
    /// Give every call a trace id (or honour an incoming `traceparent`).
    pub trace_ids: bool,
    /// Serve Prometheus metrics at `GET /metrics` (behind the Host/Origin
    /// check); `false` answers 404 there.
    pub metrics: bool,
    /// What `tools/list` shows: every tool, only the meta-tools
    /// (`search_tools`, `read_tool`, `call_tool`), or both.
    pub catalog: CatalogMode,
    /// Calls one caller (principal, or client address when anonymous) may
    /// make to all tools together, e.g. `"100/s"`.
    pub rate_limit: Option<RateLimit>,
    /// Failed authentications one client address (an IPv6 client by its
    /// /64) may make, e.g. `"10/m"`; past it the client is answered 429
    /// before any auth check runs, until the allowance refills.
    pub auth_failures: RateLimit,
    /// Balancers and proxies whose `X-Forwarded-For` names the client
    /// (addresses or CIDR blocks); from anyone else the header is ignored.
    pub trusted_proxies: Vec<TrustedProxy>,
    /// A second address serving only `/livez`, `/readyz` and the full
    /// `/metrics`, for probes and scrapers on a network clients cannot reach.
    pub admin_listen: Option<SocketAddr>,
    /// A request's head (request line and headers) must arrive within this
    /// long of its first byte, or of the connection opening for its first
    /// request; otherwise the connection is closed. `0s` = no limit.
    #[serde(with = "humantime_serde")]
    #[schemars(with = "super::schema::Humantime")]
    pub header_timeout: Duration,
    /// A request's body must arrive within this long of its head; otherwise
    /// 408 and the connection is closed. `0s` = no limit.
    #[serde(with = "humantime_serde")]
    #[schemars(with = "super::schema::Humantime")]
    pub body_timeout: Duration,
    /// A keep-alive connection waiting for its next request is closed after
    /// this long. `0s` = no limit.
    #[serde(with = "humantime_serde")]
    #[schemars(with = "super::schema::Humantime")]
    pub idle_timeout: Duration,
    /// A connection whose client takes none of the response for this long
    /// (one write blocked) is closed. `0s` = no limit.
    #[serde(with = "humantime_serde")]
    #[schemars(with = "super::schema::Humantime")]
    pub write_timeout: Duration,
    /// Connections open at once; one more is answered 503 and closed.
    pub max_connections: usize,
    /// MCP sessions kept at once; past it, `initialize` evicts idle ones.
    pub max_sessions: usize,
    /// An MCP session unused for this long is forgotten (its id then gets 404).
    #[serde(with = "humantime_serde")]
    #[schemars(with = "super::schema::Humantime")]
    pub session_timeout: Duration,
    /// After SIGTERM or Ctrl-C, how long running requests may go on before
    /// they are cancelled and the process exits.
    #[serde(with = "humantime_serde")]
    #[schemars(with = "super::schema::Humantime")]
    pub shutdown_grace: Duration,
    /// What happens when a tool's definition changes under a live MCP
    /// session: `off`, `warn` (logged and marked) or `block`.
    pub pinning: Pinning,
    /// The key that seals the `requestState` of 2026-07-28 input-required
    /// rounds (HMAC-SHA256); may be `{{ env.VAR }}` or `{{ file./path }}`.
    /// Unset: a random key per process, so a retry must reach the same
    /// process — replicas behind a balancer must share one key.
    pub request_state_key: Option<String>,
    /// `hangar serve --stdio`: the subject every request on stdin is made
    /// as, as a verified bearer token's subject would be (tools limited to
    /// principals, sessions owned by it). Unset: no principal, unless an
    /// auth stage finds one (it sees `HANGAR_TOKEN` as a bearer token).
    pub stdio_principal: Option<String>,
    /// Long-lived streams (`GET /mcp`, `subscriptions/listen`) one client
    /// address (an IPv6 /64) may hold open at once, and one principal; one
    /// more is refused with 429. Streams are exempt from timeouts, so
    /// without this one client could hold every connection.
    pub max_streams_per_client: usize,
    /// MCP sessions one client address (an IPv6 /64), and one principal,
    /// may hold at once; one more `initialize` is refused with 429.
    pub max_sessions_per_client: usize,
    /// Resource URIs one session may be subscribed to (`resources/subscribe`,
    /// and `resourceSubscriptions` of one `subscriptions/listen`).
    pub max_subscriptions_per_session: usize,
    /// Tasks (2026-07-28 tasks extension) one owner — a principal, or a
    /// client address when anonymous — may have kept at once; a task is
    /// kept for its `ttlMs` (one hour) after it was created.
    pub max_tasks_per_owner: u64,
    /// Whether results are checked against their tool's `outputSchema`
    /// (after the output map, before they are sent): `strict`, `warn`, `off`.
    pub output_validation: OutputValidation,
    /// Properties a result carries that its `outputSchema` does not declare
    /// where it says `additionalProperties: false` are dropped before the
    /// check, instead of failing it (`[[tools]] strip_undeclared` per tool).
    pub strip_undeclared: bool,
    /// The toolset `/mcp` and the REST surface's `/tools…` serve (a
    /// `[toolsets]` name); unset, they serve the whole catalog.
    pub default_toolset: Option<String>,
}

/// One `[server] trusted_proxies` entry: an address (`10.0.0.5`) or a
/// block (`10.0.0.0/8`, `fd00::/8`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrustedProxy(pub ipnet::IpNet);

impl TrustedProxy {
    pub fn contains(&self, ip: std::net::IpAddr) -> bool {
        self.0.contains(&ip)
    }
}

impl std::str::FromStr for TrustedProxy {
    type Err = String;

    fn from_str(s: &str) -> Result<TrustedProxy, String> {
        let s = s.trim();
        if let Ok(net) = s.parse::<ipnet::IpNet>() {
            return Ok(TrustedProxy(net.trunc()));
        }
        s.parse::<std::net::IpAddr>()
            .map(|ip| TrustedProxy(ipnet::IpNet::from(ip)))
            .map_err(|_| format!("trusted_proxies: {s:?} is not an address or a CIDR block"))
    }
}

impl JsonSchema for TrustedProxy {
    fn schema_name() -> Cow<'static, str> {
        "TrustedProxy".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "description": "An address (\"10.0.0.5\") or a CIDR block (\"10.0.0.0/8\", \"fd00::/8\")."
        })
    }
}

impl<'de> Deserialize<'de> for TrustedProxy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<TrustedProxy, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// What `tools/list` shows.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CatalogMode {
    /// Every tool.
    #[default]
    Full,
    /// Only the meta-tools `search_tools`, `read_tool` and `call_tool`.
    Meta,
    /// Every tool and the meta-tools.
    Both,
    /// Code mode: `search_tools`, `read_tool` and `run` (see `[code]`).
    Code,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            public_url: None,
            hide_unconnected: false,
            plugins: PathBuf::from("plugins"),
            cache_dir: PathBuf::from(".cache/hangar"),
            max_body_bytes: 4 * 1024 * 1024,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            max_instances: 256,
            stage_instances: None,
            long_running_slots: None,
            long_running_after: Duration::from_millis(20),
            page_size: 100,
            errors: ErrorStyle::Jsonrpc,
            allow_execute: true,
            ui: true,
            trace_ids: true,
            metrics: true,
            catalog: CatalogMode::Full,
            rate_limit: None,
            auth_failures: RateLimit {
                calls: std::num::NonZeroU32::new(10).expect("10 > 0"),
                per_minute: true,
            },
            trusted_proxies: Vec::new(),
            admin_listen: None,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(30),
            max_connections: 512,
            max_sessions: 10_000,
            session_timeout: Duration::from_secs(3600),
            shutdown_grace: Duration::from_secs(5),
            pinning: Pinning::default(),
            request_state_key: None,
            stdio_principal: None,
            max_streams_per_client: 16,
            max_sessions_per_client: 64,
            max_subscriptions_per_session: 256,
            max_tasks_per_owner: 1000,
            default_toolset: None,
            output_validation: OutputValidation::Strict,
            strip_undeclared: false,
        }
    }
}

/// `[server] request_state_key` with `{{ env.VAR }}` / `{{ file./path }}`
/// substituted; at least 16 bytes, since it is all that keeps a client
/// from forging a round's state.
pub fn state_key(text: &str) -> Result<String, String> {
    let env = |var: &str| std::env::var(var).ok();
    let key = super::substitute_env(text, &env).map_err(|e| e.to_string())?;
    if key.len() < 16 {
        return Err("must be at least 16 bytes".into());
    }
    Ok(key)
}
