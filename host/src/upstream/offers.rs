//! What an upstream offers besides tools, as the catalog keeps it: its
//! resources and resource templates, parsed from its listings with their
//! `_meta` unchanged, and its prompts (named as it names them).

use serde_json::Value;

use hangar_core::call::{PromptArgument, PromptDef, ResourceDef, TemplateDef};

/// What an upstream offers besides tools, as it listed it last.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct UpstreamOffers {
    pub resources: Vec<ResourceDef>,
    pub templates: Vec<TemplateDef>,
    pub prompts: Vec<PromptDef>,
}

/// A listed resource as the catalog keeps it; one without a `uri` is skipped.
pub(super) fn resource_def(raw: &Value) -> Option<ResourceDef> {
    let uri = raw.get("uri")?.as_str()?.to_string();
    Some(ResourceDef {
        name: text(raw, "name").unwrap_or_else(|| uri.clone()),
        uri,
        title: text(raw, "title"),
        description: text(raw, "description"),
        mime_type: text(raw, "mimeType"),
        size: raw.get("size").and_then(Value::as_u64),
        meta: raw.get("_meta").and_then(Value::as_object).cloned(),
    })
}

/// A listed template; one without a `uriTemplate` is skipped.
pub(super) fn template_def(raw: &Value) -> Option<TemplateDef> {
    let uri_template = raw.get("uriTemplate")?.as_str()?.to_string();
    Some(TemplateDef {
        name: text(raw, "name").unwrap_or_else(|| uri_template.clone()),
        uri_template,
        title: text(raw, "title"),
        description: text(raw, "description"),
        mime_type: text(raw, "mimeType"),
        meta: raw.get("_meta").and_then(Value::as_object).cloned(),
    })
}

/// A listed prompt; one without a `name` is skipped, an argument without
/// one is dropped.
pub(super) fn prompt_def(raw: &Value) -> Option<PromptDef> {
    let arguments = (raw.get("arguments").and_then(Value::as_array))
        .into_iter()
        .flatten()
        .filter_map(|a| serde_json::from_value::<PromptArgument>(a.clone()).ok())
        .collect();
    Some(PromptDef {
        name: raw.get("name")?.as_str()?.to_string(),
        title: text(raw, "title"),
        description: text(raw, "description"),
        arguments,
    })
}

fn text(raw: &Value, key: &str) -> Option<String> {
    raw.get(key).and_then(Value::as_str).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_listed_view_keeps_its_uri_mime_type_and_meta() {
        let meta = json!({ "ui": { "csp": { "connectDomains": ["https://api.example.com"] }, "prefersBorder": true } });
        let raw = json!({
            "uri": "ui://chart/view.html", "name": "chart view",
            "mimeType": "text/html;profile=mcp-app", "_meta": meta, "size": 12
        });
        let def = resource_def(&raw).unwrap();
        assert_eq!(def.uri, "ui://chart/view.html");
        assert_eq!(def.mime_type.as_deref(), Some("text/html;profile=mcp-app"));
        assert_eq!(serde_json::to_value(&def).unwrap()["_meta"], meta);
        assert_eq!(def.size, Some(12));
        assert!(resource_def(&json!({ "name": "no uri" })).is_none());
    }

    #[test]
    fn a_listed_prompt_keeps_its_arguments() {
        let def = prompt_def(&json!({ "name": "greet", "description": "Hi",
            "arguments": [{ "name": "who", "required": true }, { "name": "tone" }, { "no": "name" }] }))
        .unwrap();
        assert_eq!(def.name, "greet");
        assert_eq!(def.arguments.len(), 2);
        assert!(def.arguments[0].required && !def.arguments[1].required);
        assert!(prompt_def(&json!({ "description": "no name" })).is_none());
    }

    #[test]
    fn a_template_without_a_name_is_named_by_its_template() {
        let def = template_def(&json!({ "uriTemplate": "notes://{id}" })).unwrap();
        assert_eq!(def.name, "notes://{id}");
        assert!(def.meta.is_none());
    }
}
