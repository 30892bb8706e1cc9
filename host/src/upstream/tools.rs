//! An upstream's tool as the catalog lists it: prefixed, with its schemas
//! and the annotation hints the catalog knows.

use serde_json::{Value, json};

use crate::call::{Annotations, ToolDef};

/// A catalog definition of an upstream tool, its name prefixed.
pub(super) fn tool_def(prefix: &str, remote: &str, raw: &Value) -> ToolDef {
    let text = |key: &str| raw.get(key).and_then(Value::as_str).map(str::to_owned);
    let hint = |a: &Value, key: &str| a.get(key).and_then(Value::as_bool);
    let annotations = raw
        .get("annotations")
        .filter(|a| a.is_object())
        .map(|a| Annotations {
            read_only_hint: hint(a, "readOnlyHint"),
            destructive_hint: hint(a, "destructiveHint"),
            idempotent_hint: hint(a, "idempotentHint"),
            open_world_hint: hint(a, "openWorldHint"),
        });
    ToolDef {
        name: format!("{prefix}{remote}"),
        title: text("title"),
        description: text("description").unwrap_or_default(),
        input_schema: raw
            .get("inputSchema")
            .cloned()
            .unwrap_or_else(|| json!({ "type": "object" })),
        output_schema: raw.get("outputSchema").filter(|s| s.is_object()).cloned(),
        annotations,
        meta: raw.get("_meta").and_then(Value::as_object).cloned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_tool_is_prefixed_with_its_schema_and_hints() {
        let raw = json!({
            "name": "add", "description": "Adds",
            "inputSchema": { "type": "object", "properties": { "a": { "type": "integer" } } },
            "annotations": { "readOnlyHint": true, "title": "ignored" }
        });
        let def = tool_def("up.", "add", &raw);
        assert_eq!(def.name, "up.add");
        assert_eq!(def.description, "Adds");
        assert_eq!(def.input_schema["properties"]["a"]["type"], "integer");
        assert_eq!(def.annotations.unwrap().read_only_hint, Some(true));
        assert!(def.meta.is_none());
    }

    #[test]
    fn a_remote_tools_meta_passes_through_unchanged() {
        let meta = json!({ "ui": { "resourceUri": "ui://chart/view", "visibility": ["model", "app"] }, "x/y": 1 });
        let raw = json!({ "name": "chart", "inputSchema": { "type": "object" }, "_meta": meta });
        let def = tool_def("up.", "chart", &raw);
        assert_eq!(Value::Object(def.meta.clone().unwrap()), meta);
        assert_eq!(serde_json::to_value(&def).unwrap()["_meta"], meta);
    }
}
