//! `[[resources]]` and `[[prompts]]`: DB resources, and who may see and read
//! what components offer besides tools.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;

use super::db::DbConfig;
use super::limits::LimitOverrides;
use super::tools::AuthSetting;

/// A `[[resources]]` entry. With `statement` it defines a DB resource (its
/// `uri_template` variables bound as parameters, like a DB tool's inputs);
/// without, it sets auth, visibility and limits of a component's resource
/// with this `uri` or `uri_template`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourceConfig {
    /// A fixed URI (`resources/list`)…
    pub uri: Option<String>,
    /// …or a template such as `db://products/{id}` (`resources/templates/list`).
    pub uri_template: Option<String>,
    /// A DB resource's name (`resources/list`).
    pub name: Option<String>,
    /// A DB resource's display name.
    pub title: Option<String>,
    /// A DB resource's description.
    pub description: Option<String>,
    /// Of the contents; a DB resource defaults to `application/json`.
    pub mime_type: Option<String>,
    /// A DB resource's `_meta` object, on its listed definition and on
    /// what a read answers, as written (an MCP App view's `ui`). Its `ui`
    /// is checked at load.
    pub meta: Option<serde_json::Map<String, serde_json::Value>>,
    /// With `statement`, the entry is a DB resource: its connector,
    /// statement, inputs (the template variables' types), cache, read-only
    /// rule and row cap.
    #[serde(flatten)]
    pub db: DbConfig,
    /// Who may read it; overrides the server-wide `[auth]`.
    pub auth: Option<AuthSetting>,
    /// Only callers whose claims match see and may read it.
    pub visible_to: Option<BTreeMap<String, Vec<String>>>,
    #[serde(default)]
    pub limits: LimitOverrides,
}

impl ResourceConfig {
    /// The URI or template this entry is about.
    pub fn key(&self) -> &str {
        self.uri
            .as_deref()
            .or(self.uri_template.as_deref())
            .unwrap_or_default()
    }

    /// Exactly one of `uri` and `uri_template`.
    pub fn check(&self) -> Result<(), String> {
        match (&self.uri, &self.uri_template) {
            (Some(_), None) | (None, Some(_)) => Ok(()),
            _ => Err("a [[resources]] entry needs exactly one of uri and uri_template".into()),
        }
    }
}

/// A `[[prompts]]` entry: auth, visibility and limits of a component's prompt.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromptConfig {
    /// The prompt's name, as its component offers it.
    pub name: String,
    /// Who may get it; overrides the server-wide `[auth]`.
    pub auth: Option<AuthSetting>,
    /// Only callers whose claims match see and may get it.
    pub visible_to: Option<BTreeMap<String, Vec<String>>>,
    /// Overrides of the limits for getting it.
    #[serde(default)]
    pub limits: LimitOverrides,
}
