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
    (
        "artifact_flood",
        "bytes",
        "Writes `bytes` (default 1 GiB) into /artifacts in `chunk`-byte writes (default 1 MiB), \
         starting a new file every `file_bytes` (default: one file); stops at the first error \
         and answers what it wrote and the error. With `direct`, writes with \
         wasi:filesystem's `descriptor.write` rather than std's files (streams)",
    ),
];

/// A file of the flood: std's (whose writes go through a WASI output
/// stream) or a raw WASI descriptor (`descriptor.write` at an offset).
enum FloodFile {
    Std(std::fs::File),
    Direct(wasi::filesystem::types::Descriptor),
}

impl FloodFile {
    fn create(name: &str, direct: bool) -> Result<FloodFile, String> {
        if !direct {
            return std::fs::File::create(format!("/artifacts/{name}"))
                .map(FloodFile::Std)
                .map_err(|e| e.to_string());
        }
        use wasi::filesystem::types::{DescriptorFlags, OpenFlags, PathFlags};
        let (dir, _) = wasi::filesystem::preopens::get_directories()
            .into_iter()
            .find(|(_, path)| path == "/artifacts")
            .ok_or("no /artifacts")?;
        dir.open_at(
            PathFlags::empty(),
            name,
            OpenFlags::CREATE | OpenFlags::TRUNCATE,
            DescriptorFlags::WRITE,
        )
        .map(FloodFile::Direct)
        .map_err(|code| code.name().to_string())
    }

    /// One write call, at `offset` for a raw descriptor.
    fn write(&mut self, bytes: &[u8], offset: u64) -> Result<usize, String> {
        match self {
            FloodFile::Std(f) => f.write(bytes).map_err(|e| e.to_string()),
            FloodFile::Direct(d) => d
                .write(bytes, offset)
                .map(|n| n as usize)
                .map_err(|code| code.name().to_string()),
        }
    }
}

/// Writes into /artifacts until `total` bytes are written or a write fails:
/// the bytes written, and the error that stopped it.
fn flood_artifacts(
    total: u64,
    chunk: usize,
    file_bytes: u64,
    direct: bool,
) -> (u64, Option<String>) {
    let block = vec![b'a'; chunk];
    let mut written = 0u64;
    let mut file: Option<FloodFile> = None;
    let mut in_file = 0u64;
    let mut files = 0;
    while written < total {
        if file.is_none() || in_file >= file_bytes {
            match FloodFile::create(&format!("flood-{files}.bin"), direct) {
                Ok(f) => file = Some(f),
                Err(e) => return (written, Some(format!("create: {e}"))),
            }
            files += 1;
            in_file = 0;
        }
        let n = (chunk as u64)
            .min(total - written)
            .min(file_bytes - in_file) as usize;
        let f = file.as_mut().expect("opened above");
        // One write call at a time, so a short write is counted too.
        match f.write(&block[..n], in_file) {
            Ok(0) => return (written, Some("write: wrote nothing".into())),
            Ok(k) => {
                written += k as u64;
                in_file += k as u64;
            }
            Err(e) => return (written, Some(format!("write: {e}"))),
        }
    }
    (written, None)
}

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
                let mut schema = json!({
                    "type": "object",
                    "properties": { *param: { "type": "integer" }, "size": { "type": "integer" } }
                });
                if *name == "artifact_flood" {
                    schema["properties"]["chunk"] = json!({ "type": "integer" });
                    schema["properties"]["file_bytes"] = json!({ "type": "integer" });
                    schema["properties"]["direct"] = json!({ "type": "boolean" });
                    schema["x-hangar-artifacts"] = json!(true);
                }
                ToolDefinition::new(name, description, schema)
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
            "artifact_flood" => {
                let total = arg(a, "bytes", 1 << 30);
                let chunk = arg(a, "chunk", 1 << 20).max(1) as usize;
                let file_bytes = arg(a, "file_bytes", u64::MAX).max(1);
                let direct = serde_json::from_str::<serde_json::Value>(a)
                    .ok()
                    .and_then(|v| v.get("direct").and_then(|d| d.as_bool()))
                    .unwrap_or(false);
                let (written, error) = flood_artifacts(total, chunk, file_bytes, direct);
                Ok(CallResult::text(match error {
                    Some(e) => format!("wrote {written} bytes, then {e}"),
                    None => format!("wrote {written} bytes"),
                }))
            }
            other => Err(ToolError::new(format!("unknown tool {other}"))),
        }
    }
}

hangar_sdk::export_tool!(Abuse);
