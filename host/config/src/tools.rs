//! `[[tools]]` entries and the settings a tool shares with a resource
//! (auth, mappers; the DB part is `db`'s): their own file so `offered` and
//! `oauth` read them without naming the config root.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;

use super::db::DbConfig;
use super::limits::LimitOverrides;
use super::rate::RateLimit;

/// A `[[tools]]` entry: limit overrides for a plugin's tool, or, with
/// `statement`, a whole DB tool.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolConfig {
    /// The tool's name in the catalog (after any plugin prefix).
    pub name: String,
    /// Overrides of the plugin's and the global limits for this tool.
    #[serde(default)]
    pub limits: LimitOverrides,
    /// A DB tool's display name.
    pub title: Option<String>,
    /// A DB tool's description, shown to clients and models.
    pub description: Option<String>,
    /// A DB tool's `_meta` object, passed to clients as written: e.g.
    /// `meta = { ui = { resourceUri = "ui://…", visibility = ["app"] } }`
    /// links an MCP App view. Its `ui` is checked at load.
    pub meta: Option<serde_json::Map<String, serde_json::Value>>,
    /// With `statement`, the entry is a DB tool: its connector, statement,
    /// inputs, cache, read-only rule and row cap.
    #[serde(flatten)]
    pub db: DbConfig,
    /// Who may call the tool; overrides the server-wide `[auth]`.
    pub auth: Option<AuthSetting>,
    /// Mapper plugins for the arguments and the result.
    #[serde(default)]
    pub mappers: MapperConfig,
    /// Only callers whose claims match see and may call the tool, e.g.
    /// `{ role = ["admin"] }` (every key must match one listed value).
    pub visible_to: Option<BTreeMap<String, Vec<String>>>,
    /// Calls one caller may make to this tool.
    pub rate_limit: Option<RateLimit>,
    /// OAuth scopes a token needs to call the tool (403 `insufficient_scope`).
    #[serde(default)]
    pub scopes: Vec<String>,
    /// `[credentials]` providers the tool needs (on top of its plugin's or
    /// upstream's `requires`; see `[server] hide_unconnected`).
    #[serde(default)]
    pub requires: Vec<String>,
    /// State sync: after a successful call, the cached results of the DB
    /// tools and resources whose names (or URIs) match one of these globs
    /// are dropped, and the result's `_meta["hangar/invalidated"]` lists them.
    #[serde(default)]
    pub invalidates: Vec<String>,
    /// Arguments that take `upload://` handles (`POST /uploads`): resolved
    /// for the caller's session only, then handed to the tool as files (a
    /// component) or bytes (a DB tool).
    #[serde(default)]
    pub consumes_uploads: Vec<String>,
    /// The component gets a writable `/artifacts` directory for the call;
    /// what it leaves there becomes `artifact://` resources.
    #[serde(default)]
    pub produces_artifacts: bool,
    /// Runs as a task (the MCP 2026-07-28 `io.modelcontextprotocol/tasks`
    /// extension) for a client that declares the extension: `optional`
    /// (others get the result as usual) or `required` (others get -32021).
    pub task: Option<TaskSupport>,
    /// Cuts an array of the result to `max` items before it is checked and
    /// sent: `limit = { pointer = "/items", max = 50 }`; the result's
    /// `_meta["hangar/truncated"]` says so.
    pub limit: Option<ResultLimit>,
    /// Overrides `[server] strip_undeclared` for this tool.
    pub strip_undeclared: Option<bool>,
}

/// `[[tools]] limit` (or `"x-hangar-limit"` at the top of a tool's
/// `outputSchema`): the array at `pointer` in `structuredContent` keeps at
/// most `max` items.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResultLimit {
    /// A JSON pointer into `structuredContent`, e.g. `/items`.
    #[schemars(regex(pattern = "^/"))]
    pub pointer: String,
    /// How many items are kept (at least 1).
    pub max: std::num::NonZeroUsize,
}

impl ResultLimit {
    /// A limit read from a tool's own `outputSchema` (`"x-hangar-limit"`).
    pub fn declared(output_schema: &serde_json::Value) -> Option<Result<ResultLimit, String>> {
        let declared = output_schema.get("x-hangar-limit")?;
        Some(
            serde_json::from_value::<ResultLimit>(declared.clone())
                .map_err(|e| format!("x-hangar-limit: {e}"))
                .and_then(|l| l.checked().map(|()| l)),
        )
    }

    /// A pointer names a place inside the result: it starts with `/`.
    pub fn checked(&self) -> Result<(), String> {
        if self.pointer.starts_with('/') {
            Ok(())
        } else {
            Err(format!(
                "limit: pointer {:?} must start with \"/\" (e.g. \"/items\")",
                self.pointer
            ))
        }
    }
}

/// Whether a tool's calls become tasks (`[[tools]] task`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TaskSupport {
    /// A task for a client that declared the extension, a plain call otherwise.
    Optional,
    /// Only as a task: a client without the extension is refused.
    Required,
}

/// `auth = { plugin = "...", policy = {...} }`, or `auth = "none"` to opt a
/// tool out of the server-wide default.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum AuthSetting {
    Plugin(AuthConfig),
    Keyword(AuthKeyword),
}

/// `auth = "none"`: no auth check, whatever `[auth]` says.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AuthKeyword {
    None,
}

/// An auth check: the auth plugin that decides, and its policy.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// The auth plugin (its file stem).
    pub plugin: String,
    /// Passed to the plugin as JSON.
    #[serde(default)]
    pub policy: serde_json::Map<String, serde_json::Value>,
}

/// `mappers = { input = "...", output = "..." }`: mapper plugins (by file
/// stem) around a tool.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MapperConfig {
    /// Rewrites the arguments before the call.
    pub input: Option<String>,
    /// Rewrites the result after it.
    pub output: Option<String>,
}
