//! `misbehave`: guests that break the rules, for tests of the runtime's limits
//! and of the presenter (`shaped`, `shaped_limited`: results that may
//! contradict the output schema they declare). Kept out of the default
//! plugins folder.

use std::hint::black_box;

use hangar_sdk::{CallContext, CallResult, Tool, ToolDefinition, ToolError, json};

const TOOLS: &[(&str, &str)] = &[
    ("spin", "Loops forever (fuel or deadline stops it)"),
    (
        "spin_wait",
        "Sleeps in a loop forever: uses no fuel, so only the deadline stops it",
    ),
    ("hog", "Allocates memory until the cap stops it"),
    ("panic", "Panics"),
    ("recurse", "Recurses until the stack is exhausted"),
    (
        "counter",
        "Counts its calls in this instance's memory (1 in a fresh instance)",
    ),
];

static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

struct Misbehave;

fn recurse(depth: u64) -> u64 {
    let buf = black_box([depth; 64]);
    if black_box(true) {
        recurse(depth + 1) + buf[3]
    } else {
        0
    }
}

impl Tool for Misbehave {
    fn list_tools() -> Vec<ToolDefinition> {
        let mut tools: Vec<ToolDefinition> = TOOLS
            .iter()
            .map(|(name, description)| {
                ToolDefinition::new(
                    name,
                    description,
                    json!({ "type": "object", "properties": {} }),
                )
            })
            .collect();
        let mut limited = shaped_schema();
        limited["x-hangar-limit"] = json!({ "pointer": "/items", "max": 5 });
        tools.push(
            ToolDefinition::new(
                "shaped",
                "Answers `n` items in the shape its output schema declares, or (by `mode`) one that contradicts it",
                shaped_input(),
            )
            .output_schema(shaped_schema()),
        );
        tools.push(
            ToolDefinition::new(
                "shaped_limited",
                "As shaped, and its output schema cuts /items to 5 (x-hangar-limit)",
                shaped_input(),
            )
            .output_schema(limited),
        );
        tools
    }

    fn call_tool(
        _cx: CallContext,
        name: String,
        arguments: String,
    ) -> Result<CallResult, ToolError> {
        match name.as_str() {
            "shaped" | "shaped_limited" => shaped(&arguments),
            "spin" => {
                let mut n = 0u64;
                loop {
                    n = black_box(n.wrapping_add(1));
                }
            }
            "spin_wait" => loop {
                std::thread::sleep(std::time::Duration::from_millis(10));
            },
            "hog" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(black_box(vec![1u8; 1 << 20]));
                }
            }
            "panic" => panic!("misbehave panicked on purpose"),
            "recurse" => Ok(CallResult::text(recurse(0).to_string())),
            "counter" => {
                let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                Ok(CallResult::text(n.to_string()))
            }
            other => Err(ToolError::new(format!("unknown tool {other}"))),
        }
    }
}

fn shaped_input() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "mode": {
                "type": "string",
                "enum": ["good", "wrong_type", "undeclared", "missing", "none"],
                "default": "good"
            },
            "n": { "type": "integer", "minimum": 0, "default": 3 }
        }
    })
}

/// `{count, items: [{id}]}`, closed at both levels.
fn shaped_schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "count": { "type": "integer" },
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": { "id": { "type": "integer" } },
                    "required": ["id"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["count", "items"],
        "additionalProperties": false
    })
}

#[derive(serde::Deserialize)]
struct ShapedArgs {
    mode: String,
    n: u64,
}

/// The result `mode` asks for; its text block mirrors the structured content.
fn shaped(arguments: &str) -> Result<CallResult, ToolError> {
    let args: ShapedArgs = hangar_sdk::parse_args(arguments)?;
    let items: Vec<serde_json::Value> = (0..args.n)
        .map(|id| match args.mode.as_str() {
            "undeclared" => json!({ "id": id, "internal": "dropped by strip_undeclared" }),
            _ => json!({ "id": id }),
        })
        .collect();
    let value = match args.mode.as_str() {
        "wrong_type" => json!({ "count": args.n.to_string(), "items": items }),
        "undeclared" => json!({ "count": args.n, "items": items, "secret": "not declared" }),
        "missing" => json!({ "items": items }),
        _ => json!({ "count": args.n, "items": items }),
    };
    let result = CallResult::text(value.to_string());
    Ok(match args.mode.as_str() {
        "none" => result,
        _ => result.with_structured(value),
    })
}

hangar_sdk::export_tool!(Misbehave);
