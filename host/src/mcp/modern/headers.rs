//! The headers a modern POST mirrors from its body (`MCP-Protocol-Version`,
//! `Mcp-Method`, `Mcp-Name`), so intermediaries can route on them: they
//! must be present and equal to the body, or the request is refused with
//! `HeaderMismatch` — a balancer routing on a header must not see the
//! server run something else.

use axum::http::HeaderMap;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};

use super::codes::HEADER_MISMATCH;
use crate::mcp::guard;
use crate::mcp::jsonrpc::RpcError;
use crate::mcp::methods::{Era, Method};

fn mismatch(message: String) -> RpcError {
    RpcError::new(HEADER_MISMATCH, format!("Header mismatch: {message}"))
}

/// A header's value, decoded from the `=?base64?…?=` form when it uses it.
/// `None` when it is absent; an error when it is not visible ASCII or not
/// valid base64 UTF-8.
fn value(headers: &HeaderMap, name: &str) -> Result<Option<String>, RpcError> {
    let Some(raw) = headers.get(name) else {
        return Ok(None);
    };
    let raw = raw
        .to_str()
        .map_err(|_| mismatch(format!("{name} has characters a header may not carry")))?;
    match raw
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    {
        None => Ok(Some(raw.to_string())),
        Some(encoded) => STANDARD
            .decode(encoded)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .map(Some)
            .ok_or_else(|| mismatch(format!("{name} is not valid base64 UTF-8"))),
    }
}

/// `MCP-Protocol-Version` must be sent and equal `_meta`'s version. Unlike
/// the 2025 guard's reading ([`guard::version_header`]) the value is
/// decoded first, as every mirrored header is.
pub fn check_version(headers: &HeaderMap, version: &str) -> Result<(), RpcError> {
    match value(headers, guard::VERSION_HEADER)? {
        None => Err(mismatch(
            "the MCP-Protocol-Version header is required".into(),
        )),
        Some(v) if v == version => Ok(()),
        Some(v) => Err(mismatch(format!(
            "MCP-Protocol-Version header value '{v}' does not match _meta value '{version}'"
        ))),
    }
}

/// `Mcp-Method` must equal the method; `Mcp-Name` the name or URI of the
/// methods that address one thing.
pub fn check_method(
    headers: &HeaderMap,
    method: &str,
    params: &Map<String, Value>,
) -> Result<(), RpcError> {
    match value(headers, "mcp-method")? {
        None => return Err(mismatch("the Mcp-Method header is required".into())),
        Some(m) if m == method => {}
        Some(m) => {
            return Err(mismatch(format!(
                "Mcp-Method header value '{m}' does not match body value '{method}'"
            )));
        }
    }
    let field = match Method::spoken_in(method, Era::Modern) {
        Some(Method::ToolsCall | Method::PromptsGet) => "name",
        Some(Method::ResourcesRead) => "uri",
        Some(Method::TasksGet | Method::TasksUpdate | Method::TasksCancel) => "taskId",
        _ => return Ok(()),
    };
    let Some(body) = params.get(field).and_then(Value::as_str) else {
        // The handler reports the missing field itself.
        return Ok(());
    };
    match value(headers, "mcp-name")? {
        None => Err(mismatch("the Mcp-Name header is required".into())),
        Some(n) if n == body => Ok(()),
        Some(n) => Err(mismatch(format!(
            "Mcp-Name header value '{n}' does not match body value '{body}'"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::guard::headers;
    use serde_json::json;

    #[test]
    fn names_are_compared_after_decoding() {
        let params = json!({ "name": "Hello, 世界" })
            .as_object()
            .unwrap()
            .clone();
        let h = headers(&[
            ("mcp-method", "tools/call"),
            ("mcp-name", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        ]);
        assert!(check_method(&h, "tools/call", &params).is_ok());
        let h = headers(&[("mcp-method", "tools/call"), ("mcp-name", "other")]);
        assert_eq!(
            check_method(&h, "tools/call", &params).unwrap_err().code,
            HEADER_MISMATCH
        );
        let h = headers(&[("mcp-method", "tools/call")]);
        assert!(check_method(&h, "tools/call", &params).is_err());
        let h = headers(&[("mcp-method", "tools/call"), ("mcp-name", "=?base64?!!?=")]);
        assert!(check_method(&h, "tools/call", &params).is_err());
    }

    #[test]
    fn the_method_header_is_required_and_compared() {
        let none = Map::new();
        assert!(check_method(&headers(&[]), "tools/list", &none).is_err());
        let h = headers(&[("mcp-method", "tools/list")]);
        assert!(check_method(&h, "tools/list", &none).is_ok());
        assert!(check_method(&h, "prompts/list", &none).is_err());
    }
}
