//! Outbound HTTP: `wasi:http/outgoing-handler` (wasmtime-wasi-http) under
//! per-plugin grants, deny by default.
//!
//! A grant entry is a host (ports 80/443 by scheme), `host:port`, or a `*.`
//! wildcard (any subdomain, not the bare domain). A request is checked
//! against the entries, then its host is resolved here and every address is
//! checked: loopback, private, link-local (cloud metadata included),
//! shared and unspecified addresses are refused unless an entry names that
//! address literally. Plain-HTTP requests then connect to the address that
//! was checked, so a second DNS answer cannot point them into the network;
//! HTTPS requests are resolved again by the TLS client, where certificate
//! verification stands in the way of a rebinding answer.
//!
//! Every request is bounded by the call's remaining deadline and carries the
//! call's trace id upstream as `traceparent`.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::uri::{Authority, Scheme};
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

/// A plugin's `grants.http`, parsed at load.
#[derive(Debug, Clone, Default)]
pub struct HttpGrants {
    entries: Vec<Grant>,
}

#[derive(Debug, Clone)]
struct Grant {
    host: GrantHost,
    /// `None`: the scheme's default port.
    port: Option<u16>,
}

#[derive(Debug, Clone)]
enum GrantHost {
    /// A name, matched without regard to case.
    Name(String),
    /// `*.example.org`: the suffix `.example.org`.
    Wildcard(String),
    /// An address named literally: the only way to reach a private one.
    Ip(IpAddr),
}

impl HttpGrants {
    /// Parses `grants.http` entries; an entry that is not a host, `host:port`
    /// or `*.domain` is an error naming it.
    pub fn parse(entries: &[String]) -> Result<HttpGrants, String> {
        let entries = entries
            .iter()
            .map(|e| {
                Grant::parse(e).ok_or_else(|| {
                    format!("grants.http: {e:?} is not a host, host:port or *.domain")
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(HttpGrants { entries })
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry that grants `host:port` (`default_port` being the scheme's).
    fn grant_for(&self, host: &str, port: u16, default_port: u16) -> Option<&Grant> {
        self.entries.iter().find(|g| {
            g.port.unwrap_or(default_port) == port
                && match &g.host {
                    GrantHost::Name(name) => name.eq_ignore_ascii_case(host),
                    GrantHost::Wildcard(suffix) => {
                        host.len() > suffix.len()
                            && host.to_ascii_lowercase().ends_with(suffix.as_str())
                    }
                    GrantHost::Ip(ip) => host.parse::<IpAddr>().is_ok_and(|h| h == *ip),
                }
        })
    }
}

impl Grant {
    fn parse(entry: &str) -> Option<Grant> {
        let entry = entry.trim();
        let (host, port) = match entry.parse::<SocketAddr>() {
            Ok(addr) => {
                return Some(Grant {
                    host: GrantHost::Ip(addr.ip()),
                    port: Some(addr.port()),
                });
            }
            Err(_) => match entry.rsplit_once(':') {
                Some((h, p)) if !h.contains(':') => (h, Some(p.parse::<u16>().ok()?)),
                _ => (entry, None),
            },
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Some(Grant {
                host: GrantHost::Ip(ip),
                port,
            });
        }
        let valid = |name: &str| {
            !name.is_empty()
                && name.split('.').all(|l| {
                    !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                })
        };
        let host = match host.strip_prefix("*.") {
            Some(domain) if valid(domain) => {
                GrantHost::Wildcard(format!(".{}", domain.to_ascii_lowercase()))
            }
            None if valid(host) => GrantHost::Name(host.to_ascii_lowercase()),
            _ => return None,
        };
        Some(Grant { host, port })
    }
}

/// Addresses a guest reaches only when a grant names them literally.
fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => internal_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => internal_v4(v4),
            None => {
                let first = v6.segments()[0];
                v6.is_loopback()
                    || v6.is_unspecified()
                    || (first & 0xfe00) == 0xfc00 // unique local (fd00:ec2::254 is AWS metadata)
                    || (first & 0xffc0) == 0xfe80 // link-local
                    || v6 == Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0xa9fe, 0xa9fe) // NAT64 of 169.254.169.254
            }
        },
    }
}

fn internal_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local() // 169.254/16: the cloud metadata services
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || (a == 100 && (64..128).contains(&b)) // shared address space (Alibaba metadata: 100.100.100.200)
        || a == 0
}

/// The HTTP side of one call: whose grants, until when, for which trace.
pub struct HttpCall {
    plugin: Arc<str>,
    grants: Arc<HttpGrants>,
    pub(super) deadline: Instant,
    pub(super) trace_id: Option<String>,
}

impl HttpCall {
    pub fn new(plugin: Arc<str>, grants: Arc<HttpGrants>) -> HttpCall {
        HttpCall {
            plugin,
            grants,
            deadline: Instant::now(),
            trace_id: None,
        }
    }

    /// Checks a request against the grants; the address to connect to when
    /// it must be pinned (plain HTTP), or `None` to let the client resolve.
    async fn admit(
        plugin: &str,
        grants: &HttpGrants,
        authority: &Authority,
        tls: bool,
    ) -> Result<Option<SocketAddr>, Error> {
        let default_port = if tls { 443 } else { 80 };
        let port = authority.port_u16().unwrap_or(default_port);
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        let Some(grant) = grants.grant_for(host, port, default_port) else {
            tracing::warn!(plugin, "http: {host}:{port} not granted to plugin {plugin}");
            return Err(Error::HttpRequestDenied);
        };
        if let GrantHost::Ip(ip) = grant.host {
            return Ok(Some(SocketAddr::new(ip, port)));
        }
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
            .await
            .map_err(|_| Error::DnsError {
                rcode: None,
                info_code: None,
            })?
            .collect();
        if let Some(bad) = addrs.iter().find(|a| is_internal(a.ip())) {
            tracing::warn!(
                plugin,
                "http: {host}:{port} resolves to {}, not granted to plugin {plugin}",
                bad.ip()
            );
            return Err(Error::HttpRequestDenied);
        }
        let first = addrs.first().copied().ok_or(Error::DestinationNotFound)?;
        Ok((!tls).then_some(first))
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
        let (plugin, grants) = (self.plugin.clone(), self.grants.clone());
        let left = self.deadline.saturating_duration_since(Instant::now());
        if let Some(trace_id) = &self.trace_id
            && let Ok(value) = format!("00-{trace_id}-{:016x}-01", rand_span_id()).parse()
        {
            request.headers_mut().insert("traceparent", value);
        }
        Box::new(async move {
            use http_body_util::BodyExt;
            let tls = request.uri().scheme() == Some(&Scheme::HTTPS);
            let authority = request
                .uri()
                .authority()
                .cloned()
                .ok_or(Error::HttpRequestUriInvalid)?;
            let send = async {
                if let Some(addr) = Self::admit(&plugin, &grants, &authority, tls).await? {
                    pin_address(&mut request, addr)?;
                }
                let (response, io) = wasmtime_wasi_http::default_send_request(
                    request,
                    Some(bounded_options(options, left)),
                )
                .await?;
                Ok((
                    response.map(BodyExt::boxed_unsync),
                    Box::new(io) as Box<dyn Future<Output = _> + Send>,
                ))
            };
            tokio::time::timeout(left, send)
                .await
                .unwrap_or(Err(Error::ConnectionTimeout))
        })
    }
}

/// Points a plain-HTTP request at the address that was checked; the `Host`
/// header (set from the guest's authority) still names the host.
fn pin_address(request: &mut http::Request<WasiBody>, addr: SocketAddr) -> Result<(), Error> {
    let mut parts = request.uri().clone().into_parts();
    parts.authority = Some(
        addr.to_string()
            .parse()
            .map_err(|_| Error::HttpRequestUriInvalid)?,
    );
    *request.uri_mut() = http::Uri::from_parts(parts).map_err(|_| Error::HttpRequestUriInvalid)?;
    Ok(())
}

/// A span id for `traceparent`: unique enough to tell requests apart.
fn rand_span_id() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(Instant::now()) | 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants(entries: &[&str]) -> HttpGrants {
        HttpGrants::parse(&entries.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn entries_match_host_port_and_wildcards() {
        let g = grants(&[
            "api.github.com",
            "*.example.org",
            "127.0.0.1:9000",
            "svc:8080",
        ]);
        assert!(g.grant_for("api.github.com", 443, 443).is_some());
        assert!(g.grant_for("API.GitHub.com", 80, 80).is_some());
        assert!(g.grant_for("api.github.com", 8443, 443).is_none());
        assert!(g.grant_for("a.b.example.org", 443, 443).is_some());
        assert!(g.grant_for("example.org", 443, 443).is_none());
        assert!(g.grant_for("badexample.org", 443, 443).is_none());
        assert!(g.grant_for("127.0.0.1", 9000, 80).is_some());
        assert!(g.grant_for("127.0.0.1", 9001, 80).is_none());
        assert!(g.grant_for("svc", 8080, 80).is_some());
        assert!(HttpGrants::parse(&["http://x".into()]).is_err());
        assert!(HttpGrants::parse(&["a b".into()]).is_err());
        assert!(HttpGrants::parse(&["host:notaport".into()]).is_err());
    }

    #[test]
    fn internal_addresses_are_recognised() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.100.100.200",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00:ec2::254",
            "::ffff:10.0.0.1",
        ] {
            assert!(is_internal(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "2606:4700::1111", "8.8.8.8"] {
            assert!(!is_internal(ip.parse().unwrap()), "{ip}");
        }
    }
}
