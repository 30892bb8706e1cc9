//! `[trust]`: which keys sign the plugins pulled from registries, and what
//! an `oci://` source must carry to be served.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;

/// `[trust]`: `keys` (PEM public keys, as `cosign generate-key-pair`
/// writes `cosign.pub`) and what every `oci://` source must carry.
/// Files in `plugins/` are the operator's own: `require` does not apply to
/// them (`hangar check` shows them as local files, unverified).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrustConfig {
    /// Key files, relative to the config file's folder.
    #[serde(default)]
    pub keys: Vec<PathBuf>,
    /// What every `oci://` source must carry: `none`, `pinned` or `signed`.
    #[serde(default)]
    pub require: Require,
    /// The keys read from `keys` when the config was loaded (a bad key file
    /// is a config error naming the file).
    #[serde(skip)]
    pub loaded: Vec<super::TrustedKey>,
}

/// What an `oci://` source must carry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Require {
    /// Nothing: a signature is checked (and shown) when keys are set.
    #[default]
    None,
    /// A digest pin (`digest = "sha256:…"` or `…@sha256:…`).
    Pinned,
    /// A valid signature by one of `keys`, beside the artifact.
    Signed,
}

impl Require {
    pub fn as_str(self) -> &'static str {
        match self {
            Require::None => "none",
            Require::Pinned => "pinned",
            Require::Signed => "signed",
        }
    }
}

impl TrustConfig {
    /// Reads every key file (already resolved against the config's folder).
    pub fn load_keys(&mut self) -> Result<(), String> {
        if self.require == Require::Signed && self.keys.is_empty() {
            return Err("[trust] require = \"signed\" needs at least one key in keys".into());
        }
        self.loaded = self
            .keys
            .iter()
            .map(|path| {
                super::TrustedKey::load(path)
                    .map_err(|e| format!("[trust] keys: {}: {e}", path.display()))
            })
            .collect::<Result<_, _>>()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::{Config, Require};

    #[test]
    fn trust_defaults_to_none_and_refuses_unknown_requirements() {
        assert_eq!(Config::parse("").unwrap().trust.require, Require::None);
        let c = Config::parse("[trust]\nrequire = \"pinned\"\n").unwrap();
        assert_eq!(c.trust.require, Require::Pinned);
        assert!(Config::parse("[trust]\nrequire = \"maybe\"\n").is_err());
        let mut signed = Config::parse("[trust]\nrequire = \"signed\"\n").unwrap();
        let e = signed.trust.load_keys().unwrap_err();
        assert!(e.contains("needs at least one key"), "{e}");
        let mut missing = Config::parse("[trust]\nkeys = [\"/nonexistent/team.pub\"]\n").unwrap();
        let e = missing.trust.load_keys().unwrap_err();
        assert!(e.contains("/nonexistent/team.pub"), "{e}");
    }
}
