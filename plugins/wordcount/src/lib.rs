//! `wordcount`: counts the words, lines and bytes of uploaded files.
//!
//! Its `files` argument takes `upload://` handles (from `POST /uploads`);
//! the schema marks it `"x-hangar-upload": true`, so Hangar resolves each
//! handle for the caller's session and hands the tool the path it sees the
//! file at (`/uploads/<id>/<name>`, in a read-only folder that holds just
//! this call's files). The result also lists every folder the component can
//! see and what is in it, to show that sandbox.

use hangar_sdk::{CallContext, CallResult, Tool, ToolDefinition, ToolError, json, parse_args};
use serde::Deserialize;

struct WordCount;

#[derive(Deserialize)]
struct Args {
    files: Vec<String>,
}

/// Every file under `dir`, as paths (at most 100).
fn walk(dir: &str, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if out.len() >= 100 {
            return;
        }
        let path = format!(
            "{}/{}",
            dir.trim_end_matches('/'),
            entry.file_name().to_string_lossy()
        );
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            walk(&path, out);
        } else {
            out.push(path);
        }
    }
}

impl Tool for WordCount {
    fn list_tools() -> Vec<ToolDefinition> {
        vec![
            ToolDefinition::new(
                "wordcount",
                "Count the words, lines and bytes of uploaded text files",
                json!({
                    "type": "object",
                    "properties": {
                        "files": {
                            "type": "array",
                            "items": { "type": "string" },
                            "minItems": 1,
                            "description": "upload:// handles from POST /uploads",
                            "x-hangar-upload": true
                        }
                    },
                    "required": ["files"]
                }),
            )
            .title("Word count")
            .read_only(),
        ]
    }

    fn call_tool(
        _cx: CallContext,
        name: String,
        arguments: String,
    ) -> Result<CallResult, ToolError> {
        if name != "wordcount" {
            return Err(ToolError::new(format!("unknown tool {name}")));
        }
        let args: Args = parse_args(&arguments)?;
        let mut counted = Vec::new();
        let mut lines = Vec::new();
        let (mut total_words, mut total_bytes) = (0usize, 0usize);
        for path in &args.files {
            let bytes = std::fs::read(path)
                .map_err(|e| ToolError::new(format!("cannot read {path}: {e}")))?;
            let text = String::from_utf8_lossy(&bytes);
            let words = text.split_whitespace().count();
            let line_count = text.lines().count();
            total_words += words;
            total_bytes += bytes.len();
            lines.push(format!(
                "{path}: {words} words, {line_count} lines, {} bytes",
                bytes.len()
            ));
            counted.push(
                json!({ "path": path, "words": words, "lines": line_count, "bytes": bytes.len() }),
            );
        }
        // What the sandbox shows: the mounted folders and their files.
        let folders: Vec<_> = wasip2::filesystem::preopens::get_directories()
            .into_iter()
            .map(|(_, guest)| {
                let mut files = Vec::new();
                walk(&guest, &mut files);
                json!({ "path": guest, "files": files })
            })
            .collect();
        lines.push(format!("total: {total_words} words, {total_bytes} bytes"));
        Ok(CallResult::text(lines.join("\n")).with_structured(json!({
            "files": counted,
            "total_words": total_words,
            "visible": folders,
        })))
    }
}

hangar_sdk::export_tool!(WordCount);
