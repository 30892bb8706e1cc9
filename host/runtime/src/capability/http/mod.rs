//! Outbound HTTP: `wasi:http/outgoing-handler` (wasmtime-wasi-http) under
//! per-plugin grants, deny by default.
//!
//! A grant entry is a host (ports 80/443 by scheme), `host:port`, or a `*.`
//! wildcard (any subdomain, not the bare domain). A request is checked
//! against the entries, then its host is resolved here (or taken from
//! `[http] resolve`) and every address is checked against the special-purpose
//! ranges (`ranges`: loopback, private, link-local with the cloud metadata
//! services, shared, documentation, translation and the like): one in
//! them is refused unless an entry names that address literally. The
//! request then goes to the address that was checked ([`HttpClient`]), so a
//! second DNS answer cannot point it into the network.
//!
//! Every request is bounded by the call's remaining deadline, its response
//! bytes count against the call's `max_http_bytes`, at most
//! [`MAX_IN_FLIGHT`] are in flight per call, and it carries the call's trace
//! id upstream as `traceparent`.
//!
//! As a capability ([`Http`]): each plugin keeps its parsed grants and the
//! shared client ([`HttpAccess`]); each call an [`HttpCall`] (the hooks
//! wasmtime-wasi-http asks) and wasmtime-wasi-http's own context.

mod client;
mod grants;
mod ranges;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::uri::{Authority, Scheme};
use rustls::pki_types::ServerName;
use tokio::sync::Semaphore;
use wasmtime::component::Linker;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

pub use client::{ByteBudget, HttpClient};
use grants::GrantHost;
pub use grants::HttpGrants;
use ranges::refusal;

use super::shape::{
    CallSetup, Capability, GuestStore, LoadSetup, PluginSetup, Problems, grant_lines,
};
use hangar_config::PluginConfig;

/// The import outbound requests come through.
pub const HTTP_IMPORT: &str = "wasi:http/outgoing-handler";

/// Outbound requests one call may have in flight at once.
pub const MAX_IN_FLIGHT: usize = 8;

/// What a plugin may do over HTTP: its grants, and the shared client.
#[derive(Debug, Default)]
pub struct HttpAccess {
    pub grants: HttpGrants,
    pub client: Arc<HttpClient>,
}

/// The outbound HTTP capability (see the module doc).
pub struct Http;

/// One call's outbound HTTP: wasmtime-wasi-http's context and the hooks
/// that hold the call's grants and bounds.
pub struct CallHttp {
    ctx: wasmtime_wasi_http::WasiHttpCtx,
    hooks: HttpCall,
}

impl Capability for Http {
    const IMPORTS: &'static [&'static str] = &[HTTP_IMPORT];
    type Load = Arc<HttpClient>;
    type Plugin = Arc<HttpAccess>;
    type Call = CallHttp;

    fn load(setup: &LoadSetup<'_>, _: &mut Problems) -> Arc<HttpClient> {
        setup.client.clone()
    }

    /// `grants.http` parsed; a bad entry is a problem and grants nothing.
    fn configure(
        client: &Arc<HttpClient>,
        plugin: &PluginSetup<'_>,
        problems: &mut Problems,
    ) -> Arc<HttpAccess> {
        let entries = plugin.config.map_or(&[][..], |p| &p.grants.http[..]);
        let grants = HttpGrants::parse(entries).unwrap_or_else(|error| {
            problems.add(plugin.at("grants"), error);
            HttpGrants::default()
        });
        Arc::new(HttpAccess {
            grants,
            client: client.clone(),
        })
    }

    fn per_call(access: &Arc<HttpAccess>, call: &CallSetup<'_>) -> anyhow::Result<CallHttp> {
        let hooks = HttpCall {
            plugin: call.plugin.clone(),
            access: access.clone(),
            deadline: call.deadline,
            trace_id: call.trace_id.map(str::to_owned),
            max_bytes: call.limits.max_http_bytes,
            bounds: None,
        };
        Ok(CallHttp {
            ctx: wasmtime_wasi_http::WasiHttpCtx::new(),
            hooks,
        })
    }

    fn next_call(state: &mut CallHttp, call: &CallSetup<'_>) {
        state
            .hooks
            .start_call(call.trace_id, call.limits.max_http_bytes, call.deadline);
    }

    /// Linked for every plugin; a request goes out only under a grant.
    /// wasmtime-wasi-http reaches the call's state through the store data's
    /// `WasiHttpView`, which hands it [`CallHttp::view`], not through `get`.
    fn link<T: GuestStore>(
        linker: &mut Linker<T>,
        _: fn(&mut T) -> &mut CallHttp,
    ) -> anyhow::Result<()> {
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)
            .map_err(|e| anyhow::anyhow!("{e:?}"))
    }

    fn check_lines(imports: &[String], plugin: Option<&PluginConfig>) -> Vec<String> {
        grant_lines(
            imports,
            HTTP_IMPORT,
            "http",
            plugin.map(|p| &p.grants.http[..]),
        )
    }
}

impl CallHttp {
    /// What wasmtime-wasi-http works with: its context, the store's
    /// resource table, and this call's hooks.
    pub fn view<'a>(
        &'a mut self,
        table: &'a mut wasmtime::component::ResourceTable,
    ) -> wasmtime_wasi_http::WasiHttpCtxView<'a> {
        wasmtime_wasi_http::WasiHttpCtxView {
            ctx: &mut self.ctx,
            table,
            hooks: &mut self.hooks,
        }
    }
}

/// The HTTP side of one call: whose grants, until when, for which trace.
pub struct HttpCall {
    plugin: Arc<str>,
    access: Arc<HttpAccess>,
    deadline: Instant,
    trace_id: Option<String>,
    /// The call's `max_http_bytes`.
    max_bytes: u64,
    /// The call's byte budget and its requests in flight, made on its first
    /// request: most calls make none, and pay nothing for them.
    bounds: Option<(Arc<ByteBudget>, Arc<Semaphore>)>,
}

impl HttpCall {
    /// Readies the state for a call: its trace id, byte budget and deadline.
    pub fn start_call(&mut self, trace_id: Option<&str>, max_bytes: u64, deadline: Instant) {
        self.deadline = deadline;
        self.trace_id = trace_id.map(str::to_owned);
        self.max_bytes = max_bytes;
        self.bounds = None;
    }

    /// The call's byte budget and request slots, made on first use.
    fn bounds(&mut self) -> (Arc<ByteBudget>, Arc<Semaphore>) {
        let max_bytes = self.max_bytes;
        self.bounds
            .get_or_insert_with(|| {
                (
                    Arc::new(ByteBudget::new(max_bytes)),
                    Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
                )
            })
            .clone()
    }

    /// Checks a request against the grants and answers the address to
    /// connect to.
    async fn admit(
        plugin: &str,
        access: &HttpAccess,
        authority: &Authority,
        tls: bool,
    ) -> Result<SocketAddr, Error> {
        let default_port = if tls { 443 } else { 80 };
        let port = authority.port_u16().unwrap_or(default_port);
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        let Some(grant) = access.grants.grant_for(host, port, default_port) else {
            tracing::warn!(plugin, "http: {host}:{port} not granted to plugin {plugin}");
            return Err(Error::HttpRequestDenied);
        };
        if let GrantHost::Ip(ip) = grant.host {
            return Ok(SocketAddr::new(ip, port));
        }
        let addrs: Vec<SocketAddr> = match access.client.resolved(host) {
            Some(ip) => vec![SocketAddr::new(ip, port)],
            None => tokio::net::lookup_host((host, port))
                .await
                .map_err(|_| Error::DnsError {
                    rcode: None,
                    info_code: None,
                })?
                .collect(),
        };
        // An internal address is reached only when an entry names it (and
        // the port) literally, as the guest could reach it by its literal.
        let refused = addrs.iter().find_map(|a| {
            let why = refusal(a.ip())?;
            let named = access.grants.names_address(a.ip(), port, default_port);
            (!named).then_some((a.ip(), why))
        });
        if let Some((bad, why)) = refused {
            tracing::warn!(
                plugin,
                "http: {host}:{port} resolves to {bad} ({why}), not granted to plugin {plugin}"
            );
            return Err(Error::HttpRequestDenied);
        }
        addrs.first().copied().ok_or(Error::DestinationNotFound)
    }
}

/// The request's timeouts, none longer than what is left of the call.
fn bounded_options(options: Option<RequestOptions>, left: Duration) -> RequestOptions {
    let cap = |t: Option<Duration>| Some(t.map_or(left, |t| t.min(left)));
    let o = options.unwrap_or_default();
    RequestOptions {
        connect_timeout: cap(o.connect_timeout),
        first_byte_timeout: cap(o.first_byte_timeout),
        between_bytes_timeout: cap(o.between_bytes_timeout),
    }
}

type Sent = Box<
    dyn Future<
            Output = wasmtime_wasi_http::Result<(
                http::Response<WasiBody>,
                Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
            )>,
        > + Send,
>;

impl WasiHttpHooks for HttpCall {
    fn send_request(
        &mut self,
        mut request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
    ) -> Sent {
        let (plugin, access) = (self.plugin.clone(), self.access.clone());
        let (budget, in_flight) = self.bounds();
        let left = self.deadline.saturating_duration_since(Instant::now());
        if let Some(trace_id) = &self.trace_id
            && let Ok(value) = format!("00-{trace_id}-{:016x}-01", rand_span_id()).parse()
        {
            request.headers_mut().insert("traceparent", value);
        }
        Box::new(async move {
            let Ok(permit) = in_flight.try_acquire_owned() else {
                tracing::warn!(%plugin, "http: more than {MAX_IN_FLIGHT} requests in flight in one call");
                return Err(Error::ConnectionLimitReached);
            };
            let tls = request.uri().scheme() == Some(&Scheme::HTTPS);
            let authority = request
                .uri()
                .authority()
                .cloned()
                .ok_or(Error::HttpRequestUriInvalid)?;
            let send = async {
                let checked = async {
                    let addr = Self::admit(&plugin, &access, &authority, tls).await?;
                    let tls_name = tls.then(|| server_name(&authority)).transpose()?;
                    Ok::<_, Error>((addr, tls_name))
                };
                let (addr, tls_name) = match checked.await {
                    Ok(checked) => checked,
                    Err(e) => {
                        // The guest may still be writing the body: read it
                        // away, so it hears this error from the response and
                        // not a broken body stream.
                        drain(request.into_body(), left);
                        return Err(e);
                    }
                };
                let timeouts = bounded_options(options, left);
                let response = access
                    .client
                    .send(request, addr, tls_name, timeouts, budget, permit)
                    .await?;
                let done: Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send> =
                    Box::new(async { Ok(()) });
                Ok((response, done))
            };
            tokio::time::timeout(left, send)
                .await
                .unwrap_or(Err(Error::ConnectionTimeout))
        })
    }
}

/// Reads a refused request's body to its end (or the call's deadline) in
/// the background.
fn drain(body: WasiBody, left: Duration) {
    use http_body_util::BodyExt as _;
    tokio::spawn(async move {
        let mut body = body;
        let _ = tokio::time::timeout(left, async {
            while let Some(Ok(_)) = body.frame().await {}
        })
        .await;
    });
}

/// The name a TLS certificate must carry for `authority`.
fn server_name(authority: &Authority) -> Result<ServerName<'static>, Error> {
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => Ok(ServerName::from(ip)),
        Err(_) => ServerName::try_from(host.to_string()).map_err(|_| Error::HttpRequestUriInvalid),
    }
}

/// A span id for `traceparent`: unique enough to tell requests apart.
fn rand_span_id() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(Instant::now()) | 1
}
