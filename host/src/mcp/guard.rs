//! Checks made before any MCP message is read: DNS-rebinding protection
//! (Host and Origin) and the protocol version header.

use axum::http::header::{HOST, ORIGIN};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::jsonrpc::{self, RpcError};
use super::reply::json_response;

/// Protocol versions this server speaks, newest first.
pub const SUPPORTED_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];
pub const LATEST_VERSION: &str = SUPPORTED_VERSIONS[0];

/// Which hosts and origins may reach the server: loopback always, plus the
/// configured ones (`*` allows any).
#[derive(Debug, Clone, Default)]
pub struct OriginPolicy {
    pub allowed_hosts: Vec<String>,
    pub allowed_origins: Vec<String>,
}

impl OriginPolicy {
    /// `[server] allowed_hosts` and `allowed_origins`.
    pub fn of(server: &hangar_config::ServerConfig) -> OriginPolicy {
        OriginPolicy {
            allowed_hosts: server.allowed_hosts.clone(),
            allowed_origins: server.allowed_origins.clone(),
        }
    }
}

/// Why a request was refused before reading it.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    Host(String),
    Origin(String),
    Version(String),
}

/// A refused request: 403 for a host or origin, 400 for a version, with
/// the JSON-RPC error in the body.
impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let (status, message) = match self {
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
}

impl OriginPolicy {
    pub fn check(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        if let Some(host) = headers.get(HOST) {
            let host = host.to_str().unwrap_or_default();
            if !self.host_allowed(host) {
                return Err(Refusal::Host(host.to_string()));
            }
        }
        if let Some(origin) = headers.get(ORIGIN) {
            let origin = origin.to_str().unwrap_or_default();
            if !self.origin_allowed(origin) {
                return Err(Refusal::Origin(origin.to_string()));
            }
        }
        Ok(())
    }

    fn host_allowed(&self, host: &str) -> bool {
        let name = hostname(host);
        is_loopback(name)
            || self
                .allowed_hosts
                .iter()
                .any(|h| h == "*" || h.eq_ignore_ascii_case(name) || h.eq_ignore_ascii_case(host))
    }

    fn origin_allowed(&self, origin: &str) -> bool {
        if self
            .allowed_origins
            .iter()
            .any(|o| o == "*" || o.eq_ignore_ascii_case(origin))
        {
            return true;
        }
        // `scheme://host[:port]`; the literal `null` origin is not loopback.
        match origin.split_once("://") {
            Some((scheme, rest)) if scheme == "http" || scheme == "https" => {
                is_loopback(hostname(rest.split('/').next().unwrap_or_default()))
            }
            _ => false,
        }
    }
}

/// The host name of a `host[:port]` authority, IPv6 brackets kept.
fn hostname(authority: &str) -> &str {
    if authority.starts_with('[') {
        return authority.split_inclusive(']').next().unwrap_or(authority);
    }
    authority.split(':').next().unwrap_or(authority)
}

fn is_loopback(name: &str) -> bool {
    name.eq_ignore_ascii_case("localhost")
        || name == "[::1]"
        || name
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The header every revision's client sends its protocol version in.
pub const VERSION_HEADER: &str = "mcp-protocol-version";

/// What the `MCP-Protocol-Version` header says, read in one place for every
/// check of it: the 2025 guard ([`check_version`]), the choice of revision
/// (`modern::era`) and the modern check against `_meta`
/// (`modern::headers::check_version`, which decodes the value first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionHeader<'a> {
    /// Not sent.
    Absent,
    /// One of [`SUPPORTED_VERSIONS`], the 2025 revisions.
    Legacy(&'a str),
    /// Anything else: a modern revision or one nobody knows. A value that is
    /// not visible ASCII reads as `""`.
    Other(&'a str),
}

/// Reads and sorts the `MCP-Protocol-Version` header.
pub fn version_header(headers: &HeaderMap) -> VersionHeader<'_> {
    match headers.get(VERSION_HEADER) {
        None => VersionHeader::Absent,
        Some(v) => {
            let v = v.to_str().unwrap_or_default();
            if SUPPORTED_VERSIONS.contains(&v) {
                VersionHeader::Legacy(v)
            } else {
                VersionHeader::Other(v)
            }
        }
    }
}

/// An `MCP-Protocol-Version` header, when present, must name a supported version.
pub fn check_version(headers: &HeaderMap) -> Result<(), Refusal> {
    match version_header(headers) {
        VersionHeader::Other(v) => Err(Refusal::Version(v.to_string())),
        VersionHeader::Absent | VersionHeader::Legacy(_) => Ok(()),
    }
}

/// A header map of `pairs`, for the tests of every module that checks headers.
#[cfg(test)]
pub(crate) fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(*k, v.parse().unwrap());
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_allowed_and_others_are_not() {
        let p = OriginPolicy::default();
        assert!(
            p.check(&headers(&[
                ("host", "127.0.0.1:8080"),
                ("origin", "http://localhost:3000")
            ]))
            .is_ok()
        );
        assert!(p.check(&headers(&[("host", "[::1]:8080")])).is_ok());
        assert_eq!(
            p.check(&headers(&[("host", "evil.example.com")])),
            Err(Refusal::Host("evil.example.com".into()))
        );
        assert!(
            p.check(&headers(&[
                ("host", "localhost"),
                ("origin", "http://evil.example.com")
            ]))
            .is_err()
        );
        assert!(
            p.check(&headers(&[("host", "localhost"), ("origin", "null")]))
                .is_err()
        );
        assert!(
            p.check(&headers(&[("host", "localhost.evil.com")]))
                .is_err()
        );
    }

    #[test]
    fn configured_hosts_and_origins_are_allowed() {
        let p = OriginPolicy {
            allowed_hosts: vec!["mcp.example.com".into()],
            allowed_origins: vec!["https://app.example.com".into()],
        };
        assert!(
            p.check(&headers(&[
                ("host", "mcp.example.com:443"),
                ("origin", "https://app.example.com")
            ]))
            .is_ok()
        );
        assert!(p.check(&headers(&[("host", "other.example.com")])).is_err());
    }

    #[test]
    fn protocol_version_header() {
        assert!(check_version(&headers(&[])).is_ok());
        assert!(check_version(&headers(&[("mcp-protocol-version", "2025-03-26")])).is_ok());
        assert!(check_version(&headers(&[("mcp-protocol-version", "1999-01-01")])).is_err());
        let h = headers(&[("mcp-protocol-version", "2026-07-28")]);
        assert_eq!(version_header(&h), VersionHeader::Other("2026-07-28"));
        let h = headers(&[("mcp-protocol-version", "2025-11-25")]);
        assert_eq!(version_header(&h), VersionHeader::Legacy("2025-11-25"));
        assert_eq!(version_header(&headers(&[])), VersionHeader::Absent);
    }
}
