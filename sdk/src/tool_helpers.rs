//! Builders and conversions for the `tool` world's types.

use serde_json::Value;

use crate::{
    Annotations, CallResult, ContentBlock, EmbeddedResource, Media, ResourceContents,
    ToolDefinition, ToolError,
};

/// Parses a call's JSON arguments into `T`; a mismatch is a tool error that
/// names the problem.
pub fn parse_args<T: serde::de::DeserializeOwned>(arguments: &str) -> Result<T, ToolError> {
    serde_json::from_str(arguments).map_err(|e| ToolError::new(format!("invalid arguments: {e}")))
}

impl ToolDefinition {
    /// A tool with a name, a description and a JSON Schema for its arguments.
    pub fn new(name: &str, description: &str, input_schema: Value) -> ToolDefinition {
        ToolDefinition {
            name: name.to_string(),
            title: None,
            description: description.to_string(),
            input_schema: input_schema.to_string(),
            output_schema: None,
            annotations: None,
        }
    }

    pub fn title(mut self, title: &str) -> Self {
        self.title = Some(title.to_string());
        self
    }

    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema.to_string());
        self
    }

    /// Marks the tool as having no side effects (`readOnlyHint`).
    pub fn read_only(mut self) -> Self {
        self.annotations().read_only_hint = Some(true);
        self
    }

    /// Marks the tool as possibly destructive (`destructiveHint`).
    pub fn destructive(mut self) -> Self {
        self.annotations().destructive_hint = Some(true);
        self
    }

    fn annotations(&mut self) -> &mut Annotations {
        self.annotations.get_or_insert(Annotations {
            read_only_hint: None,
            destructive_hint: None,
            idempotent_hint: None,
            open_world_hint: None,
        })
    }
}

impl CallResult {
    /// A result of content blocks.
    pub fn new(content: Vec<ContentBlock>) -> CallResult {
        CallResult {
            content,
            structured_content: None,
        }
    }

    /// A result of one text block.
    pub fn text(text: impl Into<String>) -> CallResult {
        CallResult::new(vec![ContentBlock::text(text)])
    }

    /// Adds structured content (it should match the tool's output schema).
    pub fn with_structured(mut self, value: Value) -> CallResult {
        self.structured_content = Some(value.to_string());
        self
    }

    /// Sets `_meta[key]` of the result the client gets. The `tool` world's
    /// result has no `_meta`, so this puts it under `_meta` at the top of
    /// the structured content, which Hangar moves to the result's `_meta`
    /// (a structured content of nothing else is then dropped).
    pub fn with_meta(mut self, key: &str, value: Value) -> CallResult {
        let mut structured = self
            .structured_content
            .as_deref()
            .and_then(|s| serde_json::from_str::<Value>(s).ok())
            .filter(Value::is_object)
            .unwrap_or_else(|| Value::Object(Default::default()));
        let meta = structured
            .as_object_mut()
            .expect("an object")
            .entry("_meta")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(key.to_string(), value);
        }
        self.structured_content = Some(structured.to_string());
        self
    }

    /// Presenter hints for the model (`_meta["hangar/hints"]`): rules to
    /// follow when presenting this result, and tool calls it may make next,
    /// as `(tool, arguments, reason)`.
    pub fn with_hints(self, rules: &[&str], suggested_calls: &[(&str, Value, &str)]) -> CallResult {
        let calls: Vec<Value> = suggested_calls
            .iter()
            .map(|(tool, arguments, reason)| {
                serde_json::json!({ "tool": tool, "arguments": arguments, "reason": reason })
            })
            .collect();
        self.with_meta(
            "hangar/hints",
            serde_json::json!({ "rules": rules, "suggested_calls": calls }),
        )
    }
}

impl ContentBlock {
    pub fn text(text: impl Into<String>) -> ContentBlock {
        ContentBlock::Text(text.into())
    }

    /// An image; the host base64-encodes `data`.
    pub fn image(data: &[u8], mime_type: &str) -> ContentBlock {
        ContentBlock::Image(Media {
            data: data.to_vec(),
            mime_type: mime_type.to_string(),
        })
    }

    /// Audio; the host base64-encodes `data`.
    pub fn audio(data: &[u8], mime_type: &str) -> ContentBlock {
        ContentBlock::Audio(Media {
            data: data.to_vec(),
            mime_type: mime_type.to_string(),
        })
    }

    /// An embedded text resource.
    pub fn resource_text(uri: &str, mime_type: &str, text: impl Into<String>) -> ContentBlock {
        ContentBlock::Resource(EmbeddedResource {
            uri: uri.to_string(),
            mime_type: Some(mime_type.to_string()),
            contents: ResourceContents::Text(text.into()),
        })
    }
}

impl ToolError {
    pub fn new(message: impl Into<String>) -> ToolError {
        ToolError {
            message: message.into(),
        }
    }
}

impl From<serde_json::Error> for ToolError {
    fn from(e: serde_json::Error) -> ToolError {
        ToolError::new(e.to_string())
    }
}
