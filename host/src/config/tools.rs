//! `[[tools]]` entries and the settings a tool shares with a resource
//! (inputs, cache, auth, mappers): their own file so `offered` and `oauth`
//! read them without naming the config root.

use std::collections::BTreeMap;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

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
    /// The connector a DB tool runs on.
    #[serde(rename = "use")]
    pub connector: Option<String>,
    /// The SQL of a DB tool, with `{{ inputs.x }}` and `{{ env.X }}` placeholders.
    pub statement: Option<String>,
    /// A DB tool's declared inputs, by name.
    #[serde(default)]
    pub inputs: BTreeMap<String, InputSpec>,
    /// Keep a DB tool's results for the same arguments for a while.
    pub cache: Option<CacheConfig>,
    /// Who may call the tool; overrides the server-wide `[auth]`.
    pub auth: Option<AuthSetting>,
    /// Mapper plugins for the arguments and the result.
    #[serde(default)]
    pub mappers: MapperConfig,
    /// Only callers whose claims match see and may call the tool, e.g.
    /// `{ role = ["admin"] }` (every key must match one listed value).
    pub visible_to: Option<BTreeMap<String, Vec<String>>>,
    /// Run inside a read-only transaction (DB tools; default true).
    #[serde(default = "yes")]
    pub read_only: bool,
    /// More rows than this are cut, and the result says so.
    #[serde(default = "default_max_rows")]
    pub max_rows: usize,
    /// Calls one caller may make to this tool.
    pub rate_limit: Option<RateLimit>,
    /// OAuth scopes a token needs to call the tool (403 `insufficient_scope`).
    #[serde(default)]
    pub scopes: Vec<String>,
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

pub(crate) fn yes() -> bool {
    true
}

pub(crate) fn default_max_rows() -> usize {
    1000
}

/// One declared input of a DB tool.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InputSpec {
    /// Its JSON type.
    #[serde(rename = "type")]
    pub ty: InputType,
    /// Shown to clients in the tool's input schema.
    pub description: Option<String>,
    /// Whether a call must give it.
    #[serde(default)]
    pub required: bool,
    /// The value bound when a call leaves it out.
    pub default: Option<serde_json::Value>,
    /// Element type of an `array` input.
    pub items: Option<InputType>,
    /// Bind this input from the caller's principal claim (e.g. `sub`), never
    /// from the arguments.
    pub from_claim: Option<String>,
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

/// The JSON type of a DB tool's input.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum InputType {
    String,
    Integer,
    Number,
    Boolean,
    Array,
    Object,
}

impl InputType {
    pub fn as_str(self) -> &'static str {
        match self {
            InputType::String => "string",
            InputType::Integer => "integer",
            InputType::Number => "number",
            InputType::Boolean => "boolean",
            InputType::Array => "array",
            InputType::Object => "object",
        }
    }
}

/// `cache = { ttl = "60s" }`: results kept per arguments (and caller).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CacheConfig {
    /// How long a result is served from the cache.
    #[serde(with = "humantime_serde")]
    #[schemars(with = "super::schema::Humantime")]
    pub ttl: Duration,
    /// Bytes of results one tool (or resource) keeps; the least used go first.
    #[serde(default = "default_cache_bytes")]
    pub max_bytes: u64,
    /// A larger result is served but not kept.
    #[serde(default = "default_cache_entry_bytes")]
    pub max_entry_bytes: u64,
}

fn default_cache_bytes() -> u64 {
    32 << 20
}

fn default_cache_entry_bytes() -> u64 {
    1 << 20
}
