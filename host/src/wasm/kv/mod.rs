//! State: the `hangar:plugin/kv` import, a key-value store per plugin.
//!
//! The capability has the shape of [`super::http`]: `[kv]` is checked and
//! the backend opened once at load ([`open`], whose problems `hangar check`
//! reports), every call's `GuestState` holds a [`KvCall`] (the plugin's
//! namespace and the shared store), and [`link`] adds the host functions.
//!
//! This module owns what every backend shares: the bounds on key and value
//! sizes (checked here, before a backend sees a request) and the typed
//! errors. A backend owns its storage, TTLs and the `max_keys` count, which
//! it must check atomically with the write that adds a key:
//! [`embedded`] (SQLite under `cache_dir`, the default) and [`redis`].

mod embedded;
mod redis;

use std::path::Path;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::Deserialize;
use wasmtime::component::{HasSelf, Linker};

use super::bindings::tool::hangar::plugin::kv as wit;
pub use super::bindings::tool::hangar::plugin::kv::KvError;
use super::state::GuestState;
use crate::cluster::link::RedisLink;

/// `[kv]` in `hangar.toml`.
#[derive(Debug, Clone, Deserialize)]
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

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    #[default]
    Embedded,
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
/// The longest TTL a guest may ask for: about 100 years, in milliseconds.
const MAX_TTL_MS: u64 = 100 * 365 * 24 * 3600 * 1000;

impl KvConfig {
    /// The bounds, or what is wrong with them.
    fn check(&self) -> std::result::Result<(), String> {
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

/// What a backend stores. Keys and values arrive already bounded; `ns` is
/// the plugin's name, which the backend keeps apart from every other.
trait Backend: Send + Sync {
    fn get<'a>(&'a self, ns: &'a str, key: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>>>;
    /// Replaces the value and TTL; adding a key past `max_keys` is `quota`.
    fn set<'a>(
        &'a self,
        ns: &'a str,
        key: &'a str,
        value: Vec<u8>,
        ttl_ms: Option<u64>,
        max_keys: u64,
    ) -> BoxFuture<'a, Result<()>>;
    fn delete<'a>(&'a self, ns: &'a str, key: &'a str) -> BoxFuture<'a, Result<()>>;
    /// Atomic add on a decimal integer value; an absent key counts as 0 and
    /// is created without TTL (past `max_keys`: `quota`).
    fn increment<'a>(
        &'a self,
        ns: &'a str,
        key: &'a str,
        delta: i64,
        max_keys: u64,
    ) -> BoxFuture<'a, Result<i64>>;
    /// Where the data lives, for the log (no credentials).
    fn describe(&self) -> String;
}

type Result<T> = std::result::Result<T, KvError>;

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
            let url = match crate::db::template::substitute_env(&config.url, &env) {
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

    async fn get(&self, ns: &str, key: &str) -> Result<Option<Vec<u8>>> {
        self.check_key(key)?;
        self.backend.get(ns, key).await
    }

    async fn set(&self, ns: &str, key: &str, value: Vec<u8>, ttl_ms: Option<u64>) -> Result<()> {
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

    async fn delete(&self, ns: &str, key: &str) -> Result<()> {
        self.check_key(key)?;
        self.backend.delete(ns, key).await
    }

    async fn increment(&self, ns: &str, key: &str, delta: i64) -> Result<i64> {
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

/// The kv side of one call: whose namespace, and the store (none when
/// `[kv]` could not be opened).
pub struct KvCall {
    plugin: Arc<str>,
    store: Option<Arc<KvStore>>,
}

impl KvCall {
    pub fn new(plugin: Arc<str>, store: Option<Arc<KvStore>>) -> KvCall {
        KvCall { plugin, store }
    }

    fn store(&self) -> Result<Arc<KvStore>> {
        self.store.clone().ok_or_else(|| {
            KvError::Unavailable("kv is not available: see the server's startup problems".into())
        })
    }

    /// Logs a backend failure for the operator; the guest gets the error.
    fn logged<T>(&self, op: &str, r: Result<T>) -> Result<T> {
        if let Err(KvError::Unavailable(why)) = &r {
            tracing::warn!(plugin = %self.plugin, "kv: {op} failed: {why}");
        }
        r
    }
}

impl wit::Host for KvCall {
    async fn get(&mut self, key: String) -> Result<Option<Vec<u8>>> {
        let r = self.store()?.get(&self.plugin, &key).await;
        self.logged("get", r)
    }

    async fn set(&mut self, key: String, value: Vec<u8>, ttl_ms: Option<u64>) -> Result<()> {
        let r = self.store()?.set(&self.plugin, &key, value, ttl_ms).await;
        self.logged("set", r)
    }

    async fn delete(&mut self, key: String) -> Result<()> {
        let r = self.store()?.delete(&self.plugin, &key).await;
        self.logged("delete", r)
    }

    async fn increment(&mut self, key: String, delta: i64) -> Result<i64> {
        let r = self.store()?.increment(&self.plugin, &key, delta).await;
        self.logged("increment", r)
    }
}

/// Adds the `hangar:plugin/kv` import to a linker; each call serves it from
/// its `GuestState`'s [`KvCall`].
pub fn link(linker: &mut Linker<GuestState>) -> anyhow::Result<()> {
    wit::add_to_linker::<GuestState, HasSelf<KvCall>>(linker, |s| &mut s.kv)
        .map_err(|e| anyhow::anyhow!("{e:?}"))
}

/// The human part of an error.
fn message(e: &KvError) -> String {
    match e {
        KvError::TooLarge(m)
        | KvError::Quota(m)
        | KvError::Unavailable(m)
        | KvError::Invalid(m) => m.clone(),
    }
}

/// Parses a stored value as the decimal integer `increment` works on.
fn parse_counter(value: &[u8]) -> Result<i64> {
    std::str::from_utf8(value)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or_else(|| KvError::Invalid("the value is not a decimal integer".into()))
}

/// `value + delta`, or `invalid` on overflow.
fn add(value: i64, delta: i64) -> Result<i64> {
    value
        .checked_add(delta)
        .ok_or_else(|| KvError::Invalid("increment would overflow a 64-bit integer".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

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
        let unavailable = KvCall::new("p".into(), None).store();
        assert!(matches!(unavailable, Err(KvError::Unavailable(_))));
        std::fs::remove_dir_all(dir).ok();
    }
}
