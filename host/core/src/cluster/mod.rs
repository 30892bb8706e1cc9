//! Shared state of replicas (`[cluster]`): one Redis that every replica of
//! a Hangar deployment points at, so a request can land on any of them.
//!
//! [`Cluster`] owns the connection (one Redis server, or a Redis Cluster:
//! see [`link`]) and the key space (`<prefix>:…`); each
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
use serde::Serialize;

use hangar_config::ClusterConfig;
use link::{Connection, LinkTarget, RedisLink};

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
    /// The first URL with `{{ env.X }}` substituted (it may hold a
    /// password): how kv knows it lives in this Redis. Never shown.
    first_url: String,
    prefix: String,
    /// This replica's id: what `/healthz` shows, and how bus messages say
    /// who sent them.
    node: String,
    /// Whether the last request to Redis was answered.
    reachable: AtomicBool,
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
    /// Substitutes `{{ env.X }}` in the URLs, reads the TLS files and parses
    /// the URLs; connects on first use (a Redis that is down at start does
    /// not stop the replica: see [`Cluster::probe`]). Errors name the
    /// setting, never a URL (it may hold a password).
    pub fn open(config: &ClusterConfig) -> anyhow::Result<Arc<Cluster>> {
        let env = |var: &str| std::env::var(var).ok();
        let urls = config
            .redis
            .urls()
            .iter()
            .map(|url| hangar_config::substitute_env(url, &env))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| anyhow::anyhow!("[cluster] redis: {e}"))?;
        let read = |key: &str, path: &std::path::Path| {
            std::fs::read(path)
                .map_err(|e| anyhow::anyhow!("[cluster] {key} {}: {e}", path.display()))
        };
        let tls = if config.ca_file.is_some() || config.client_cert.is_some() {
            let root_cert = config
                .ca_file
                .as_deref()
                .map(|p| read("ca_file", p))
                .transpose()?;
            let client_tls = match (&config.client_cert, &config.client_key) {
                (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
                    client_cert: read("client_cert", cert)?,
                    client_key: read("client_key", key)?,
                }),
                _ => None,
            };
            Some(redis::TlsCertificates {
                client_tls,
                root_cert,
            })
        } else {
            None
        };
        let target = LinkTarget {
            urls: &urls,
            cluster: config.redis.is_cluster(),
            tls,
        };
        let link = RedisLink::open_target(&target, TIMEOUT, TIMEOUT)
            // Redis's own message quotes no URL; `{e:?}` would not either,
            // but says less.
            .map_err(|e| anyhow::anyhow!("[cluster] redis: {e}"))?;
        Ok(Arc::new(Cluster {
            link,
            first_url: urls.into_iter().next().unwrap_or_default(),
            prefix: config.prefix.clone(),
            node: uuid::Uuid::new_v4().simple().to_string()[..12].to_string(),
            reachable: AtomicBool::new(true),
        }))
    }

    /// The connection to the shared Redis, for another user of the same
    /// server (kv when `[kv]` names no other), so the process holds one.
    pub fn link(&self) -> &Arc<RedisLink> {
        &self.link
    }

    /// The first URL as connected to (substituted), to compare with kv's.
    pub fn first_url(&self) -> &str {
        &self.first_url
    }

    /// Connects now and sends `PING`, at start-up: a setting that cannot
    /// work (a wrong password, an untrusted certificate, a Redis Cluster
    /// named as one server) is an error that stops the process; a Redis
    /// that does not answer yet is only logged (the replica serves
    /// degraded until it does).
    pub async fn probe(&self) -> anyhow::Result<()> {
        match self.link.probe().await {
            Ok(()) => {
                self.reachable.store(true, Ordering::Relaxed);
                Ok(())
            }
            Err(e) if e.misconfigured => Err(anyhow::anyhow!("[cluster] {}", e.message)),
            Err(e) => {
                self.reachable.store(false, Ordering::Relaxed);
                tracing::warn!(
                    "cluster: {}; serving degraded (in-process state only) until it answers",
                    e.message
                );
                Ok(())
            }
        }
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
    async fn connection(&self) -> Result<Connection> {
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
