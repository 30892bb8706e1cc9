//! JSON-RPC 2.0 framing for MCP: telling requests, notifications and
//! responses apart, and writing results and errors.

use serde::Serialize;
use serde_json::{Map, Value};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const SERVER_ERROR: i64 = -32000;

/// One incoming JSON-RPC message.
#[derive(Debug)]
pub enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Map<String, Value>,
    },
    Notification {
        method: String,
        params: Map<String, Value>,
    },
    /// A response to something the server asked; accepted and ignored.
    Response,
}

/// Why a body is not a message we can handle.
#[derive(Debug)]
pub struct Rejection {
    pub id: Value,
    pub error: RpcError,
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, Serialize)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(INVALID_PARAMS, message)
    }
}

impl Incoming {
    /// Parses one message from a POST body.
    pub fn parse(body: &[u8]) -> Result<Incoming, Rejection> {
        let value: Value = serde_json::from_slice(body).map_err(|e| Rejection {
            id: Value::Null,
            error: RpcError::new(PARSE_ERROR, format!("Parse error: {e}")),
        })?;
        let Value::Object(mut obj) = value else {
            let what = if value.is_array() {
                "batches are not supported"
            } else {
                "a message must be a JSON object"
            };
            return Err(invalid(Value::Null, what));
        };
        let id = obj.remove("id");
        let id_value = id.clone().unwrap_or(Value::Null);
        if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(invalid(id_value, "jsonrpc must be \"2.0\""));
        }
        if let Some(id) = &id
            && !(id.is_string() || id.is_i64() || id.is_u64())
        {
            return Err(invalid(Value::Null, "id must be a string or an integer"));
        }
        let params = match obj.remove("params") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(p)) => p,
            Some(_) => return Err(invalid(id_value, "params must be an object")),
        };
        match (obj.remove("method"), id) {
            (Some(Value::String(method)), Some(id)) => Ok(Incoming::Request { id, method, params }),
            (Some(Value::String(method)), None) => Ok(Incoming::Notification { method, params }),
            (Some(_), _) => Err(invalid(id_value, "method must be a string")),
            (None, Some(_)) if obj.contains_key("result") || obj.contains_key("error") => {
                Ok(Incoming::Response)
            }
            (None, _) => Err(invalid(id_value, "a message needs a method")),
        }
    }
}

fn invalid(id: Value, why: &str) -> Rejection {
    Rejection {
        id,
        error: RpcError::new(INVALID_REQUEST, format!("Invalid Request: {why}")),
    }
}

/// `{"jsonrpc":"2.0","id":…,"result":…}` as bytes, serialized in one pass.
pub fn result_body<T: Serialize>(id: &Value, result: &T) -> Vec<u8> {
    #[derive(Serialize)]
    struct Out<'a, T> {
        jsonrpc: &'static str,
        id: &'a Value,
        result: &'a T,
    }
    serde_json::to_vec(&Out {
        jsonrpc: "2.0",
        id,
        result,
    })
    .expect("results serialize")
}

/// `{"jsonrpc":"2.0","id":…,"error":…}` as bytes.
pub fn error_body(id: &Value, error: &RpcError) -> Vec<u8> {
    #[derive(Serialize)]
    struct Out<'a> {
        jsonrpc: &'static str,
        id: &'a Value,
        error: &'a RpcError,
    }
    serde_json::to_vec(&Out {
        jsonrpc: "2.0",
        id,
        error,
    })
    .expect("errors serialize")
}

/// A notification as bytes.
pub fn notification_body(method: &str, params: &Value) -> Vec<u8> {
    #[derive(Serialize)]
    struct Out<'a> {
        jsonrpc: &'static str,
        method: &'a str,
        params: &'a Value,
    }
    serde_json::to_vec(&Out {
        jsonrpc: "2.0",
        method,
        params,
    })
    .expect("notifications serialize")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(body: &str) -> i64 {
        Incoming::parse(body.as_bytes()).unwrap_err().error.code
    }

    #[test]
    fn tells_message_kinds_apart() {
        let r = Incoming::parse(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#).unwrap();
        assert!(matches!(r, Incoming::Request { ref method, .. } if method == "ping"));
        let n =
            Incoming::parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert!(matches!(n, Incoming::Notification { .. }));
        let resp = Incoming::parse(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#).unwrap();
        assert!(matches!(resp, Incoming::Response));
    }

    #[test]
    fn malformed_and_invalid_messages_get_their_codes() {
        assert_eq!(code("{not json"), PARSE_ERROR);
        assert_eq!(code("[]"), INVALID_REQUEST);
        assert_eq!(
            code(r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#),
            INVALID_REQUEST
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":5}"#),
            INVALID_REQUEST
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#),
            INVALID_REQUEST
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}"#),
            INVALID_REQUEST
        );
    }
}
