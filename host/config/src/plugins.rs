//! `[plugins.X]`: a plugin's limits, config, prefix, tool selection, warm
//! instances, grants and rate limit.

use std::time::Duration;

use super::*;

/// `[plugins.NAME]`: settings of the plugin whose file stem is NAME.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PluginConfig {
    /// Overrides of the global limits for the plugin's calls.
    #[serde(default)]
    pub limits: LimitOverrides,
    /// What the plugin reads with `config.get(key)`; values may be `{{ env.VAR }}`.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, serde_json::Value>")]
    pub config: BTreeMap<String, toml::Value>,
    /// Put before each of the plugin's tool names (e.g. `billing.`), to
    /// avoid collisions. A plain component's tools are `<plugin>.` prefixed
    /// unless this says otherwise.
    pub prefix: Option<String>,
    /// The plugin's tools to serve, and their names; all when absent.
    pub tools: Option<Vec<ToolSelection>>,
    /// Warm-instance reuse (tools, auth checks and mappers): off by default, for isolation.
    #[serde(default)]
    pub instances: InstancesConfig,
    /// What the plugin may reach outside its sandbox; nothing by default.
    #[serde(default)]
    pub grants: Grants,
    /// Calls one caller may make to the plugin's tools together.
    pub rate_limit: Option<RateLimit>,
    /// Where the component comes from instead of the plugins folder:
    /// `oci://host:port/repo:tag` or `oci://host:port/repo@sha256:…`.
    pub source: Option<String>,
    /// The manifest digest the `source` must resolve to (`sha256:…`);
    /// anything else is refused.
    pub digest: Option<String>,
    /// `[credentials]` providers its tools need: with `[server]
    /// hide_unconnected`, a caller for whom one resolves to nothing does not
    /// see them.
    #[serde(default)]
    pub requires: Vec<String>,
}

/// `instances = { reuse = true, max_calls = 1000, max_idle = "60s" }`: keep a
/// few warm instances, each serving one call at a time, thrown away after a
/// trap, after `max_calls` calls, or when idle longer than `max_idle`. State
/// a guest keeps in memory can then leak from one call to the next.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct InstancesConfig {
    /// Keep warm instances between calls.
    pub reuse: bool,
    /// Calls one instance serves before it is thrown away.
    pub max_calls: u32,
    /// An instance idle longer than this is thrown away.
    #[serde(with = "humantime_serde")]
    #[schemars(with = "super::schema::Humantime")]
    pub max_idle: Duration,
    /// Warm instances kept at most.
    pub pool_size: usize,
}

impl Default for InstancesConfig {
    fn default() -> Self {
        InstancesConfig {
            reuse: false,
            max_calls: 1000,
            max_idle: Duration::from_secs(60),
            pool_size: 8,
        }
    }
}
