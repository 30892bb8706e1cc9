//! The `hangar.toml` schema: what an operator can set, with its defaults.
//!
//! Parsing is strict (`deny_unknown_fields`) so a typo is a startup error,
//! not a silently ignored setting.

/// `{{ env.X }}` / `{{ file./path }}` substitution, for settings read
/// outside `config` (the cluster's Redis URLs).
pub mod placeholders;
pub use placeholders::substitute_env;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Deserialize;

mod adapters;
mod cluster;
mod code;
mod connectors;
mod credentials;
mod db;
mod files;
mod grants;
mod keys;
mod kv;
mod limits;
mod oauth;
mod offers;
mod plugins;
#[cfg(test)]
mod properties;
mod rate;
mod registries;
pub mod reloadable;
mod schema;
mod selection;
mod server;
mod tools;
mod toolsets;
mod trust;
mod upstream_auth;
mod upstreams;

pub use adapters::{AdapterConfig, AdapterKind, OutputLocator};
pub use cluster::{ClusterConfig, RedisUrls};
pub use code::{CodeConfig, SandboxKind};
pub use connectors::{ConnectorConfig, PostgresConfig, SqliteConfig};
pub use credentials::{CredentialConfig, CredentialsConfig, Fallback, Source};
pub use db::{CacheConfig, DbConfig, InputSpec, InputType};
pub use files::{ArtifactsConfig, FilesConfig, UploadsConfig};
pub use grants::{Grants, HttpConfig};
pub use keys::TrustedKey;
pub use kv::{BackendKind, KvConfig};
pub use limits::{LimitOverrides, Limits};
pub use oauth::{OAuthConfig, RestAccess};
pub use offers::{PromptConfig, ResourceConfig};
pub use plugins::{InstancesConfig, PluginConfig};
pub use rate::RateLimit;
pub use registries::{RegistriesConfig, RegistryAuthConfig};
pub use selection::{Rename, ToolSelection};
pub use server::{CatalogMode, ErrorStyle, OutputValidation, ServerConfig, TrustedProxy};
pub use tools::{
    AuthConfig, AuthKeyword, AuthSetting, MapperConfig, ResultLimit, TaskSupport, ToolConfig,
};
pub use toolsets::ToolsetConfig;
pub use trust::{Require, TrustConfig};
pub use upstream_auth::{ResolvedAuth, UpstreamAuthConfig};
pub use upstreams::{
    Endpoint, PASSED_ENV, Pinning, ResolvedUpstream, Start, StdioCommand, UpstreamConfig,
};

/// `hangar.toml`, Hangar's configuration file. Every key is optional;
/// unknown keys are errors.
#[derive(Debug, Clone, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where and how Hangar listens: HTTP limits, sessions, instance slots,
    /// and what its surfaces show.
    #[serde(default)]
    pub server: ServerConfig,
    /// Limits every guest call runs under unless a plugin or tool overrides them.
    #[serde(default)]
    pub limits: Limits,
    /// Settings per plugin, keyed by the `.wasm` file stem. Naming a plugin
    /// here makes it required: `hangar check` fails when its file is missing.
    #[serde(default)]
    pub plugins: BTreeMap<String, PluginConfig>,
    /// Settings per tool, by tool name; an entry with a `statement` defines a DB tool.
    #[serde(default)]
    pub tools: Vec<ToolConfig>,
    /// DB resources, and settings for components' resources.
    #[serde(default)]
    pub resources: Vec<ResourceConfig>,
    /// Settings for components' prompts.
    #[serde(default)]
    pub prompts: Vec<PromptConfig>,
    /// Databases that DB tools run their statements against, by name.
    #[serde(default)]
    pub connectors: BTreeMap<String, ConnectorConfig>,
    /// The auth check of every tool that does not set its own.
    pub auth: Option<AuthConfig>,
    /// Outbound HTTP from guests (what they may reach is in each plugin's grants).
    #[serde(default)]
    pub http: HttpConfig,
    /// Credential providers, by name (a plugin uses those its grants
    /// name), and the key users' own tokens are sealed with.
    #[serde(default)]
    pub credentials: CredentialsConfig,
    /// Where plugins' key-value state lives (`hangar:plugin/kv`).
    #[serde(default)]
    pub kv: KvConfig,
    /// Hangar as an OAuth 2.1 resource server (bearer tokens on `/mcp`).
    pub oauth: Option<OAuthConfig>,
    /// MCP servers whose tools join the catalog, by name.
    #[serde(default)]
    pub upstreams: BTreeMap<String, UpstreamConfig>,
    /// Files clients stage for tools (`POST /uploads`).
    #[serde(default)]
    pub uploads: UploadsConfig,
    /// Files tools produce (`artifact://` resources, `GET /artifacts/...`).
    #[serde(default)]
    pub artifacts: ArtifactsConfig,
    /// `[files] shared_dir`: uploads and artifacts in a folder upstream
    /// servers see too.
    #[serde(default)]
    pub files: FilesConfig,
    /// Named subsets of the catalog, each served at `/mcp/NAME` and
    /// `/toolsets/NAME/…`, by name.
    #[serde(default)]
    pub toolsets: BTreeMap<String, ToolsetConfig>,
    /// `[code]`: code mode (the `run` tool).
    #[serde(default)]
    pub code: CodeConfig,
    /// Replicas sharing state in Redis (`[cluster]`); none: all in-process.
    pub cluster: Option<ClusterConfig>,
    /// OCI registries plugins with an `oci://` source come from.
    #[serde(default)]
    pub registries: RegistriesConfig,
    /// The keys plugins from registries are signed with, and what they must carry.
    #[serde(default)]
    pub trust: TrustConfig,
    /// Relative paths in the file are relative to the file's folder.
    #[serde(skip)]
    pub base_dir: PathBuf,
}

impl Config {
    /// Reads and parses a config file.
    pub fn load(path: &Path) -> anyhow::Result<Config> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read config {}: {e}", path.display()))?;
        let mut config = Self::parse(&text)
            .map_err(|e| anyhow::anyhow!("invalid config {}: {e}", path.display()))?;
        config
            .validate_oauth()
            .and_then(|()| config.validate_toolsets())
            .and_then(|()| config.validate_credentials())
            .and_then(|()| config.validate_files())
            .and_then(|()| config.validate_limits())
            .map_err(|e| anyhow::anyhow!("invalid config {}: {e}", path.display()))?;
        if let Some(cluster) = &config.cluster {
            cluster
                .check()
                .map_err(|e| anyhow::anyhow!("invalid config {}: {e}", path.display()))?;
            // A download URL signed on one replica is checked by whichever
            // one the balancer picks: a key made up per process would fail there.
            if config.artifacts.signing_key.is_none() {
                anyhow::bail!(
                    "invalid config {}: [cluster] needs [artifacts] signing_key (at least 16 bytes, e.g. \"{{{{ env.HANGAR_SIGNING_KEY }}}}\"), the same on every replica: a download URL signed on one replica must verify on the others",
                    path.display()
                );
            }
        }
        config.base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        config.server.request_state_key = config
            .server
            .request_state_key
            .as_deref()
            .map(server::state_key)
            .transpose()
            .map_err(|e| {
                anyhow::anyhow!(
                    "invalid config {}: [server] request_state_key: {e}",
                    path.display()
                )
            })?;
        config.server.plugins = config.resolve(&config.server.plugins);
        config.server.cache_dir = config.resolve(&config.server.cache_dir);
        config.http.extra_ca = config.http.extra_ca.as_deref().map(|p| config.resolve(p));
        config.registries.docker_config = config
            .registries
            .docker_config
            .as_deref()
            .map(|p| config.resolve(p));
        if let Some(mut cluster) = config.cluster.take() {
            for path in [
                &mut cluster.ca_file,
                &mut cluster.client_cert,
                &mut cluster.client_key,
            ]
            .into_iter()
            .flatten()
            {
                *path = config.resolve(path);
            }
            config.cluster = Some(cluster);
        }
        config.files.shared_dir = (config.files.shared_dir.as_deref()).map(|p| config.resolve(p));
        config.uploads.dir = config.uploads.dir.as_deref().map(|p| config.resolve(p));
        config.artifacts.dir = config.artifacts.dir.as_deref().map(|p| config.resolve(p));
        config.trust.keys = config
            .trust
            .keys
            .iter()
            .map(|p| config.resolve(p))
            .collect();
        config
            .trust
            .load_keys()
            .map_err(|e| anyhow::anyhow!("invalid config {}: {e}", path.display()))?;
        let base = config.base_dir.clone();
        for connector in config.connectors.values_mut() {
            if let ConnectorConfig::Postgres(pg) = connector
                && let Some(ca) = &mut pg.ca_file
                && ca.is_relative()
            {
                *ca = base.join(&*ca);
            }
        }
        Ok(config)
    }

    /// The JSON Schema (2020-12) of the file, which `hangar config --schema`
    /// prints: derived from these types (see `schema.rs`).
    pub fn schema() -> serde_json::Value {
        schemars::schema_for!(Config).to_value()
    }

    /// What `hangar check` and `serve` warn about: settings that open
    /// something an operator should have chosen to open.
    pub fn warnings(&self) -> Vec<String> {
        self.oauth
            .as_ref()
            .map(OAuthConfig::warnings)
            .unwrap_or_default()
    }

    /// `[oauth]` and the tools' `scopes` (see `config::oauth`).
    pub fn validate_oauth(&self) -> Result<(), String> {
        match &self.oauth {
            Some(o) => o.validate(&self.tools),
            None => oauth::validate_without_oauth(&self.tools),
        }
    }

    /// `[toolsets]` and `[server] default_toolset` (see `config::toolsets`).
    pub fn validate_toolsets(&self) -> Result<(), String> {
        toolsets::validate(
            &self.toolsets,
            self.server.default_toolset.as_deref(),
            self.oauth.is_some(),
        )
    }

    /// Per-user providers need the key their tokens are sealed with, and
    /// the public base of the connect URLs handed out.
    pub fn validate_credentials(&self) -> Result<(), String> {
        self.validate_requires()?;
        if !self.credentials.per_user() {
            return Ok(());
        }
        if self.credentials.encryption_key.is_none() {
            return Err("a per-user provider ([credentials.NAME] kind = \"oauth2-user\" or \"user-key\") needs [credentials] encryption_key (32 bytes, base64, e.g. \"{{ env.HANGAR_CREDENTIALS_KEY }}\"): users' tokens are sealed with it at rest".into());
        }
        match self.server.public_url.as_deref() {
            Some(url) if url.starts_with("https://") || url.starts_with("http://") => Ok(()),
            Some(url) => Err(format!("[server] public_url: {url:?} is not an http(s) URL")),
            None => Err("a per-user provider needs [server] public_url (e.g. \"https://mcp.example.com\"): the connect URLs handed to users and the providers' redirect_uri start with it".into()),
        }
    }

    /// Every provider a `requires` or an upstream's `auth.credential` names
    /// is a `[credentials]` provider (the latter a per-user one: a
    /// server-wide value belongs in `headers`).
    fn validate_requires(&self) -> Result<(), String> {
        let known = |owner: &str, name: &str| {
            if self.credentials.providers.contains_key(name) {
                Ok(())
            } else {
                Err(format!(
                    "{owner}: requires {name:?}, which is not a [credentials] provider"
                ))
            }
        };
        for (name, p) in &self.plugins {
            for r in &p.requires {
                known(&format!("[plugins.{name}]"), r)?;
            }
        }
        for t in &self.tools {
            for r in &t.requires {
                known(&format!("[[tools]] {:?}", t.name), r)?;
            }
        }
        for (name, u) in &self.upstreams {
            for r in &u.requires {
                known(&format!("[upstreams.{name}]"), r)?;
            }
            if let Some(provider) = u.auth.as_ref().and_then(|a| a.credential.as_deref()) {
                match self.credentials.providers.get(provider) {
                    Some(c) if c.is_per_user() => {}
                    Some(_) => {
                        return Err(format!(
                            "[upstreams.{name}] auth: credential {provider:?} is a server-wide provider; put its value in headers instead"
                        ));
                    }
                    None => {
                        return Err(format!(
                            "[upstreams.{name}] auth: credential {provider:?} is not a [credentials] provider"
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// `[files] shared_dir` replaces `[uploads] dir` and `[artifacts] dir`,
    /// and upstream adapters need it: the upstream must see the files.
    pub fn validate_files(&self) -> Result<(), String> {
        if self.files.shared_dir.is_some() {
            if self.uploads.dir.is_some() || self.artifacts.dir.is_some() {
                return Err("[files] shared_dir holds uploads/ and artifacts/: leave out [uploads] dir and [artifacts] dir".into());
            }
            return Ok(());
        }
        match self.upstreams.iter().find(|(_, u)| !u.adapters.is_empty()) {
            Some((name, _)) => Err(format!(
                "[upstreams.{name}] adapters need [files] shared_dir: a folder Hangar and the upstream both see"
            )),
            None => Ok(()),
        }
    }

    /// Each `[[tools]] limit` points inside the result.
    pub fn validate_limits(&self) -> Result<(), String> {
        for t in &self.tools {
            if let Some(limit) = &t.limit {
                limit
                    .checked()
                    .map_err(|e| format!("[[tools]] {:?}: {e}", t.name))?;
            }
        }
        Ok(())
    }

    /// A path from the config file, relative to the file's folder.
    pub fn resolve(&self, path: &Path) -> PathBuf {
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.base_dir.join(path)
        }
    }

    /// Parses the file's text. With `[cluster]` and no `[kv]` table, kv
    /// lives in the cluster's Redis too.
    pub fn parse(text: &str) -> Result<Config, toml::de::Error> {
        let mut config: Config = toml::from_str(text)?;
        if let Some(cluster) = &config.cluster {
            let table: toml::Table = toml::from_str(text)?;
            if !table.contains_key("kv") {
                config.kv.backend = BackendKind::Redis;
                config.kv.url = cluster.redis.first().to_string();
            }
        }
        Ok(config)
    }

    /// The limits for one tool of one plugin: global, then plugin, then tool.
    pub fn limits_for(&self, plugin: &str, tool: &str) -> Limits {
        let mut limits = self.limits;
        if let Some(p) = self.plugins.get(plugin) {
            limits = limits.overridden_by(&p.limits);
        }
        for t in self.tools.iter().filter(|t| t.name == tool) {
            limits = limits.overridden_by(&t.limits);
        }
        limits
    }

    /// The `[[resources]]` entry about `uri` (or a template), if any.
    pub fn resource(&self, uri: &str) -> Option<&ResourceConfig> {
        self.resources.iter().find(|r| r.key() == uri)
    }

    /// The `[[prompts]]` entry named `name`, if any.
    pub fn prompt(&self, name: &str) -> Option<&PromptConfig> {
        self.prompts.iter().find(|p| p.name == name)
    }

    /// The `[[tools]]` entry named `name`, if any.
    pub fn tool(&self, name: &str) -> Option<&ToolConfig> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The largest memory cap any call may get, to size the instance pool.
    pub fn max_memory_bytes(&self) -> usize {
        let plugin = self.plugins.values().filter_map(|p| p.limits.memory_mib);
        let tool = self.tools.iter().filter_map(|t| t.limits.memory_mib);
        let mib = plugin.chain(tool).fold(self.limits.memory_mib, u64::max);
        (mib as usize) << 20
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn empty_config_has_documented_defaults() {
        let c = Config::parse("").unwrap();
        assert_eq!(c.limits.fuel, 1_000_000_000);
        assert_eq!(c.limits.deadline, Duration::from_secs(5));
        assert_eq!(c.limits.memory_mib, 64);
        assert_eq!(c.server.max_body_bytes, 4 << 20);
        assert_eq!(c.server.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(c.server.header_timeout, Duration::from_secs(10));
        assert_eq!(c.server.idle_timeout, Duration::from_secs(60));
        assert_eq!(c.server.max_connections, 512);
        assert_eq!(c.server.max_sessions, 10_000);
    }

    #[test]
    fn metrics_are_served_unless_turned_off() {
        assert!(Config::parse("").unwrap().server.metrics);
        let off = Config::parse("[server]\nmetrics = false").unwrap();
        assert!(!off.server.metrics);
    }

    #[test]
    fn tool_overrides_plugin_overrides_global() {
        let c = Config::parse(
            r#"
            [limits]
            fuel = 100
            deadline = "2s"
            [plugins.echo]
            limits = { fuel = 50, memory_mib = 8 }
            [[tools]]
            name = "echo"
            limits = { deadline = "250ms" }
            "#,
        )
        .unwrap();
        let l = c.limits_for("echo", "echo");
        assert_eq!(l.fuel, 50);
        assert_eq!(l.memory_mib, 8);
        assert_eq!(l.deadline, Duration::from_millis(250));
        let other = c.limits_for("other", "x");
        assert_eq!(other.fuel, 100);
        assert_eq!(other.memory_mib, 64);
        assert_eq!(c.max_memory_bytes(), 64 << 20);
    }

    #[test]
    fn db_tools_and_connectors_parse() {
        let c = Config::parse(
            r#"
            [connectors.main]
            kind = "postgres"
            url = "{{ env.DATABASE_URL }}"
            [connectors.demo]
            kind = "sqlite"
            path = "demo.db"
            [[tools]]
            name = "users.get"
            description = "Fetch one user"
            use = "main"
            statement = "SELECT 1 WHERE {{ inputs.id }} = 1"
            inputs.id = { type = "integer", required = true }
            cache = { ttl = "60s" }
            "#,
        )
        .unwrap();
        let t = &c.tools[0];
        assert_eq!(t.db.connector.as_deref(), Some("main"));
        assert!(t.db.read_only);
        assert_eq!(t.db.max_rows, 1000);
        assert_eq!(t.db.inputs["id"].ty, InputType::Integer);
        assert_eq!(t.db.cache.as_ref().unwrap().ttl, Duration::from_secs(60));
        assert!(matches!(&c.connectors["main"], ConnectorConfig::Postgres(p) if p.pool_size == 16));
        assert!(matches!(&c.connectors["demo"], ConnectorConfig::Sqlite(_)));
        let bad = Config::parse("[connectors.x]\nkind = \"sqlite\"\npath = \"a\"\npoolsize = 3\n");
        assert!(bad.is_err());
    }

    #[test]
    fn a_cluster_without_kv_puts_kv_in_its_redis() {
        let c = Config::parse("[cluster]\nredis = \"redis://10.0.0.5:6379\"\n").unwrap();
        assert_eq!(c.cluster.as_ref().unwrap().prefix, "hangar:cluster");
        assert_eq!(c.kv.backend, BackendKind::Redis);
        assert_eq!(c.kv.url, "redis://10.0.0.5:6379");
        let own =
            Config::parse("[cluster]\nredis = \"redis://10.0.0.5:6379\"\n[kv]\nmax_keys = 5\n")
                .unwrap();
        assert_eq!(own.kv.backend, BackendKind::Embedded);
        assert!(Config::parse("").unwrap().cluster.is_none());
        assert!(Config::parse("[cluster]\nredis = \"x\"\nport = 1\n").is_err());
        let bad = Config::parse("[cluster]\nredis = \"http://user:secret@h:1\"\n").unwrap();
        assert!(!bad.cluster.unwrap().check().unwrap_err().contains("secret"));
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let err = Config::parse("[limits]\nfule = 3\n").unwrap_err();
        assert!(err.to_string().contains("fule"), "{err}");
    }
}
