//! `csv_report`: writes rows as a CSV file, which Hangar turns into an
//! artifact.
//!
//! Its input schema says `"x-hangar-artifacts": true` (the same as
//! `[[tools]] produces_artifacts = true`), so each call gets a writable
//! `/artifacts` folder of its own; the file left there becomes an
//! `artifact://<session>/<id>/<name>` resource, linked from the result with
//! a signed download URL. The result also carries presenter hints
//! (`_meta["hangar/hints"]`): how to show it, and what to call next.

use hangar_sdk::{
    CallContext, CallResult, Tool, ToolDefinition, ToolError, Value, json, parse_args,
};
use serde::Deserialize;

struct CsvReport;

#[derive(Deserialize)]
struct Args {
    rows: Vec<serde_json::Map<String, Value>>,
    filename: Option<String>,
}

/// One CSV field (RFC 4180): quoted when it holds a comma, quote or line break.
fn field(value: &Value) -> String {
    let text = match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text
    }
}

/// The rows as CSV text: a header of every key of the rows (in the order
/// first seen; serde_json keeps an object's keys sorted).
fn csv(rows: &[serde_json::Map<String, Value>]) -> String {
    let mut columns: Vec<&String> = Vec::new();
    for row in rows {
        for key in row.keys() {
            if !columns.contains(&key) {
                columns.push(key);
            }
        }
    }
    let mut out = String::new();
    let header: Vec<String> = columns
        .iter()
        .map(|c| field(&Value::String((*c).clone())))
        .collect();
    out.push_str(&header.join(","));
    out.push_str("\r\n");
    for row in rows {
        let line: Vec<String> = columns
            .iter()
            .map(|c| field(row.get(*c).unwrap_or(&Value::Null)))
            .collect();
        out.push_str(&line.join(","));
        out.push_str("\r\n");
    }
    out
}

impl Tool for CsvReport {
    fn list_tools() -> Vec<ToolDefinition> {
        vec![
            ToolDefinition::new(
                "csv_report",
                "Write rows (objects) as a CSV file the user can download",
                json!({
                    "type": "object",
                    "properties": {
                        "rows": { "type": "array", "items": { "type": "object" }, "minItems": 1 },
                        "filename": { "type": "string", "description": "Default report.csv" }
                    },
                    "required": ["rows"],
                    "x-hangar-artifacts": true
                }),
            )
            .title("CSV report"),
        ]
    }

    fn call_tool(
        _cx: CallContext,
        name: String,
        arguments: String,
    ) -> Result<CallResult, ToolError> {
        if name != "csv_report" {
            return Err(ToolError::new(format!("unknown tool {name}")));
        }
        let args: Args = parse_args(&arguments)?;
        let filename = args.filename.unwrap_or_else(|| "report.csv".into());
        if filename.contains('/') || filename.starts_with('.') {
            return Err(ToolError::new("filename must be a plain file name"));
        }
        let text = csv(&args.rows);
        std::fs::write(format!("/artifacts/{filename}"), &text).map_err(|e| {
            ToolError::new(format!(
                "cannot write /artifacts/{filename} (is produces_artifacts set for this tool?): {e}"
            ))
        })?;
        let summary = format!(
            "Wrote {filename}: {} rows, {} bytes",
            args.rows.len(),
            text.len()
        );
        Ok(CallResult::text(summary).with_hints(
            &[
                "The report is attached as a resource link: give the user its download URL from _meta[\"hangar/artifacts\"] rather than pasting the rows.",
            ],
            &[(
                "csv_report",
                json!({ "rows": [{ "note": "the next report" }], "filename": "next.csv" }),
                "Write another report with different rows",
            )],
        ))
    }
}

hangar_sdk::export_tool!(CsvReport);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_when_they_must_be() {
        let rows: Vec<serde_json::Map<String, Value>> = serde_json::from_value(
            json!([{ "a": 1, "b": "x,y" }, { "b": "say \"hi\"", "c": null }]),
        )
        .unwrap();
        assert_eq!(
            csv(&rows),
            "a,b,c\r\n1,\"x,y\",\r\n,\"say \"\"hi\"\"\",\r\n"
        );
    }
}
