//! `kv-counter`: the `hangar:plugin/kv` import seen from a tool, for the kv
//! tests. Every tool answers text; a kv error is a tool error
//! `kv error: <kind>: <message>` (kind: too-large, quota, unavailable, invalid).

use hangar_sdk::{CallContext, CallResult, Tool, ToolDefinition, ToolError, json, kv, parse_args};
use serde::Deserialize;

struct KvCounter;

#[derive(Deserialize)]
struct Args {
    key: String,
    by: Option<i64>,
    value: Option<String>,
    ttl_ms: Option<u64>,
}

fn key_only(name: &str, description: &str) -> ToolDefinition {
    ToolDefinition::new(
        name,
        description,
        json!({
            "type": "object",
            "properties": { "key": { "type": "string" } },
            "required": ["key"]
        }),
    )
}

impl Tool for KvCounter {
    fn list_tools() -> Vec<ToolDefinition> {
        vec![
            ToolDefinition::new(
                "incr",
                "Adds `by` (default 1) to the counter under `key`; answers the new value",
                json!({
                    "type": "object",
                    "properties": {
                        "key": { "type": "string" },
                        "by": { "type": "integer" }
                    },
                    "required": ["key"]
                }),
            ),
            key_only("get", "Answers the value under `key`, or `(absent)`"),
            ToolDefinition::new(
                "set",
                "Stores `value` under `key`, expiring after `ttl_ms` when given; answers `ok`",
                json!({
                    "type": "object",
                    "properties": {
                        "key": { "type": "string" },
                        "value": { "type": "string" },
                        "ttl_ms": { "type": "integer", "minimum": 0 }
                    },
                    "required": ["key", "value"]
                }),
            ),
            key_only("del", "Removes `key`; answers `ok`"),
        ]
    }

    fn call_tool(
        _cx: CallContext,
        name: String,
        arguments: String,
    ) -> Result<CallResult, ToolError> {
        let args: Args = parse_args(&arguments)?;
        let kv_err = |e: kv::KvError| {
            let (kind, message) = match e {
                kv::KvError::TooLarge(m) => ("too-large", m),
                kv::KvError::Quota(m) => ("quota", m),
                kv::KvError::Unavailable(m) => ("unavailable", m),
                kv::KvError::Invalid(m) => ("invalid", m),
            };
            ToolError::new(format!("kv error: {kind}: {message}"))
        };
        let text = match name.as_str() {
            "incr" => kv::increment(&args.key, args.by.unwrap_or(1))
                .map_err(kv_err)?
                .to_string(),
            "get" => match kv::get(&args.key).map_err(kv_err)? {
                Some(v) => String::from_utf8_lossy(&v).into_owned(),
                None => "(absent)".to_string(),
            },
            "set" => {
                let value = args.value.unwrap_or_default();
                kv::set(&args.key, value.as_bytes(), args.ttl_ms).map_err(kv_err)?;
                "ok".to_string()
            }
            "del" => {
                kv::delete(&args.key).map_err(kv_err)?;
                "ok".to_string()
            }
            other => return Err(ToolError::new(format!("unknown tool {other}"))),
        };
        Ok(CallResult::text(text))
    }
}

hangar_sdk::export_tool!(KvCounter);
