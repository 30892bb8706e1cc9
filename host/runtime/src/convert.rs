//! Between the WIT records guests speak and the host's call vocabulary
//! (`hangar_core::call`): what a guest sees of a call, and its tool definitions,
//! results and content blocks as MCP's. Used by every kind of guest
//! (tools, offers, mappers), so it sits below all of them.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::Value;

use super::bindings::tool::hangar::plugin::types as wit;
use hangar_core::call::{Annotations, CallContext, Content, ResourceContents, ToolDef, ToolResult};

/// What a guest sees of a call.
pub fn wit_context(cx: &CallContext) -> wit::CallContext {
    wit::CallContext {
        trace_id: cx.trace_id.clone(),
        session_id: cx.session_id.clone(),
        principal: cx.principal.as_ref().map(|p| wit::Principal {
            subject: p.subject.clone(),
            claims: p.claims.to_string(),
        }),
    }
}

pub fn tool_def(d: wit::ToolDefinition) -> Result<ToolDef, String> {
    let mut input_schema: Value = serde_json::from_str(&d.input_schema)
        .map_err(|e| format!("tool {}: input schema is not JSON: {e}", d.name))?;
    let Some(obj) = input_schema.as_object_mut() else {
        return Err(format!(
            "tool {}: input schema is not a JSON object",
            d.name
        ));
    };
    obj.entry("type").or_insert_with(|| "object".into());
    let output_schema = d
        .output_schema
        .map(|s| serde_json::from_str::<Value>(&s))
        .transpose()
        .map_err(|e| format!("tool {}: output schema is not JSON: {e}", d.name))?;
    Ok(ToolDef {
        name: d.name,
        title: d.title,
        description: d.description,
        input_schema,
        output_schema,
        annotations: d.annotations.map(|a| Annotations {
            read_only_hint: a.read_only_hint,
            destructive_hint: a.destructive_hint,
            idempotent_hint: a.idempotent_hint,
            open_world_hint: a.open_world_hint,
        }),
        meta: None,
    })
}

/// The guest's result as MCP's. The `tool` world's result has no `_meta`:
/// a guest that wants one (presenter hints) puts an object under `_meta` at
/// the top of its structured content, and it is moved to the result's.
pub fn call_result(r: wit::CallResult) -> Result<ToolResult, String> {
    let mut structured_content = r
        .structured_content
        .map(|s| serde_json::from_str::<Value>(&s))
        .transpose()
        .map_err(|e| format!("structured content is not JSON: {e}"))?;
    let mut meta = None;
    if let Some(obj) = structured_content.as_mut().and_then(Value::as_object_mut)
        && obj.get("_meta").is_some_and(Value::is_object)
        && let Some(Value::Object(m)) = obj.remove("_meta")
    {
        meta = Some(m);
        if obj.is_empty() {
            structured_content = None;
        }
    }
    Ok(ToolResult {
        content: r.content.into_iter().map(content).collect(),
        structured_content,
        is_error: false,
        meta,
    })
}

pub fn content(block: wit::ContentBlock) -> Content {
    match block {
        wit::ContentBlock::Text(text) => Content::Text { text },
        wit::ContentBlock::Image(m) => Content::Image {
            data: B64.encode(&m.data),
            mime_type: m.mime_type,
        },
        wit::ContentBlock::Audio(m) => Content::Audio {
            data: B64.encode(&m.data),
            mime_type: m.mime_type,
        },
        wit::ContentBlock::Resource(r) => {
            let (text, blob) = match r.contents {
                wit::ResourceContents::Text(t) => (Some(t), None),
                wit::ResourceContents::Blob(b) => (None, Some(B64.encode(&b))),
            };
            Content::Resource {
                resource: ResourceContents {
                    uri: r.uri,
                    mime_type: r.mime_type,
                    text,
                    blob,
                    meta: None,
                },
            }
        }
        wit::ContentBlock::ResourceLink(l) => Content::ResourceLink {
            uri: l.uri,
            name: l.name,
            description: l.description,
            mime_type: l.mime_type,
        },
    }
}
