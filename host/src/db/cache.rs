//! The result cache of DB tools: keyed by tool, statement and bound values,
//! entries expire after the tool's TTL.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use quick_cache::sync::Cache;
use serde::Serialize;
use serde_json::Value;

use crate::pipeline::ToolResult;

/// Entries per tool before the least used are evicted.
const CAPACITY: usize = 10_000;

pub struct ResultCache {
    ttl: Duration,
    entries: Cache<String, (Instant, Arc<ToolResult>)>,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// Hit and miss counts, for `/healthz` and tests.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
}

impl ResultCache {
    pub fn new(ttl: Duration) -> ResultCache {
        ResultCache {
            ttl,
            entries: Cache::new(CAPACITY),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Tool name + a hash of the statement + the bound values.
    pub fn key(&self, tool: &str, sql: &str, params: &[Value]) -> String {
        let mut h = DefaultHasher::new();
        sql.hash(&mut h);
        let values = serde_json::to_string(params).expect("values serialize");
        format!("{tool}\u{0}{:016x}\u{0}{values}", h.finish())
    }

    /// A live entry; an expired one counts as a miss and is dropped.
    pub fn get(&self, key: &str) -> Option<Arc<ToolResult>> {
        match self.entries.get(key) {
            Some((expires, result)) if Instant::now() < expires => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                Some(result)
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

    pub fn put(&self, key: String, result: Arc<ToolResult>) {
        self.entries
            .insert(key, (Instant::now() + self.ttl, result));
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
        }
    }
}
