//! MCP Apps (the `io.modelcontextprotocol/ui` extension) as far as a
//! definition's `_meta` shows it: reading a declared `_meta`, checking its
//! `ui` part, and what a tool's `ui` says (its view, who may see it).
//! Every backend checks what it declares here, so a plugin, a DB entry and
//! an upstream tool mean the same thing by the same keys.

use serde_json::Value;

use super::tool::Meta;

/// The extension's identifier, under `capabilities.extensions`.
pub const UI_EXTENSION: &str = "io.modelcontextprotocol/ui";

/// The MIME type of an MCP App view (an HTML5 document).
pub const APP_MIME_TYPE: &str = "text/html;profile=mcp-app";

/// What a definition's `_meta` is for: a tool's `ui` links a view, a
/// resource's `ui` says how its view may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaOf {
    Tool,
    Resource,
}

/// Reads a `_meta` given as JSON text (a plugin's `meta` export) and checks it.
pub fn parse_meta(text: &str, of: MetaOf) -> Result<Meta, String> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("_meta is not valid JSON: {e}"))?;
    check_meta(value, of)
}

/// Checks a `_meta` value: an object, whose `ui` (when present) has the
/// shape the extension gives it. Keys other than `ui` are not read.
pub fn check_meta(value: Value, of: MetaOf) -> Result<Meta, String> {
    let meta = match value {
        Value::Object(meta) => meta,
        other => {
            return Err(format!(
                "_meta must be a JSON object, not {}",
                super::json_kind(&other)
            ));
        }
    };
    let Some(ui) = meta.get("ui") else {
        return Ok(meta);
    };
    let Value::Object(ui) = ui else {
        return Err(format!(
            "_meta.ui must be a JSON object, not {}",
            super::json_kind(ui)
        ));
    };
    match of {
        MetaOf::Tool => {
            if let Some(uri) = ui.get("resourceUri") {
                let uri = uri
                    .as_str()
                    .ok_or("_meta.ui.resourceUri must be a string")?;
                check_ui_uri(uri)?;
            }
            if let Some(visibility) = ui.get("visibility") {
                let ok = visibility.as_array().is_some_and(|v| {
                    v.iter()
                        .all(|w| matches!(w.as_str(), Some("model" | "app")))
                });
                if !ok {
                    return Err(
                        "_meta.ui.visibility must be a list of \"model\" and \"app\"".into(),
                    );
                }
            }
        }
        MetaOf::Resource => {
            for key in ["csp", "permissions"] {
                if ui.get(key).is_some_and(|v| !v.is_object()) {
                    return Err(format!("_meta.ui.{key} must be a JSON object"));
                }
            }
            if ui.get("prefersBorder").is_some_and(|v| !v.is_boolean()) {
                return Err("_meta.ui.prefersBorder must be true or false".into());
            }
        }
    }
    Ok(meta)
}

/// A view's URI must use the `ui://` scheme and name something after it.
fn check_ui_uri(uri: &str) -> Result<(), String> {
    match uri.strip_prefix("ui://") {
        Some(rest) if !rest.is_empty() => Ok(()),
        _ => Err(format!(
            "_meta.ui.resourceUri must be a ui:// URI, not {uri:?}"
        )),
    }
}

/// The view a tool's `_meta` links (`ui.resourceUri`), if any.
pub fn view_of(meta: Option<&Meta>) -> Option<&str> {
    meta?.get("ui")?.get("resourceUri")?.as_str()
}

/// Whether a tool's `_meta` keeps it from the model: `ui.visibility` is
/// given and does not hold `"model"` (the spec's default is both).
pub fn app_only(meta: Option<&Meta>) -> bool {
    let visibility = meta
        .and_then(|m| m.get("ui"))
        .and_then(|ui| ui.get("visibility"))
        .and_then(Value::as_array);
    visibility.is_some_and(|v| !v.iter().any(|w| w == "model"))
}

/// Whether a client's capabilities declare the extension with the view
/// MIME type among its `mimeTypes` (the spec requires the list).
pub fn client_runs_apps(capabilities: Option<&Value>) -> bool {
    capabilities
        .and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(UI_EXTENSION))
        .and_then(|ui| ui.get("mimeTypes"))
        .and_then(Value::as_array)
        .is_some_and(|types| types.iter().any(|t| t == APP_MIME_TYPE))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tool_meta_must_be_an_object_with_a_ui_uri() {
        let ok = parse_meta(
            r#"{"ui":{"resourceUri":"ui://chart/view","visibility":["app"]},"x":1}"#,
            MetaOf::Tool,
        )
        .unwrap();
        assert_eq!(view_of(Some(&ok)), Some("ui://chart/view"));
        assert!(app_only(Some(&ok)));
        let err = parse_meta("[1]", MetaOf::Tool).unwrap_err();
        assert!(err.contains("must be a JSON object, not an array"), "{err}");
        let err = parse_meta(r#"{"ui":{"resourceUri":"https://x/y"}}"#, MetaOf::Tool).unwrap_err();
        assert!(err.contains("ui:// URI"), "{err}");
        let err = parse_meta(r#"{"ui":{"visibility":["user"]}}"#, MetaOf::Tool).unwrap_err();
        assert!(err.contains("visibility"), "{err}");
        assert!(parse_meta("{", MetaOf::Tool).unwrap_err().contains("JSON"));
    }

    #[test]
    fn a_resource_meta_checks_its_ui_shape() {
        let ok = json!({"ui": {"csp": {"connectDomains": []}, "prefersBorder": true}});
        assert!(check_meta(ok, MetaOf::Resource).is_ok());
        let bad = json!({"ui": {"prefersBorder": "yes"}});
        assert!(check_meta(bad, MetaOf::Resource).is_err());
    }

    #[test]
    fn visibility_defaults_to_both_and_clients_declare_mime_types() {
        let both = check_meta(json!({"ui": {"resourceUri": "ui://a/b"}}), MetaOf::Tool).unwrap();
        assert!(!app_only(Some(&both)) && !app_only(None));
        let caps = json!({"extensions": {UI_EXTENSION: {"mimeTypes": [APP_MIME_TYPE]}}});
        assert!(client_runs_apps(Some(&caps)));
        let no_types = json!({"extensions": {UI_EXTENSION: {}}});
        assert!(!client_runs_apps(Some(&no_types)) && !client_runs_apps(None));
    }
}
