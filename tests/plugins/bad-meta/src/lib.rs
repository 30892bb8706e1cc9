//! `bad-meta`: an `app`-world guest whose `meta` export declares what the
//! host must refuse (a `_meta` that is no object, a view URI that is not
//! `ui://`, `_meta` for things it does not offer) beside a tool whose view
//! no one offers, and one tool and one resource that are fine.

use hangar_sdk::{
    CallContext, CallResult, Completion, Meta, Prompts, ResourceDefinition, ResourceError,
    ResourceItem, Resources, Tool, ToolDefinition, ToolError, Value, json,
};

struct BadMeta;

const TOOLS: [&str; 4] = ["meta.fine", "meta.array", "meta.http", "meta.orphan"];

impl Tool for BadMeta {
    fn list_tools() -> Vec<ToolDefinition> {
        TOOLS
            .iter()
            .map(|name| {
                ToolDefinition::new(name, "Answers its own name", json!({ "type": "object" }))
            })
            .collect()
    }

    fn call_tool(
        _cx: CallContext,
        name: String,
        _arguments: String,
    ) -> Result<CallResult, ToolError> {
        Ok(CallResult::text(name))
    }
}

impl Resources for BadMeta {
    fn list_resources() -> Vec<ResourceDefinition> {
        vec![
            ResourceDefinition::new("ui://bad-meta/view", "view")
                .mime_type(hangar_sdk::APP_MIME_TYPE),
        ]
    }

    fn read(_cx: CallContext, uri: String) -> Result<Vec<ResourceItem>, ResourceError> {
        Ok(vec![ResourceItem::text(
            &uri,
            hangar_sdk::APP_MIME_TYPE,
            "<!DOCTYPE html><p>ok</p>",
        )])
    }
}

impl Meta for BadMeta {
    fn tool_meta() -> Vec<(String, Value)> {
        vec![
            (
                "meta.fine".into(),
                json!({ "ui": { "resourceUri": "ui://bad-meta/view" }, "x-extra": 1 }),
            ),
            ("meta.array".into(), json!([1, 2])),
            (
                "meta.http".into(),
                json!({ "ui": { "resourceUri": "https://example.com/view" } }),
            ),
            (
                "meta.orphan".into(),
                json!({ "ui": { "resourceUri": "ui://bad-meta/missing" } }),
            ),
            ("meta.absent".into(), json!({})),
        ]
    }

    fn resource_meta() -> Vec<(String, Value)> {
        vec![
            (
                "ui://bad-meta/view".into(),
                json!({ "ui": { "prefersBorder": false } }),
            ),
            ("ui://bad-meta/absent".into(), json!({})),
        ]
    }
}

impl Prompts for BadMeta {}
impl Completion for BadMeta {}

hangar_sdk::export_app!(BadMeta);
