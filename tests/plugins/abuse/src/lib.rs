//! `abuse`: guests that flood the host rather than loop — long host calls,
//! log/progress/stderr floods, huge results, huge WASI requests — for the
//! isolation tests and `scripts/abuse`. Kept out of the default plugins folder.
//! Every tool takes its size from its arguments, with a default that is
//! far past Hangar's default limits.

use std::io::Write;

use hangar_sdk::{
    CallContext, CallResult, ContentBlock, LogLevel, Tool, ToolDefinition, ToolError, json, log,
    progress,
};

const TOOLS: &[(&str, &str, &str)] = &[
    (
        "sleep_once",
        "seconds",
        "Sleeps once in a host call (default 30 s), then answers",
    ),
    (
        "log_flood",
        "count",
        "Calls host.log `count` times (default 1,000,000) with `size`-byte messages",
    ),
    (
        "progress_flood",
        "count",
        "Calls host.progress `count` times (default 1,000,000)",
    ),
    (
        "stderr_flood",
        "bytes",
        "Writes `bytes` to stderr (default 1 MiB), then answers",
    ),
    (
        "big_output",
        "bytes",
        "Answers one text block of `bytes` bytes (default 40 MB)",
    ),
    (
        "many_blocks",
        "count",
        "Answers `count` small text blocks (default 100,000)",
    ),
    (
        "random_flood",
        "bytes",
        "Asks wasi:random for `bytes` bytes at once (default 4 GiB)",
    ),
    (
        "table_flood",
        "count",
        "Creates `count` WASI pollables and keeps them (default 10,000,000)",
    ),
];

struct Abuse;

fn arg(arguments: &str, key: &str, default: u64) -> u64 {
    serde_json::from_str::<serde_json::Value>(arguments)
        .ok()
        .and_then(|v| v.get(key).and_then(|n| n.as_u64()))
        .unwrap_or(default)
}

impl Tool for Abuse {
    fn list_tools() -> Vec<ToolDefinition> {
        TOOLS
            .iter()
            .map(|(name, param, description)| {
                ToolDefinition::new(
                    name,
                    description,
                    json!({
                        "type": "object",
                        "properties": { *param: { "type": "integer" }, "size": { "type": "integer" } }
                    }),
                )
            })
            .collect()
    }

    fn call_tool(
        _cx: CallContext,
        name: String,
        arguments: String,
    ) -> Result<CallResult, ToolError> {
        let a = arguments.as_str();
        match name.as_str() {
            "sleep_once" => {
                let s = arg(a, "seconds", 30);
                std::thread::sleep(std::time::Duration::from_secs(s));
                Ok(CallResult::text(format!("slept {s} s")))
            }
            "log_flood" => {
                let n = arg(a, "count", 1_000_000);
                let line = "x".repeat(arg(a, "size", 100) as usize);
                for i in 0..n {
                    log(LogLevel::Info, &format!("{i} {line}"));
                }
                Ok(CallResult::text(format!("logged {n}")))
            }
            "progress_flood" => {
                let n = arg(a, "count", 1_000_000);
                for i in 0..n {
                    progress(i as f64, Some(n as f64), Some("flooding"));
                }
                Ok(CallResult::text(format!("reported {n}")))
            }
            "stderr_flood" => {
                let n = arg(a, "bytes", 1 << 20) as usize;
                let line = format!("{}\n", "e".repeat(99));
                let mut err = std::io::stderr().lock();
                let mut written = 0;
                while written < n {
                    err.write_all(line.as_bytes())
                        .map_err(|e| ToolError::new(e.to_string()))?;
                    written += line.len();
                }
                Ok(CallResult::text(format!("wrote {written} bytes")))
            }
            "big_output" => {
                let n = arg(a, "bytes", 40_000_000) as usize;
                Ok(CallResult::text("o".repeat(n)))
            }
            "many_blocks" => {
                let n = arg(a, "count", 100_000);
                let blocks = (0..n).map(|i| ContentBlock::text(i.to_string())).collect();
                Ok(CallResult::new(blocks))
            }
            "random_flood" => {
                let bytes = wasi::random::random::get_random_bytes(arg(a, "bytes", 4 << 30));
                Ok(CallResult::text(format!(
                    "got {} random bytes",
                    bytes.len()
                )))
            }
            "table_flood" => {
                let n = arg(a, "count", 10_000_000);
                for _ in 0..n {
                    std::mem::forget(wasi::clocks::monotonic_clock::subscribe_duration(1 << 40));
                }
                Ok(CallResult::text(format!("kept {n} pollables")))
            }
            other => Err(ToolError::new(format!("unknown tool {other}"))),
        }
    }
}

hangar_sdk::export_tool!(Abuse);
