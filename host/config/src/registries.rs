//! `[registries]`: where plugins with an `oci://` source are pulled from.

use std::collections::BTreeMap;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;

/// `[registries]`: plain-HTTP registries and credentials per registry.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegistriesConfig {
    /// Registries (`host:port`) spoken to over plain HTTP; all others over HTTPS.
    #[serde(default)]
    pub insecure: Vec<String>,
    /// Credentials by registry (`host:port`); anonymous when absent.
    #[serde(default)]
    pub auth: BTreeMap<String, RegistryAuthConfig>,
    /// A Docker `config.json` whose `auths` supply credentials for the
    /// registries `auth` does not name. Only when set: Hangar reads no
    /// `~/.docker/config.json` or `$DOCKER_CONFIG` of its own accord, so
    /// what it authenticates with is what this file says. Relative to the
    /// config file's folder.
    pub docker_config: Option<PathBuf>,
}

/// `[registries.auth."host:port"]`: HTTP basic credentials (the registry
/// may exchange them for a token); values may be `{{ env.VAR }}`.
#[derive(Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegistryAuthConfig {
    pub username: String,
    /// Usually `{{ env.VAR }}` or `{{ file./path }}`.
    pub password: String,
}

impl std::fmt::Debug for RegistryAuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryAuthConfig")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}
