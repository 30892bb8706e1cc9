//! An upstream's tool as the catalog lists it: prefixed, with its schemas
//! and the annotation hints the catalog knows.

use serde_json::{Value, json};

use hangar_config::{AdapterConfig, AdapterKind};
use hangar_core::call::{Annotations, ToolDef};

/// A catalog definition of an upstream tool, its name prefixed, its
/// schema telling what its `adapter` changes.
pub(super) fn tool_def(
    prefix: &str,
    remote: &str,
    raw: &Value,
    adapter: Option<&AdapterConfig>,
) -> ToolDef {
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
    let mut input_schema = raw
        .get("inputSchema")
        .cloned()
        .unwrap_or_else(|| json!({ "type": "object" }));
    if let Some(adapter) = adapter {
        adapt_schema(&mut input_schema, adapter);
    }
    ToolDef {
        name: format!("{prefix}{remote}"),
        title: text("title"),
        description: text("description").unwrap_or_default(),
        input_schema,
        output_schema: raw.get("outputSchema").filter(|s| s.is_object()).cloned(),
        annotations,
        meta: raw.get("_meta").and_then(Value::as_object).cloned(),
    }
}

/// Marks the arguments an adapter fills: an `upload_consumer`'s take an
/// `upload://` handle (`"x-hangar-upload": true`), an `artifact_producer`'s
/// output path is no longer required (Hangar chooses it; a file name given
/// names the artifact).
fn adapt_schema(schema: &mut Value, adapter: &AdapterConfig) {
    match adapter.kind {
        AdapterKind::UploadConsumer => {
            for argument in &adapter.arguments {
                let Some(property) = property(schema, argument) else {
                    continue;
                };
                let Some(property) = property.as_object_mut() else {
                    continue;
                };
                property.insert("x-hangar-upload".into(), Value::Bool(true));
                property.insert(
                    "description".into(),
                    json!("An upload:// handle of a file this session uploaded (POST /uploads); the server is handed the file."),
                );
            }
        }
        AdapterKind::ArtifactProducer => {
            let Some(argument) = &adapter.output_path_argument else {
                return;
            };
            let (parent, last) = match argument.rsplit_once('/') {
                Some((parent, last)) if argument.starts_with('/') => (parent, last),
                _ => ("", argument.as_str()),
            };
            let owner = if parent.is_empty() {
                Some(&mut *schema)
            } else {
                property(schema, parent)
            };
            if let Some(required) = owner
                .and_then(|o| o.get_mut("required"))
                .and_then(Value::as_array_mut)
            {
                required.retain(|r| r != last);
            }
            if let Some(property) = property(schema, argument).and_then(Value::as_object_mut) {
                property.insert(
                    "description".into(),
                    json!("Optional: a file name for the result. The server chooses where the file is written; it is returned as an artifact:// resource."),
                );
            }
        }
    }
}

/// The schema of argument `argument` (a name, or a JSON pointer through
/// `properties`) in an object schema.
fn property<'a>(schema: &'a mut Value, argument: &str) -> Option<&'a mut Value> {
    let mut at = schema;
    let steps: Vec<&str> = match argument.strip_prefix('/') {
        Some(pointer) => pointer.split('/').collect(),
        None => vec![argument],
    };
    for step in steps {
        at = at.get_mut("properties")?.get_mut(step)?;
    }
    Some(at)
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
        let def = tool_def("up.", "add", &raw, None);
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
        let def = tool_def("up.", "chart", &raw, None);
        assert_eq!(Value::Object(def.meta.clone().unwrap()), meta);
        assert_eq!(serde_json::to_value(&def).unwrap()["_meta"], meta);
    }

    #[test]
    fn adapted_arguments_say_what_hangar_fills() {
        let raw = json!({ "name": "t", "inputSchema": { "type": "object",
            "properties": {
                "path": { "type": "string" },
                "opts": { "type": "object", "properties": { "file": { "type": "string" } }, "required": ["file"] }
            },
            "required": ["path", "opts"] } });
        let consumer: AdapterConfig =
            toml::from_str("kind = \"upload_consumer\"\narguments = [\"path\", \"/opts/file\"]")
                .unwrap();
        let def = tool_def("up.", "t", &raw, Some(&consumer));
        let p = &def.input_schema["properties"];
        assert_eq!(p["path"]["x-hangar-upload"], true);
        assert_eq!(p["opts"]["properties"]["file"]["x-hangar-upload"], true);
        let producer: AdapterConfig =
            toml::from_str("kind = \"artifact_producer\"\noutput_path_argument = \"/opts/file\"")
                .unwrap();
        let def = tool_def("up.", "t", &raw, Some(&producer));
        assert_eq!(
            def.input_schema["properties"]["opts"]["required"],
            json!([])
        );
        assert_eq!(def.input_schema["required"], json!(["path", "opts"]));
        let top: AdapterConfig =
            toml::from_str("kind = \"artifact_producer\"\noutput_path_argument = \"path\"")
                .unwrap();
        let def = tool_def("up.", "t", &raw, Some(&top));
        assert_eq!(def.input_schema["required"], json!(["opts"]));
    }
}
