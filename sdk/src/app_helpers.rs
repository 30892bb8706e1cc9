//! The `app` world's `meta` export with defaults, and builders for the
//! `_meta` an MCP App needs: a tool that links its view, the view's
//! resource with its sandbox settings.

use serde_json::{Value, json};

use crate::server::exports::hangar::plugin::meta;

/// The MIME type of an MCP App view (`text/html;profile=mcp-app`): give it
/// to the view's [`crate::ResourceDefinition`] and to what `read` answers.
pub const APP_MIME_TYPE: &str = "text/html;profile=mcp-app";

/// The `_meta` of the component's tools and resources. Each is a JSON
/// object; the host checks them at load (a tool's `ui.resourceUri` must be
/// a `ui://` URI) and refuses one that is not, naming it.
pub trait Meta {
    /// `(tool name, _meta)` for each tool that has one.
    fn tool_meta() -> Vec<(String, Value)> {
        Vec::new()
    }
    /// `(resource URI or URI template, _meta)` for each resource that has one.
    fn resource_meta() -> Vec<(String, Value)> {
        Vec::new()
    }
}

impl<T: Meta> meta::Guest for T {
    fn tool_meta() -> Vec<(String, String)> {
        to_text(<T as Meta>::tool_meta())
    }
    fn resource_meta() -> Vec<(String, String)> {
        to_text(<T as Meta>::resource_meta())
    }
}

fn to_text(pairs: Vec<(String, Value)>) -> Vec<(String, String)> {
    pairs.into_iter().map(|(k, v)| (k, v.to_string())).collect()
}

/// A tool's `_meta` linking the view `resource_uri`. `visibility` says who
/// may see the tool: `&["model", "app"]` (the default when empty), or
/// `&["app"]` for a tool only the view calls.
pub fn app_tool_meta(resource_uri: &str, visibility: &[&str]) -> Value {
    let mut ui = json!({ "resourceUri": resource_uri });
    if !visibility.is_empty() {
        ui["visibility"] = json!(visibility);
    }
    json!({ "ui": ui })
}

/// A view resource's `_meta`: the origins it may fetch from
/// (`connectDomains`) and load scripts, styles and images from
/// (`resourceDomains`), none for a self-contained view, and whether it
/// prefers a border.
pub fn app_view_meta(
    connect_domains: &[&str],
    resource_domains: &[&str],
    prefers_border: bool,
) -> Value {
    json!({ "ui": {
        "csp": { "connectDomains": connect_domains, "resourceDomains": resource_domains },
        "prefersBorder": prefers_border,
    } })
}
