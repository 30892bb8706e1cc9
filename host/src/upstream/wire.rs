//! The upstream wire's vocabulary, whatever the transport (Streamable HTTP
//! in `client`, a child process in `stdio`): the protocol versions spoken,
//! how an exchange fails, an answer, a session's handshake, and the
//! `initialize` request and its agreed version.

use serde_json::{Value, json};

use hangar_core::outbound;

/// The protocol version asked for first; the server's answer is used after.
pub const PROTOCOL_VERSION: &str = "2025-11-25";
/// The versions this client speaks, newest first. A server that refuses
/// the newest at `initialize` is asked once more with the next.
pub const SUPPORTED_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

/// What the wire failed with. Messages never carry the URL or headers.
#[derive(Debug, Clone, PartialEq)]
pub enum WireError {
    /// No connection, or it broke before the answer.
    Unreachable(String),
    /// No answer within the upstream's `timeout`.
    Timeout,
    /// 404 to a request carrying a session id: the session is gone.
    SessionExpired,
    /// A 5xx answer.
    Status(u16),
    /// An answer that is not MCP (a 4xx, bad JSON, no answer in the stream).
    Protocol(String),
    /// An answer longer than the upstream's `max_response_bytes`: what was
    /// read is dropped and the connection closed.
    TooLarge(usize),
}

impl WireError {
    /// Whether the upstream looks down (what the breaker counts).
    pub fn is_outage(&self) -> bool {
        matches!(
            self,
            WireError::Unreachable(_) | WireError::Timeout | WireError::Status(_)
        )
    }
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::Unreachable(why) => write!(f, "unreachable ({why})"),
            WireError::Timeout => f.write_str("timed out"),
            WireError::SessionExpired => f.write_str("session expired"),
            WireError::Status(code) => write!(f, "answered HTTP {code}"),
            WireError::Protocol(why) => write!(f, "answered no MCP: {why}"),
            WireError::TooLarge(limit) => write!(
                f,
                "answered more than {} (max_response_bytes)",
                outbound::size(*limit)
            ),
        }
    }
}

/// The answer to a request: its `result`, or its JSON-RPC `error` object
/// (passed on to the caller unchanged).
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Result(Value),
    Error(Value),
}

/// One upstream session: its id (none if the server keeps no sessions),
/// the protocol version it agreed to, and the caller's bearer token its
/// requests carry (`[upstreams.NAME] auth`; none: `headers` alone).
#[derive(Debug, Clone)]
pub struct Handshake {
    pub session_id: Option<String>,
    pub protocol_version: String,
    pub bearer: Option<hangar_core::call::AccessToken>,
}

/// The `initialize` request asking for protocol `version`, declaring `capabilities`.
pub fn initialize_message(version: &str, capabilities: &Value) -> Value {
    let params = json!({
        "protocolVersion": version,
        "capabilities": capabilities,
        "clientInfo": { "name": "hangar", "version": env!("CARGO_PKG_VERSION") },
    });
    json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params })
}

/// The protocol version an `initialize` result agreed to (`asked`, if it
/// names none), if this client speaks it.
pub fn supported_version(result: &Value, asked: &str) -> Result<String, WireError> {
    let agreed = result
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or(asked);
    match SUPPORTED_VERSIONS.iter().find(|v| **v == agreed) {
        Some(agreed) => Ok(agreed.to_string()),
        // We must not speak a revision we do not know (the spec: the
        // client disconnects). Said without the server's text.
        None => Err(WireError::Protocol(
            "initialize agreed to a protocol version this client does not speak".into(),
        )),
    }
}
