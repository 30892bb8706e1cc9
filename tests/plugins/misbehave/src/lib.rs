//! `misbehave`: guests that break the rules, for tests of the runtime's limits.
//! Kept out of the default plugins folder.

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
        TOOLS
            .iter()
            .map(|(name, description)| {
                ToolDefinition::new(
                    name,
                    description,
                    json!({ "type": "object", "properties": {} }),
                )
            })
            .collect()
    }

    fn call_tool(
        _cx: CallContext,
        name: String,
        _arguments: String,
    ) -> Result<CallResult, ToolError> {
        match name.as_str() {
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

hangar_sdk::export_tool!(Misbehave);
