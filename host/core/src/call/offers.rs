//! What components and DB entries offer besides tools, shaped as MCP's
//! JSON: resources, resource templates, prompts, prompt results and
//! completions.

use serde::{Deserialize, Serialize};

use super::result::{Content, ResourceContents};
use super::tool::Meta;

/// A resource with a fixed URI (`resources/list`).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDef {
    pub uri: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// The resource's `_meta` (an MCP App view's `ui` CSP and permissions).
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// A family of resources (`resources/templates/list`).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TemplateDef {
    pub uri_template: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// One argument a prompt takes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PromptArgument {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default)]
    pub required: bool,
}

/// A prompt (`prompts/list`).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PromptDef {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub arguments: Vec<PromptArgument>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PromptMessage {
    pub role: Role,
    pub content: Content,
}

/// A rendered prompt (`prompts/get`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PromptResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub messages: Vec<PromptMessage>,
}

/// What a `resources/read` answers.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ReadResult {
    pub contents: Vec<ResourceContents>,
    /// The result's own `_meta` (an upstream server's, passed on).
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// What is being completed (`completion/complete`'s `ref`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompletionRef {
    Prompt(String),
    ResourceTemplate(String),
}

/// At most this many completion values are sent (the MCP limit).
pub const MAX_COMPLETIONS: usize = 100;

/// Suggested values (`completion/complete`'s `completion`).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Completions {
    pub values: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<u32>,
    pub has_more: bool,
}

impl Completions {
    /// Cuts to [`MAX_COMPLETIONS`], saying there is more when it cut.
    pub fn capped(mut self) -> Completions {
        if self.values.len() > MAX_COMPLETIONS {
            self.total.get_or_insert(self.values.len() as u32);
            self.values.truncate(MAX_COMPLETIONS);
            self.has_more = true;
        }
        self
    }
}
