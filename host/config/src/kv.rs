//! `[kv]`: where plugins' key-value state (`hangar:plugin/kv`) and the
//! host's task records live, and the bounds every backend enforces.
//!
//! Only the schema and its checks live here; the store itself is
//! the kv module, which reads this at load.

use schemars::JsonSchema;
use serde::Deserialize;

/// `[kv]` in `hangar.toml`.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct KvConfig {
    /// `embedded` (SQLite file `kv.sqlite3` under `[server] cache_dir`) or `redis`.
    pub backend: BackendKind,
    /// The Redis server (`backend = "redis"`); may hold `{{ env.VAR }}`.
    pub url: String,
    /// What every Redis key of Hangar starts with (`<prefix>:{<plugin>}:<key>`).
    pub prefix: String,
    /// Largest key, in bytes.
    pub max_key_bytes: usize,
    /// Largest value, in bytes.
    pub max_value_bytes: usize,
    /// Live keys one plugin may hold; a write that would add one more fails
    /// with `quota`.
    pub max_keys: u64,
}

/// Where `[kv]` keeps its keys.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// An SQLite file, `kv.sqlite3` under `[server] cache_dir`.
    #[default]
    Embedded,
    /// A Redis server, shared between processes.
    Redis,
}

impl Default for KvConfig {
    fn default() -> Self {
        KvConfig {
            backend: BackendKind::Embedded,
            url: "redis://127.0.0.1:6379".into(),
            prefix: "hangar:kv".into(),
            max_key_bytes: 512,
            max_value_bytes: 1 << 20,
            max_keys: 10_000,
        }
    }
}

/// The largest `max_value_bytes` accepted (Redis's own limit is 512 MiB).
const VALUE_BYTES_CEILING: usize = 64 << 20;
/// The largest `max_key_bytes` accepted.
const KEY_BYTES_CEILING: usize = 64 << 10;

impl KvConfig {
    /// The bounds, or what is wrong with them.
    pub fn check(&self) -> std::result::Result<(), String> {
        if !(1..=KEY_BYTES_CEILING).contains(&self.max_key_bytes) {
            return Err(format!(
                "max_key_bytes must be between 1 and {KEY_BYTES_CEILING}"
            ));
        }
        if !(1..=VALUE_BYTES_CEILING).contains(&self.max_value_bytes) {
            return Err(format!(
                "max_value_bytes must be between 1 and {VALUE_BYTES_CEILING}"
            ));
        }
        if self.max_keys == 0 {
            return Err("max_keys must be at least 1".into());
        }
        if self.prefix.is_empty() {
            return Err("prefix must not be empty".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

    #[test]
    fn defaults_are_documented_and_bad_bounds_are_refused() {
        let c = Config::parse("").unwrap().kv;
        assert_eq!(c.backend, BackendKind::Embedded);
        assert_eq!(c.url, "redis://127.0.0.1:6379");
        assert_eq!(c.prefix, "hangar:kv");
        assert_eq!(
            (c.max_key_bytes, c.max_value_bytes, c.max_keys),
            (512, 1 << 20, 10_000)
        );
        assert!(c.check().is_ok());
        let parse = |s: &str| Config::parse(&format!("[kv]\n{s}")).map(|c| c.kv);
        assert_eq!(
            parse("backend = \"redis\"").unwrap().backend,
            BackendKind::Redis
        );
        assert!(parse("backend = \"memcached\"").is_err());
        assert!(parse("max_key = 3").is_err());
        for bad in [
            "max_keys = 0",
            "max_key_bytes = 0",
            "max_value_bytes = 100000000",
        ] {
            assert!(parse(bad).unwrap().check().is_err(), "{bad}");
        }
    }
}
