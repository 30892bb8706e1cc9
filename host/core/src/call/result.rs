//! A tool's result, shaped as MCP's `CallToolResult`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One content block of a result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum Content {
    Text {
        text: String,
    },
    Image {
        /// Base64.
        data: String,
        mime_type: String,
    },
    Audio {
        /// Base64.
        data: String,
        mime_type: String,
    },
    Resource {
        resource: ResourceContents,
    },
    ResourceLink {
        uri: String,
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
}

/// The contents of an embedded resource: `text` or base64 `blob`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceContents {
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
    /// Its `_meta` (an MCP App view's `ui`: CSP, permissions), as the
    /// component, DB entry or upstream server gave it.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<super::tool::Meta>,
}

/// What a call returns when it ran to the end: a success, or a tool-level
/// error (`is_error`) that the tool itself reported.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    pub content: Vec<Content>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    #[serde(default)]
    pub is_error: bool,
    /// MCP's `_meta`: what Hangar tells the client besides the content
    /// (`hangar/invalidated`, `hangar/hints`, `hangar/artifacts`), and what
    /// an output mapper or an upstream server put there.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<serde_json::Map<String, Value>>,
}

impl ToolResult {
    /// A tool-level error with `message` as its text.
    pub fn error(message: impl Into<String>) -> ToolResult {
        ToolResult {
            content: vec![Content::Text {
                text: message.into(),
            }],
            structured_content: None,
            is_error: true,
            meta: None,
        }
    }

    /// Sets `_meta[key]`, keeping what else `_meta` holds.
    pub fn set_meta(&mut self, key: &str, value: Value) {
        self.meta
            .get_or_insert_with(Default::default)
            .insert(key.to_string(), value);
    }

    /// Adds a rule to the presenter hints (`_meta["hangar/hints"].rules`),
    /// after those a tool or a mapper set.
    pub fn add_rule(&mut self, rule: String) {
        let meta = self.meta.get_or_insert_with(Default::default);
        let hints = meta
            .entry(HINTS_META)
            .or_insert_with(|| Value::Object(Default::default()));
        if !hints.is_object() {
            // A tool's hints that are no object are replaced, not merged.
            *hints = Value::Object(Default::default());
        }
        let rules = hints
            .as_object_mut()
            .expect("made an object above")
            .entry("rules")
            .or_insert_with(|| Value::Array(Vec::new()));
        match rules {
            Value::Array(rules) => rules.push(Value::String(rule)),
            other => *other = Value::Array(vec![Value::String(rule)]),
        }
    }

    /// Says the array at `pointer` (in `structuredContent`) was cut to `kept`
    /// items of `total` (`None`: the source stopped reading, as a DB tool's
    /// `max_rows` does, and never counted the rest): in
    /// `_meta["hangar/truncated"]` and in a hint the model reads.
    pub fn report_truncated(&mut self, pointer: &str, total: Option<usize>, kept: usize) {
        self.set_meta(
            TRUNCATED_META,
            serde_json::json!({ "pointer": pointer, "total": total, "kept": kept }),
        );
        let of = total.map_or_else(|| "more".to_string(), |t| t.to_string());
        self.add_rule(format!(
            "Only {kept} of {of} items at {pointer} were returned; ask for fewer \
             (narrower arguments, or a page) to see the rest."
        ));
    }
}

/// `_meta` key of presenter hints: `{"rules": [...], "suggested_calls":
/// [{"tool", "arguments", "reason"}]}`, set by a tool or an output mapper,
/// and by Hangar when it cut a result.
pub const HINTS_META: &str = "hangar/hints";

/// `_meta` key saying a result's array was cut: `{pointer, total, kept}`
/// (`[[tools]] limit`, a DB tool's `max_rows`).
pub const TRUNCATED_META: &str = "hangar/truncated";
