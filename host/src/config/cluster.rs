//! `[cluster]`: several Hangar replicas behind one load balancer, sharing
//! per-client state in one Redis server.

use serde::Deserialize;

/// `[cluster] redis = "redis://127.0.0.1:6379"`. When set, 2025-11-25
/// sessions, cancellations, answers to server-to-client requests,
/// rate-limit counters, kv (unless `[kv]` says otherwise) and a second tier
/// of the DB result cache live in that Redis, so any replica can serve any
/// request. Without it everything stays in the process.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// The Redis every replica shares.
    pub redis: String,
    /// What every Redis key and channel of the cluster starts with, so two
    /// clusters can share one Redis.
    #[serde(default = "default_prefix")]
    pub prefix: String,
}

fn default_prefix() -> String {
    "hangar:cluster".into()
}

impl ClusterConfig {
    /// What is wrong with the settings, if anything.
    pub fn check(&self) -> Result<(), String> {
        if self.prefix.is_empty() {
            return Err("[cluster] prefix must not be empty".into());
        }
        if !(self.redis.starts_with("redis://") || self.redis.starts_with("rediss://")) {
            return Err(format!(
                "[cluster] redis must be a redis:// or rediss:// URL, not {:?}",
                self.redis.split('@').next_back().unwrap_or_default()
            ));
        }
        Ok(())
    }
}
