//! Shared state of replicas (`[cluster]`): one Redis that every replica of
//! a Hangar deployment points at, so a request can land on any of them.
//!
//! [`Cluster`] owns the connection and the key space (`<prefix>:…`); each
//! concern is a small file of its own: [`sessions`] (2025-11-25 sessions
//! with a TTL), [`bus`] (pub/sub: cancellations and answers reaching the
//! replica that runs the call), [`rate`] (rate-limit counters, one GCRA
//! script) and [`cache`] (the second tier of the DB result cache).
//!
//! It sits below every other layer: it speaks Redis and plain values, and
//! knows nothing of MCP, calls or the catalog. A failure is a
//! [`ClusterError`]; callers fall back to what they hold in-process and the
//! replica reports itself degraded ([`Cluster::status`]).

pub mod bus;
pub mod cache;
pub mod link;
pub mod rate;
pub mod sessions;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis::FromRedisValue;
use redis::aio::ConnectionManager;
use serde::Serialize;

use crate::config::ClusterConfig;
use link::RedisLink;

/// How long one Redis request may take before the replica stops waiting and
/// falls back to what it holds in-process.
const TIMEOUT: Duration = Duration::from_millis(1500);

/// Why a shared-state operation did not happen (Redis down or refusing).
#[derive(Debug, Clone)]
pub struct ClusterError(pub String);

impl std::fmt::Display for ClusterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ClusterError {}

pub type Result<T> = std::result::Result<T, ClusterError>;

/// The connection to the shared Redis and the cluster's key space.
pub struct Cluster {
    /// The connection, shared with kv when kv lives in this Redis.
    link: Arc<RedisLink>,
    prefix: String,
    /// This replica's id: what `/healthz` shows, and how bus messages say
    /// who sent them.
    node: String,
    /// Whether the last request to Redis was answered.
    reachable: AtomicBool,
    rate: redis::Script,
}

/// What `/healthz` shows under `cluster`.
#[derive(Debug, Serialize)]
pub struct ClusterStatus {
    pub node: String,
    pub redis: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Cluster {
    /// Parses the URL; connects on first use (a Redis that is down at start
    /// does not stop the replica).
    pub fn open(config: &ClusterConfig) -> anyhow::Result<Arc<Cluster>> {
        let link = RedisLink::open(config.redis.as_str(), TIMEOUT, TIMEOUT)
            .map_err(|e| anyhow::anyhow!("[cluster] redis is not a Redis URL ({e:?})"))?;
        Ok(Arc::new(Cluster {
            link,
            prefix: config.prefix.clone(),
            node: uuid::Uuid::new_v4().simple().to_string()[..12].to_string(),
            reachable: AtomicBool::new(true),
            rate: redis::Script::new(rate::GCRA),
        }))
    }

    /// The connection to the shared Redis, for another user of the same
    /// server (kv when `[kv]` names no other), so the process holds one.
    pub fn link(&self) -> &Arc<RedisLink> {
        &self.link
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    /// `<prefix>:<part>`.
    fn key(&self, part: &str) -> String {
        format!("{}:{part}", self.prefix)
    }

    /// Whether the last request reached Redis (no round trip).
    pub fn reachable(&self) -> bool {
        self.reachable.load(Ordering::Relaxed)
    }

    /// Sends `PING` now: what `/healthz` reports.
    pub async fn status(&self) -> ClusterStatus {
        let pong: Result<String> = self.query(redis::cmd("PING")).await;
        ClusterStatus {
            node: self.node.clone(),
            redis: if pong.is_ok() { "ok" } else { "unreachable" },
            error: pong.err().map(|e| e.0),
        }
    }

    /// The shared connection (see [`RedisLink::connection`]).
    async fn connection(&self) -> Result<ConnectionManager> {
        self.link.connection().await.map_err(ClusterError)
    }

    /// `host:port` of the shared Redis, for messages.
    fn addr(&self) -> &str {
        self.link.addr()
    }

    fn error(&self, e: redis::RedisError) -> ClusterError {
        ClusterError(format!("redis at {}: {e}", self.addr()))
    }

    /// Records whether Redis answered; says so in the log when it changes.
    fn mark<T>(&self, outcome: Result<T>) -> Result<T> {
        let ok = outcome.is_ok();
        if self.reachable.swap(ok, Ordering::Relaxed) != ok {
            match &outcome {
                Ok(_) => tracing::info!(redis = %self.addr(), "cluster: redis reachable again"),
                Err(e) => tracing::warn!("cluster: {e}; serving degraded (in-process state only)"),
            }
        }
        outcome
    }

    /// One command, bounded by [`TIMEOUT`].
    async fn query<T: FromRedisValue>(&self, cmd: redis::Cmd) -> Result<T> {
        let outcome = async {
            let mut con = self.connection().await?;
            match tokio::time::timeout(TIMEOUT, cmd.query_async::<T>(&mut con)).await {
                Ok(Ok(v)) => Ok(v),
                Ok(Err(e)) => Err(self.error(e)),
                Err(_) => Err(ClusterError(format!("redis at {}: no answer", self.addr()))),
            }
        }
        .await;
        self.mark(outcome)
    }

    /// Several commands in one round trip (`MULTI`/`EXEC`), bounded by [`TIMEOUT`].
    async fn pipe<T: FromRedisValue>(&self, pipe: redis::Pipeline) -> Result<T> {
        let outcome = async {
            let mut con = self.connection().await?;
            match tokio::time::timeout(TIMEOUT, pipe.query_async::<T>(&mut con)).await {
                Ok(Ok(v)) => Ok(v),
                Ok(Err(e)) => Err(self.error(e)),
                Err(_) => Err(ClusterError(format!("redis at {}: no answer", self.addr()))),
            }
        }
        .await;
        self.mark(outcome)
    }

    /// A Lua script (`EVALSHA`, loaded on first use), bounded by [`TIMEOUT`].
    async fn script<T: FromRedisValue>(
        &self,
        invocation: redis::ScriptInvocation<'_>,
    ) -> Result<T> {
        let outcome = async {
            let mut con = self.connection().await?;
            match tokio::time::timeout(TIMEOUT, invocation.invoke_async::<T>(&mut con)).await {
                Ok(Ok(v)) => Ok(v),
                Ok(Err(e)) => Err(self.error(e)),
                Err(_) => Err(ClusterError(format!("redis at {}: no answer", self.addr()))),
            }
        }
        .await;
        self.mark(outcome)
    }
}
