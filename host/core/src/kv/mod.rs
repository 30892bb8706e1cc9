//! The host's key-value store: one per server, shared by every plugin
//! (the `hangar:plugin/kv` guest capability, `crate::wasm::capability::kv`) and by the
//! host itself (MCP task records, in namespaces no guest reaches).
//!
//! `[kv]` (`hangar_config::KvConfig`) is checked and the backend opened once
//! at load ([`open`], whose problems `hangar check` reports). It lives below
//! `wasm` so that MCP tasks use it without naming the guest runtime.
//!
//! This module owns what every backend shares: the bounds on key and value
//! sizes (checked here, before a backend sees a request) and the typed
//! errors. A backend owns its storage, TTLs and the `max_keys` count, which
//! it must check atomically with the write that adds a key:
//! [`embedded`] (SQLite under `cache_dir`, the default) and [`redis`].

mod backend;
mod embedded;
mod redis;

use std::path::Path;
use std::sync::Arc;

use crate::cluster::link::RedisLink;
use hangar_config::{BackendKind, KvConfig};

use backend::Backend;
pub use backend::{KvError, Result};

/// The longest TTL a guest may ask for: about 100 years, in milliseconds.
const MAX_TTL_MS: u64 = 100 * 365 * 24 * 3600 * 1000;

/// The host's kv store: the configured backend behind the shared bounds.
/// One per server, shared by every plugin and call.
pub struct KvStore {
    backend: Box<dyn Backend>,
    max_key_bytes: usize,
    max_value_bytes: usize,
    max_keys: u64,
}

impl std::fmt::Debug for KvStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.backend.describe())
    }
}

/// A Redis connection the process already holds, and the URL it was made
/// from: the cluster's, which kv shares when its own URL is the same (as
/// it is with `[cluster]` and no `[kv]`), so the process opens one.
pub struct OpenRedis<'a> {
    pub url: &'a str,
    pub link: Arc<RedisLink>,
}

/// Checks `[kv]` and opens its backend. `None` with a problem when it
/// cannot be used (kv calls then fail with `unavailable`); a Redis server
/// that does not answer yet is a problem too, but the store is kept and
/// connects when it can.
pub async fn open(
    config: &KvConfig,
    cache_dir: &Path,
    open_redis: Option<OpenRedis<'_>>,
) -> (Option<Arc<KvStore>>, Vec<String>) {
    if let Err(e) = config.check() {
        return (None, vec![e]);
    }
    let mut problems = Vec::new();
    let backend: Box<dyn Backend> = match config.backend {
        BackendKind::Embedded => match embedded::Embedded::open(cache_dir) {
            Ok(b) => Box::new(b),
            Err(e) => return (None, vec![e]),
        },
        BackendKind::Redis => {
            let env = |var: &str| std::env::var(var).ok();
            let url = match hangar_config::placeholders::substitute_env(&config.url, &env) {
                Ok(url) => url,
                Err(e) => return (None, vec![format!("url: {e}")]),
            };
            let made = match open_redis {
                Some(held) if held.url == url => Ok(redis::Redis::over(held.link, &config.prefix)),
                _ => redis::Redis::open(&url, &config.prefix),
            };
            match made {
                Ok(b) => {
                    if let Err(e) = b.ping().await {
                        problems.push(e);
                    }
                    Box::new(b)
                }
                Err(e) => return (None, vec![e]),
            }
        }
    };
    tracing::info!("kv: {}", backend.describe());
    let store = KvStore {
        backend,
        max_key_bytes: config.max_key_bytes,
        max_value_bytes: config.max_value_bytes,
        max_keys: config.max_keys,
    };
    (Some(Arc::new(store)), problems)
}

impl KvStore {
    fn check_key(&self, key: &str) -> Result<()> {
        if key.is_empty() {
            return Err(KvError::Invalid("the key is empty".into()));
        }
        if key.len() > self.max_key_bytes {
            return Err(KvError::TooLarge(format!(
                "key of {} bytes exceeds the limit of {} bytes",
                key.len(),
                self.max_key_bytes
            )));
        }
        Ok(())
    }

    pub async fn get(&self, ns: &str, key: &str) -> Result<Option<Vec<u8>>> {
        self.check_key(key)?;
        self.backend.get(ns, key).await
    }

    pub async fn set(
        &self,
        ns: &str,
        key: &str,
        value: Vec<u8>,
        ttl_ms: Option<u64>,
    ) -> Result<()> {
        self.set_capped(ns, key, value, ttl_ms, self.max_keys).await
    }

    /// As `set`, with at most `max_keys` (and never more than `[kv]
    /// max_keys`) live keys in `ns`.
    async fn set_capped(
        &self,
        ns: &str,
        key: &str,
        value: Vec<u8>,
        ttl_ms: Option<u64>,
        max_keys: u64,
    ) -> Result<()> {
        self.check_key(key)?;
        if value.len() > self.max_value_bytes {
            return Err(KvError::TooLarge(format!(
                "value of {} bytes exceeds the limit of {} bytes",
                value.len(),
                self.max_value_bytes
            )));
        }
        match ttl_ms {
            Some(0) => return Err(KvError::Invalid("ttl-ms must be at least 1".into())),
            Some(t) if t > MAX_TTL_MS => {
                return Err(KvError::Invalid(format!(
                    "ttl-ms must be at most {MAX_TTL_MS}"
                )));
            }
            _ => {}
        }
        let max_keys = max_keys.clamp(1, self.max_keys);
        self.backend.set(ns, key, value, ttl_ms, max_keys).await
    }

    pub async fn delete(&self, ns: &str, key: &str) -> Result<()> {
        self.check_key(key)?;
        self.backend.delete(ns, key).await
    }

    pub async fn increment(&self, ns: &str, key: &str, delta: i64) -> Result<i64> {
        self.check_key(key)?;
        self.backend.increment(ns, key, delta, self.max_keys).await
    }
}

/// The host's own use of the store, in namespaces of its own: a host
/// namespace holds a `/`, which no plugin's name (a file stem) has, so no
/// guest reaches it. Bounds and `max_keys` apply as to a plugin.
impl KvStore {
    pub async fn host_get(&self, ns: &str, key: &str) -> Result<Option<Vec<u8>>> {
        debug_assert!(ns.contains('/'), "host namespaces hold a '/'");
        self.get(ns, key).await
    }

    pub async fn host_set(
        &self,
        ns: &str,
        key: &str,
        value: Vec<u8>,
        ttl_ms: Option<u64>,
    ) -> Result<()> {
        debug_assert!(ns.contains('/'), "host namespaces hold a '/'");
        self.set(ns, key, value, ttl_ms).await
    }

    pub async fn host_delete(&self, ns: &str, key: &str) -> Result<()> {
        debug_assert!(ns.contains('/'), "host namespaces hold a '/'");
        self.delete(ns, key).await
    }

    /// The live value of `key`, deleted in the same step (single use).
    pub async fn host_take(&self, ns: &str, key: &str) -> Result<Option<Vec<u8>>> {
        debug_assert!(ns.contains('/'), "host namespaces hold a '/'");
        self.check_key(key)?;
        self.backend.take(ns, key).await
    }

    /// Holds `key` for `ttl_ms` unless someone holds it: whether this did
    /// (a lock across processes sharing the store; released by deleting it).
    pub async fn host_claim(&self, ns: &str, key: &str, ttl_ms: u64) -> Result<bool> {
        debug_assert!(ns.contains('/'), "host namespaces hold a '/'");
        self.check_key(key)?;
        self.backend.claim(ns, key, b"1".to_vec(), ttl_ms).await
    }

    /// The live keys of `ns`, at most `limit` (the host's own listings:
    /// personal tokens).
    pub async fn host_keys(&self, ns: &str, limit: usize) -> Result<Vec<String>> {
        debug_assert!(ns.contains('/'), "host namespaces hold a '/'");
        self.backend.keys(ns, limit).await
    }

    /// As [`KvStore::host_set`], with at most `max_keys` live keys in `ns`
    /// (a write adding one more fails with `quota`).
    pub async fn host_set_capped(
        &self,
        ns: &str,
        key: &str,
        value: Vec<u8>,
        ttl_ms: Option<u64>,
        max_keys: u64,
    ) -> Result<()> {
        debug_assert!(ns.contains('/'), "host namespaces hold a '/'");
        self.set_capped(ns, key, value, ttl_ms, max_keys).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[tokio::test]
    async fn bounds_are_typed_errors_before_the_backend() {
        let dir = std::env::temp_dir().join(format!("hangar-kv-bounds-{}", uuid::Uuid::new_v4()));
        let config = KvConfig {
            max_key_bytes: 4,
            max_value_bytes: 8,
            ..KvConfig::default()
        };
        let (store, problems) = open(&config, &dir, None).await;
        assert!(problems.is_empty(), "{problems:?}");
        let store = store.unwrap();
        let too_large = |r: Result<()>| matches!(r, Err(KvError::TooLarge(_)));
        assert!(too_large(store.set("p", "abcde", vec![], None).await));
        assert!(too_large(store.set("p", "k", vec![0; 9], None).await));
        assert!(matches!(store.get("p", "").await, Err(KvError::Invalid(_))));
        let zero = store.set("p", "k", vec![1], Some(0)).await;
        assert!(matches!(zero, Err(KvError::Invalid(_))));
        store.set("p", "k", vec![0; 8], Some(60_000)).await.unwrap();
        std::fs::remove_dir_all(dir).ok();
    }

    #[tokio::test]
    async fn a_claim_is_held_by_one_until_it_is_deleted_or_expires() {
        let dir = std::env::temp_dir().join(format!("hangar-kv-claim-{}", uuid::Uuid::new_v4()));
        let (store, _) = open(&KvConfig::default(), &dir, None).await;
        let store = store.unwrap();
        let ns = "host/claims";
        assert!(store.host_claim(ns, "row", 60_000).await.unwrap());
        assert!(!store.host_claim(ns, "row", 60_000).await.unwrap());
        assert!(store.host_claim(ns, "other", 60_000).await.unwrap());
        store.host_delete(ns, "row").await.unwrap();
        assert!(store.host_claim(ns, "row", 100).await.unwrap());
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
        assert!(store.host_claim(ns, "row", 60_000).await.unwrap());
        let mut keys = store.host_keys(ns, 10).await.unwrap();
        keys.sort();
        assert_eq!(keys, ["other", "row"]);
        std::fs::remove_dir_all(dir).ok();
    }
}
