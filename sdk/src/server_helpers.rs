//! The `server` world's traits with defaults (a component offers what it
//! overrides, and nothing else), and builders for its records.

use crate::server::exports::hangar::plugin::{completion, prompts, resources};
use crate::{CallContext, ContentBlock};

pub use completion::{CompletionRequest, Completions, Reference};
pub use prompts::{PromptArgument, PromptDefinition, PromptError, PromptMessage, PromptResult};
pub use resources::{ResourceDefinition, ResourceError, ResourceItem, ResourceTemplate};

use crate::tool::hangar::plugin::types::{ResourceContents, Role};

/// Resources the component offers (`resources/list`, `resources/templates/list`, `resources/read`).
pub trait Resources {
    fn list_resources() -> Vec<ResourceDefinition> {
        Vec::new()
    }
    fn list_templates() -> Vec<ResourceTemplate> {
        Vec::new()
    }
    /// Reads a listed URI or one matching a listed template.
    fn read(_cx: CallContext, uri: String) -> Result<Vec<ResourceItem>, ResourceError> {
        Err(ResourceError::NotFound(uri))
    }
}

/// Prompts the component offers (`prompts/list`, `prompts/get`).
pub trait Prompts {
    fn list_prompts() -> Vec<PromptDefinition> {
        Vec::new()
    }
    fn get_prompt(
        _cx: CallContext,
        name: String,
        _arguments: Vec<(String, String)>,
    ) -> Result<PromptResult, PromptError> {
        Err(PromptError::InvalidArguments(format!("no prompt {name}")))
    }
}

/// Argument completion for the component's prompts and templates.
pub trait Completion {
    fn complete(_request: CompletionRequest) -> Completions {
        Completions {
            values: Vec::new(),
            total: None,
            has_more: false,
        }
    }
}

impl<T: crate::Tool> crate::server::Guest for T {
    fn list_tools() -> Vec<crate::ToolDefinition> {
        <T as crate::Tool>::list_tools()
    }
    fn call_tool(
        cx: CallContext,
        name: String,
        arguments: String,
    ) -> Result<crate::CallResult, crate::ToolError> {
        <T as crate::Tool>::call_tool(cx, name, arguments)
    }
}

impl<T: Resources> resources::Guest for T {
    fn list_resources() -> Vec<ResourceDefinition> {
        <T as Resources>::list_resources()
    }
    fn list_templates() -> Vec<ResourceTemplate> {
        <T as Resources>::list_templates()
    }
    fn read(cx: CallContext, uri: String) -> Result<Vec<ResourceItem>, ResourceError> {
        <T as Resources>::read(cx, uri)
    }
}

impl<T: Prompts> prompts::Guest for T {
    fn list_prompts() -> Vec<PromptDefinition> {
        <T as Prompts>::list_prompts()
    }
    fn get_prompt(
        cx: CallContext,
        name: String,
        arguments: Vec<(String, String)>,
    ) -> Result<PromptResult, PromptError> {
        <T as Prompts>::get_prompt(cx, name, arguments)
    }
}

impl<T: Completion> completion::Guest for T {
    fn complete(request: CompletionRequest) -> Completions {
        <T as Completion>::complete(request)
    }
}

impl ResourceDefinition {
    pub fn new(uri: &str, name: &str) -> ResourceDefinition {
        ResourceDefinition {
            uri: uri.into(),
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
            size: None,
        }
    }
    pub fn description(mut self, d: &str) -> Self {
        self.description = Some(d.into());
        self
    }
    pub fn mime_type(mut self, m: &str) -> Self {
        self.mime_type = Some(m.into());
        self
    }
}

impl ResourceTemplate {
    pub fn new(uri_template: &str, name: &str) -> ResourceTemplate {
        ResourceTemplate {
            uri_template: uri_template.into(),
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
        }
    }
    pub fn description(mut self, d: &str) -> Self {
        self.description = Some(d.into());
        self
    }
    pub fn mime_type(mut self, m: &str) -> Self {
        self.mime_type = Some(m.into());
        self
    }
}

impl ResourceItem {
    pub fn text(uri: &str, mime_type: &str, text: &str) -> ResourceItem {
        ResourceItem {
            uri: uri.into(),
            mime_type: Some(mime_type.into()),
            contents: ResourceContents::Text(text.into()),
        }
    }
    pub fn blob(uri: &str, mime_type: &str, data: &[u8]) -> ResourceItem {
        ResourceItem {
            uri: uri.into(),
            mime_type: Some(mime_type.into()),
            contents: ResourceContents::Blob(data.to_vec()),
        }
    }
}

impl PromptDefinition {
    pub fn new(name: &str, description: &str) -> PromptDefinition {
        PromptDefinition {
            name: name.into(),
            title: None,
            description: Some(description.into()),
            arguments: Vec::new(),
        }
    }
    /// Adds an argument.
    pub fn argument(mut self, name: &str, description: &str, required: bool) -> Self {
        self.arguments.push(PromptArgument {
            name: name.into(),
            title: None,
            description: Some(description.into()),
            required,
        });
        self
    }
}

impl PromptMessage {
    pub fn user(content: ContentBlock) -> PromptMessage {
        PromptMessage {
            role: Role::User,
            content,
        }
    }
    pub fn assistant(content: ContentBlock) -> PromptMessage {
        PromptMessage {
            role: Role::Assistant,
            content,
        }
    }
}

impl PromptResult {
    pub fn new(messages: Vec<PromptMessage>) -> PromptResult {
        PromptResult {
            description: None,
            messages,
        }
    }
}
