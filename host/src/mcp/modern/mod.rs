//! MCP 2026-07-28, the "modern" revision, beside the 2025 revisions on the
//! same `/mcp` endpoint. A modern request carries its protocol version and
//! the client's capabilities in `params._meta` and in headers; there is no
//! session and no `initialize`. This module decides which revision a POST
//! speaks ([`era`]), checks a modern request's `_meta` and headers before
//! anything runs ([`admit`]), and turns answers into modern results
//! ([`complete`]): `resultType`, the server's identity in `_meta`, and the
//! caching hints lists and reads must carry.

mod headers;
mod listen;
mod meta;
mod post;
mod rounds;
mod state;
mod task_input;
pub(in crate::mcp) mod tasks;

use axum::http::{HeaderMap, StatusCode};
use serde_json::{Map, Value, json};

pub use listen::{Filter, open as listen};
pub use meta::RequestMeta;
pub(super) use post::post;
pub use rounds::Rounds;
pub use state::{StateKey, digest};
pub use tasks::Tasks;

use super::guard::{VersionHeader, version_header};
use super::jsonrpc::RpcError;

/// Modern revisions this server speaks, newest first.
pub const MODERN_VERSIONS: &[&str] = &["2026-07-28"];

/// `HeaderMismatch`: a mirrored header is missing or differs from the body.
pub const HEADER_MISMATCH: i64 = -32020;
/// `MissingRequiredClientCapability`: the request needs a capability the
/// client did not declare in `_meta`.
pub const MISSING_CAPABILITY: i64 = -32021;
/// `UnsupportedProtocolVersion`.
pub const UNSUPPORTED_VERSION: i64 = -32022;

const VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";

/// Which revision one POST speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// 2025-11-25 and earlier: `initialize`, sessions, server-to-client requests.
    Legacy,
    /// 2026-07-28: stateless, everything in each request.
    Modern,
}

/// The spec's dual-era rule for HTTP: a request whose `MCP-Protocol-Version`
/// header names a modern revision, or whose `_meta` carries a protocol
/// version, is modern (an `Mcp-Session-Id` on it is ignored, as the
/// revision says); a legacy version header, or none and no modern `_meta`,
/// keeps the 2025 behaviour. A version nobody knows is answered in the
/// modern shape (`UnsupportedProtocolVersion` lists every revision), which
/// both eras' clients can read.
pub fn era(headers: &HeaderMap, params: Option<&Map<String, Value>>) -> Era {
    match version_header(headers) {
        VersionHeader::Legacy(_) => Era::Legacy,
        VersionHeader::Other(_) => Era::Modern,
        VersionHeader::Absent
            if params
                .and_then(|p| p.get("_meta"))
                .is_some_and(|m| m.get(VERSION_KEY).is_some()) =>
        {
            Era::Modern
        }
        VersionHeader::Absent => Era::Legacy,
    }
}

/// Every revision this server speaks, modern first.
pub fn all_versions() -> Vec<&'static str> {
    MODERN_VERSIONS
        .iter()
        .chain(super::SUPPORTED_VERSIONS)
        .copied()
        .collect()
}

/// A modern request refused before it ran: the HTTP status and the error.
#[derive(Debug)]
pub struct Refused {
    pub status: StatusCode,
    pub error: RpcError,
}

impl Refused {
    fn bad_request(error: RpcError) -> Refused {
        Refused {
            status: StatusCode::BAD_REQUEST,
            error,
        }
    }
}

/// The checks a modern request passes before any handler sees it, in the
/// spec's order: `_meta` well formed (-32602), the version header equal to
/// `_meta`'s (-32020), the version one this server speaks (-32022), and
/// `Mcp-Method` / `Mcp-Name` equal to the body's (-32020). All are HTTP 400.
pub fn admit(
    headers: &HeaderMap,
    method: &str,
    params: &Map<String, Value>,
) -> Result<RequestMeta, Refused> {
    let meta = RequestMeta::parse(params.get("_meta"))
        .map_err(|why| Refused::bad_request(RpcError::invalid_params(why)))?;
    headers::check_version(headers, &meta.version).map_err(Refused::bad_request)?;
    if !MODERN_VERSIONS.contains(&meta.version.as_str()) {
        return Err(Refused::bad_request(RpcError {
            code: UNSUPPORTED_VERSION,
            message: format!("Unsupported protocol version: {}", meta.version),
            data: Some(json!({ "supported": all_versions(), "requested": meta.version })),
        }));
    }
    headers::check_method(headers, method, params).map_err(Refused::bad_request)?;
    Ok(meta)
}

/// The server's identity, as modern results carry it in `_meta`.
pub fn server_info() -> Value {
    json!({ "name": "hangar", "version": env!("CARGO_PKG_VERSION") })
}

/// How long a client may keep a list: lists change only on a reload or an
/// upstream's change, and `subscriptions/listen` tells of both.
const LIST_TTL_MS: u64 = 60_000;

/// A result in the modern shape: `resultType: "complete"`, the server's
/// identity in `_meta`, and for the cacheable methods `ttlMs` and
/// `cacheScope`. `private` is true when the answer may depend on who asked
/// (credentials were sent): shared caches must then not keep it.
pub fn complete(mut result: Value, method: &str, private: bool) -> Value {
    let Some(obj) = result.as_object_mut() else {
        return result;
    };
    obj.insert("resultType".into(), json!("complete"));
    let meta = obj
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(meta) = meta.as_object_mut() {
        meta.insert("io.modelcontextprotocol/serverInfo".into(), server_info());
    }
    let ttl = match method {
        "server/discover"
        | "tools/list"
        | "prompts/list"
        | "resources/list"
        | "resources/templates/list" => Some(LIST_TTL_MS),
        // A resource's content may change at any time (and is announced
        // only to subscribers): fresh for no time.
        "resources/read" => Some(0),
        _ => None,
    };
    if let Some(ttl) = ttl {
        obj.entry("ttlMs").or_insert(json!(ttl));
        let scope = if private || method == "resources/read" {
            "private"
        } else {
            "public"
        };
        obj.entry("cacheScope").or_insert(json!(scope));
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::guard::headers;

    fn meta(version: &str) -> Map<String, Value> {
        json!({ "_meta": {
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {},
        }})
        .as_object()
        .unwrap()
        .clone()
    }

    #[test]
    fn the_era_follows_the_spec_rule() {
        let modern = meta("2026-07-28");
        assert_eq!(era(&headers(&[]), None), Era::Legacy);
        assert_eq!(era(&headers(&[]), Some(&modern)), Era::Modern);
        let h = headers(&[("mcp-protocol-version", "2026-07-28")]);
        assert_eq!(era(&h, None), Era::Modern);
        let h = headers(&[("mcp-protocol-version", "2025-11-25")]);
        assert_eq!(era(&h, Some(&modern)), Era::Legacy);
        let h = headers(&[
            ("mcp-session-id", "abc"),
            ("mcp-protocol-version", "2026-07-28"),
        ]);
        assert_eq!(era(&h, Some(&modern)), Era::Modern);
        let h = headers(&[("mcp-session-id", "abc")]);
        assert_eq!(era(&h, None), Era::Legacy);
        let h = headers(&[("mcp-protocol-version", "1999-01-01")]);
        assert_eq!(era(&h, None), Era::Modern);
    }

    #[test]
    fn admission_checks_meta_then_headers_then_version() {
        let ok = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/list"),
        ]);
        assert!(admit(&ok, "tools/list", &meta("2026-07-28")).is_ok());
        let e = admit(&ok, "tools/list", &Map::new()).unwrap_err();
        assert_eq!((e.status, e.error.code), (StatusCode::BAD_REQUEST, -32602));
        let e = admit(&ok, "tools/list", &meta("v9")).unwrap_err();
        assert_eq!(e.error.code, HEADER_MISMATCH);
        let v9 = headers(&[("mcp-protocol-version", "v9"), ("mcp-method", "tools/list")]);
        let e = admit(&v9, "tools/list", &meta("v9")).unwrap_err();
        assert_eq!(e.error.code, UNSUPPORTED_VERSION);
        assert_eq!(e.error.data.as_ref().unwrap()["requested"], "v9");
        let e = admit(&ok, "prompts/list", &meta("2026-07-28")).unwrap_err();
        assert_eq!(e.error.code, HEADER_MISMATCH);
    }

    #[test]
    fn complete_results_carry_type_identity_and_cache_hints() {
        let r = complete(json!({ "tools": [] }), "tools/list", false);
        assert_eq!(r["resultType"], "complete");
        assert_eq!(
            r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            "hangar"
        );
        assert_eq!(
            (r["ttlMs"].as_u64(), r["cacheScope"].as_str()),
            (Some(60_000), Some("public"))
        );
        let r = complete(json!({ "tools": [] }), "tools/list", true);
        assert_eq!(r["cacheScope"], "private");
        let r = complete(json!({ "content": [] }), "tools/call", false);
        assert!(r.get("ttlMs").is_none());
    }
}
