//! The result cache of DB tools and resources: keyed by a SHA-256 of the
//! name, statement and bound values; entries expire after the TTL. Memory
//! is bounded by bytes, not entries: each entry weighs about what its rows
//! take, the cache evicts the least used past `max_bytes`, and a result
//! larger than `max_entry_bytes` is served but not kept.
//!
//! With `[cluster]`, a miss here is looked up in the replicas' shared Redis
//! (the second tier, `hangar_core::cluster::cache`) before the database is asked;
//! the tool does that ([`super::DbTool`]) and counts its hits here.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use quick_cache::Weighter;
use quick_cache::sync::Cache;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// What one entry costs besides its rows: key, timestamps, table slots.
const ENTRY_OVERHEAD: u64 = 128;

/// A SHA-256 of what the result depends on: fixed size, whatever the
/// arguments, and no two argument lists share one.
pub type Key = [u8; 32];

/// What every key of one tool's results starts with, its name and
/// statement, already hashed: a call hashes only its bound values, on a
/// copy of this state (the name and statement alone fill a SHA-256 block).
#[derive(Clone)]
pub struct KeyPrefix(Sha256);

impl KeyPrefix {
    pub fn new(name: &str, sql: &str) -> KeyPrefix {
        let mut h = Sha256::new();
        for part in [name, sql] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
        KeyPrefix(h)
    }

    /// The key of the result of a call with `params`: the name, statement
    /// and values, each length-prefixed so no two lists run together.
    pub fn key(&self, params: &[Value]) -> Key {
        let mut h = self.0.clone();
        let values = serde_json::to_vec(params).expect("values serialize");
        h.update((values.len() as u64).to_le_bytes());
        h.update(&values);
        h.finalize().into()
    }
}

pub struct ResultCache<T> {
    ttl: Duration,
    max_entry_bytes: u64,
    entries: Cache<Key, Entry<T>, ByWeight>,
    hits: AtomicU64,
    misses: AtomicU64,
    /// Misses here served by the shared tier (`None`: there is none).
    shared_hits: Option<AtomicU64>,
}

/// A cached result, when it expires, and what it weighs.
pub struct Entry<T> {
    expires: Instant,
    weight: u64,
    value: Arc<T>,
}

impl<T> Clone for Entry<T> {
    fn clone(&self) -> Self {
        Entry {
            expires: self.expires,
            weight: self.weight,
            value: self.value.clone(),
        }
    }
}

#[derive(Clone)]
pub struct ByWeight;

impl<T> Weighter<Key, Entry<T>> for ByWeight {
    fn weight(&self, _key: &Key, entry: &Entry<T>) -> u64 {
        entry.weight
    }
}

/// Hit and miss counts, for `/healthz` and tests.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    /// Of the misses, those the shared tier (`[cluster]`) served.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared_hits: Option<u64>,
}

impl<T> ResultCache<T> {
    pub fn new(ttl: Duration, max_bytes: u64, max_entry_bytes: u64) -> ResultCache<T> {
        // The entry estimate only sizes the table; the weight is the bound.
        let estimated = (max_bytes / 4096).clamp(16, 65_536) as usize;
        ResultCache {
            ttl,
            max_entry_bytes,
            entries: Cache::with_weighter(estimated, max_bytes.max(1), ByWeight),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            shared_hits: None,
        }
    }

    /// Counts the hits of a shared second tier too.
    pub fn with_shared_tier(mut self) -> ResultCache<T> {
        self.shared_hits = Some(AtomicU64::new(0));
        self
    }

    /// A miss here that the shared tier served.
    pub fn shared_hit(&self) {
        if let Some(n) = &self.shared_hits {
            n.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    pub fn max_entry_bytes(&self) -> u64 {
        self.max_entry_bytes
    }

    /// The key of a result: name (of the tool or resource), statement and
    /// bound values, each length-prefixed so no two lists run together.
    #[cfg(test)]
    pub fn key(&self, name: &str, sql: &str, params: &[Value]) -> Key {
        KeyPrefix::new(name, sql).key(params)
    }

    /// A live entry; an expired one counts as a miss and is dropped.
    pub fn get(&self, key: &Key) -> Option<Arc<T>> {
        match self.entries.get(key) {
            Some(entry) if Instant::now() < entry.expires => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                Some(entry.value)
            }
            stale => {
                if stale.is_some() {
                    self.entries.remove(key);
                }
                self.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Keeps `value`, which takes about `bytes`, unless it is over the
    /// entry limit.
    pub fn put(&self, key: Key, value: Arc<T>, bytes: u64) {
        if bytes > self.max_entry_bytes {
            return;
        }
        let entry = Entry {
            expires: Instant::now() + self.ttl,
            weight: bytes.saturating_add(ENTRY_OVERHEAD),
            value,
        };
        self.entries.insert(key, entry);
    }

    /// Drops every entry (state sync: a write made them stale).
    pub fn clear(&self) {
        self.entries.clear();
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            shared_hits: self.shared_hits.as_ref().map(|n| n.load(Ordering::Relaxed)),
        }
    }

    #[cfg(test)]
    fn weight(&self) -> u64 {
        self.entries.weight()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn memory_is_bounded_by_bytes_not_entries() {
        let cache = ResultCache::<String>::new(Duration::from_secs(60), 64 * 1024, 8 * 1024);
        for i in 0..10_000 {
            let key = cache.key("t", "SELECT", &[json!(i)]);
            cache.put(key, Arc::new("x".repeat(1000)), 1000);
        }
        assert!(cache.weight() <= 64 * 1024, "{}", cache.weight());
        // The most recent entry is there.
        assert!(
            cache
                .get(&cache.key("t", "SELECT", &[json!(9_999)]))
                .is_some()
        );
    }

    #[test]
    fn a_result_over_the_entry_limit_is_not_kept() {
        let cache = ResultCache::<String>::new(Duration::from_secs(60), 1 << 20, 100);
        let key = cache.key("t", "SELECT", &[json!("big")]);
        cache.put(key, Arc::new("x".repeat(101)), 101);
        assert!(cache.get(&key).is_none());
        cache.put(key, Arc::new("x".repeat(100)), 100);
        assert!(cache.get(&key).is_some());
    }

    #[test]
    fn keys_are_fixed_size_and_tell_arguments_apart() {
        let cache = ResultCache::<String>::new(Duration::from_secs(60), 1 << 20, 1 << 20);
        let huge = json!("a".repeat(1 << 20));
        assert_eq!(cache.key("t", "S", &[huge]).len(), 32);
        assert_ne!(
            cache.key("t", "S", &[json!("a"), json!("b")]),
            cache.key("t", "S", &[json!("a,b")])
        );
        assert_ne!(cache.key("ab", "c", &[]), cache.key("a", "bc", &[]));
        assert_ne!(
            cache.key("t", "S", &[json!(1)]),
            cache.key("t", "S", &[json!("1")])
        );
    }

    #[test]
    fn expired_entries_are_never_served() {
        let cache = ResultCache::<String>::new(Duration::ZERO, 1 << 20, 1 << 20);
        let key = cache.key("t", "S", &[]);
        cache.put(key, Arc::new("v".into()), 1);
        assert!(cache.get(&key).is_none());
        assert_eq!(cache.stats().misses, 1);
    }
}
