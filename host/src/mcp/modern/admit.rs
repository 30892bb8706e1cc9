//! Which revision a POST speaks ([`era`]) and the checks a modern request
//! passes before anything runs ([`admit`]): the 2026 front's door.

use axum::http::{HeaderMap, StatusCode};
use serde_json::{Map, Value, json};

use super::codes::{MODERN_VERSIONS, UNSUPPORTED_VERSION};
use super::headers;
use super::meta::RequestMeta;
use crate::mcp::guard::{SUPPORTED_VERSIONS, VersionHeader, version_header};
use crate::mcp::jsonrpc::RpcError;
use crate::mcp::methods::Era;

const VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";

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
        .chain(SUPPORTED_VERSIONS)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::guard::headers;
    use crate::mcp::modern::codes::HEADER_MISMATCH;

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
}
