//! The `hangar.toml` schema: what an operator can set, with its defaults.
//!
//! Parsing is strict (`deny_unknown_fields`) so a typo is a startup error,
//! not a silently ignored setting.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// The whole configuration file.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub server: ServerConfig,
    /// Limits every guest call runs under unless a plugin or tool overrides them.
    #[serde(default)]
    pub limits: Limits,
    /// Settings per plugin, keyed by the `.wasm` file stem. Naming a plugin
    /// here makes it required: `hangar check` fails when its file is missing.
    #[serde(default)]
    pub plugins: BTreeMap<String, PluginConfig>,
    /// Settings per tool, by tool name.
    #[serde(default)]
    pub tools: Vec<ToolConfig>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub plugins: PathBuf,
    /// Where compiled components are cached, keyed by content and engine.
    pub cache_dir: PathBuf,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Origins allowed besides loopback ones (e.g. `https://app.example.com`).
    pub allowed_origins: Vec<String>,
    /// Host names allowed besides loopback ones (e.g. `mcp.example.com`).
    pub allowed_hosts: Vec<String>,
    /// How many guest instances may be live at once (the pooling allocator's size).
    pub max_instances: u32,
    /// Tools per `tools/list` page.
    pub page_size: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            plugins: PathBuf::from("plugins"),
            cache_dir: PathBuf::from(".cache/hangar"),
            max_body_bytes: 4 * 1024 * 1024,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            max_instances: 256,
            page_size: 100,
        }
    }
}

/// The three limits of one guest call.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Wasm fuel: roughly one unit per instruction.
    pub fuel: u64,
    /// Wall-clock time, enforced by epoch interruption.
    #[serde(with = "humantime_serde")]
    pub deadline: Duration,
    /// Linear-memory cap in MiB.
    pub memory_mib: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            fuel: 1_000_000_000,
            deadline: Duration::from_secs(5),
            memory_mib: 64,
        }
    }
}

impl Limits {
    pub fn memory_bytes(&self) -> usize {
        (self.memory_mib as usize) << 20
    }

    /// These limits with any field set in `over` replacing ours.
    pub fn overridden_by(self, over: &LimitOverrides) -> Limits {
        Limits {
            fuel: over.fuel.unwrap_or(self.fuel),
            deadline: over.deadline.unwrap_or(self.deadline),
            memory_mib: over.memory_mib.unwrap_or(self.memory_mib),
        }
    }
}

/// A partial [`Limits`], for plugin and tool overrides.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitOverrides {
    pub fuel: Option<u64>,
    #[serde(default, with = "humantime_serde")]
    pub deadline: Option<Duration>,
    pub memory_mib: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginConfig {
    #[serde(default)]
    pub limits: LimitOverrides,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolConfig {
    pub name: String,
    #[serde(default)]
    pub limits: LimitOverrides,
}

impl Config {
    /// Reads and parses a config file.
    pub fn load(path: &Path) -> anyhow::Result<Config> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read config {}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| anyhow::anyhow!("invalid config {}: {e}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Config, toml::de::Error> {
        toml::from_str(text)
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
    use super::*;

    #[test]
    fn empty_config_has_documented_defaults() {
        let c = Config::parse("").unwrap();
        assert_eq!(c.limits.fuel, 1_000_000_000);
        assert_eq!(c.limits.deadline, Duration::from_secs(5));
        assert_eq!(c.limits.memory_mib, 64);
        assert_eq!(c.server.max_body_bytes, 4 << 20);
        assert_eq!(c.server.listen.to_string(), "127.0.0.1:8080");
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
    fn unknown_keys_are_rejected() {
        let err = Config::parse("[limits]\nfule = 3\n").unwrap_err();
        assert!(err.to_string().contains("fule"), "{err}");
    }
}
