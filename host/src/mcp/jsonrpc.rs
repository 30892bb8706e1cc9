//! JSON-RPC 2.0 framing for MCP: telling requests, notifications and
//! responses apart, and writing results and errors.

use serde::Serialize;
use serde_json::{Map, Value, json};

use hangar_core::call::{CallError, ErrorKind};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const SERVER_ERROR: i64 = -32000;
/// MCP's code for an unknown resource URI.
pub const RESOURCE_NOT_FOUND: i64 = -32002;

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
    /// A response to something the server asked (elicitation, sampling):
    /// `Ok(result)` or `Err(error object)`.
    Response {
        id: Value,
        outcome: Result<Value, Value>,
    },
}

/// Why a body is not a message we can handle.
#[derive(Debug)]
pub struct Rejection {
    pub id: Value,
    pub error: RpcError,
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
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

    /// The one place a `CallError` becomes a JSON-RPC error; `trace_id`
    /// (when not empty) goes into its `data`.
    pub fn from_call(e: &CallError, trace_id: &str) -> RpcError {
        // An upstream MCP server's own error goes on unchanged.
        if let Some(upstream) = &e.upstream_error
            && let Ok(error) = serde_json::from_value::<RpcError>(upstream.clone())
        {
            return error;
        }
        let code = match e.kind {
            ErrorKind::NotFound => METHOD_NOT_FOUND,
            _ => SERVER_ERROR,
        };
        let mut data = json!({ "stage": e.stage.as_str() });
        if !trace_id.is_empty() {
            data["trace_id"] = json!(trace_id);
        }
        if let Some(wait) = e.retry_after {
            data["retry_after_ms"] = json!(wait.as_millis().max(1) as u64);
        }
        RpcError {
            code,
            message: e.to_string(),
            data: Some(data),
        }
    }
}

/// A `CallError` as a JSON-RPC error, with no trace id.
impl From<&CallError> for RpcError {
    fn from(e: &CallError) -> RpcError {
        RpcError::from_call(e, "")
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
            (None, Some(id)) if obj.contains_key("result") || obj.contains_key("error") => {
                let outcome = match obj.remove("error") {
                    Some(error) => Err(error),
                    None => Ok(obj.remove("result").unwrap_or(Value::Null)),
                };
                Ok(Incoming::Response { id, outcome })
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

/// `{"jsonrpc":"2.0","id":…,"method":…,"params":…}`: a request to the client.
pub fn request_body(id: &Value, method: &str, params: &Value) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": method,
        "params": params,
    }))
    .expect("JSON values serialize")
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
        assert!(matches!(resp, Incoming::Response { ref id, outcome: Ok(_) } if id == "a"));
        let err =
            Incoming::parse(br#"{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"no"}}"#)
                .unwrap();
        assert!(matches!(
            err,
            Incoming::Response {
                outcome: Err(_),
                ..
            }
        ));
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

/// Properties of the decoder over arbitrary input: it never panics, it
/// rejects with a JSON-RPC error code, and what the server writes it reads
/// back unchanged.
#[cfg(test)]
mod properties {
    use proptest::collection::{btree_map, vec};
    use proptest::prelude::*;
    use serde_json::{Map, Value, json};

    use super::*;

    /// JSON without floats (whose text form need not read back bit-exact).
    fn exact_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                vec(inner.clone(), 0..6).prop_map(Value::Array),
                btree_map(any::<String>(), inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn any_json() -> impl Strategy<Value = Value> {
        prop_oneof![
            exact_json(),
            any::<f64>().prop_map(|f| json!(f)),
            vec(any::<f64>(), 0..4).prop_map(|fs| json!(fs)),
        ]
    }

    fn id() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<String>().prop_map(Value::String),
        ]
    }

    fn params() -> impl Strategy<Value = Map<String, Value>> {
        btree_map(any::<String>(), exact_json(), 0..5).prop_map(|m| m.into_iter().collect())
    }

    /// Objects made of the message fields (and others), each with any value.
    fn message_like() -> impl Strategy<Value = Value> {
        let key = prop_oneof![
            Just("jsonrpc".to_string()),
            Just("id".to_string()),
            Just("method".to_string()),
            Just("params".to_string()),
            Just("result".to_string()),
            Just("error".to_string()),
            any::<String>(),
        ];
        let value = prop_oneof![Just(json!("2.0")), id(), any_json()];
        btree_map(key, value, 0..7).prop_map(|m| Value::Object(m.into_iter().collect()))
    }

    /// A rejection is -32700 or -32600, and its answer is a JSON-RPC error.
    fn check_rejection(rejection: &Rejection) -> Result<(), TestCaseError> {
        let code = rejection.error.code;
        prop_assert!(
            code == PARSE_ERROR || code == INVALID_REQUEST,
            "code {code}"
        );
        let answer: Value =
            serde_json::from_slice(&error_body(&rejection.id, &rejection.error)).unwrap();
        prop_assert_eq!(&answer["jsonrpc"], "2.0");
        prop_assert_eq!(&answer["error"]["code"], code);
        Ok(())
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(body in vec(any::<u8>(), 0..512)) {
            if let Err(rejection) = Incoming::parse(&body) {
                check_rejection(&rejection)?;
            }
        }

        #[test]
        fn arbitrary_json_never_panics(value in prop_oneof![any_json(), message_like()]) {
            let body = serde_json::to_vec(&value).unwrap();
            match Incoming::parse(&body) {
                Err(rejection) => check_rejection(&rejection)?,
                // Whatever is accepted has the version, and a string method or an answer.
                Ok(message) => {
                    prop_assert_eq!(&value["jsonrpc"], "2.0");
                    match message {
                        Incoming::Request { method, .. } | Incoming::Notification { method, .. } => {
                            prop_assert_eq!(&value["method"], &Value::String(method));
                        }
                        Incoming::Response { .. } => {
                            prop_assert!(value.get("result").is_some() || value.get("error").is_some());
                        }
                    }
                }
            }
        }

        #[test]
        fn requests_round_trip(id in id(), method in any::<String>(), params in params()) {
            let body = request_body(&id, &method, &Value::Object(params.clone()));
            match Incoming::parse(&body) {
                Ok(Incoming::Request { id: i, method: m, params: p }) => {
                    prop_assert_eq!(i, id);
                    prop_assert_eq!(m, method);
                    prop_assert_eq!(p, params);
                }
                other => prop_assert!(false, "{other:?}"),
            }
        }

        #[test]
        fn notifications_round_trip(method in any::<String>(), params in params()) {
            let body = notification_body(&method, &Value::Object(params.clone()));
            match Incoming::parse(&body) {
                Ok(Incoming::Notification { method: m, params: p }) => {
                    prop_assert_eq!(m, method);
                    prop_assert_eq!(p, params);
                }
                other => prop_assert!(false, "{other:?}"),
            }
        }

        #[test]
        fn answers_round_trip(id in id(), result in exact_json(), code in any::<i64>(), message in any::<String>()) {
            match Incoming::parse(&result_body(&id, &result)) {
                Ok(Incoming::Response { id: i, outcome: Ok(r) }) => {
                    prop_assert_eq!(i, id.clone());
                    prop_assert_eq!(r, result);
                }
                other => prop_assert!(false, "{other:?}"),
            }
            let error = RpcError::new(code, message.clone());
            match Incoming::parse(&error_body(&id, &error)) {
                Ok(Incoming::Response { id: i, outcome: Err(e) }) => {
                    prop_assert_eq!(i, id);
                    prop_assert_eq!(e, json!({ "code": code, "message": message }));
                }
                other => prop_assert!(false, "{other:?}"),
            }
        }
    }
}
