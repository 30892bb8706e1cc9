//! One connection to a Redis server or a Redis Cluster, made on first use:
//! what the cluster and the kv store's Redis backend both speak through.
//!
//! [`RedisLink`] owns the client and its one multiplexed [`Connection`], so
//! a process whose kv lives in the cluster's Redis (`[cluster]` without
//! `[kv]`) holds one connection for both rather than two to the same
//! server. It lives here, in the lowest layer, because the backends above
//! (`kv`) may name `cluster` but not the other way round.
//!
//! A Redis Cluster is spoken to through `redis`'s cluster client, which
//! routes each command by its key's slot and follows the cluster's
//! resharding; multi-key scripts and transactions must keep their keys in
//! one slot (hash tags). Pub/sub needs no routing: a `PUBLISH` on any node
//! of a Redis Cluster reaches the subscribers of every node, so a
//! subscription is a plain connection to one of the configured nodes
//! ([`RedisLink::subscribers`]).

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::{Client, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, TlsCertificates, Value};
use tokio::sync::OnceCell;

/// A Redis server or Redis Cluster and the one connection to it.
pub struct RedisLink {
    /// The Redis Cluster's client; `None`: one server, `subscribers[0]`.
    cluster: Option<ClusterClient>,
    /// Plain clients: the server, or each configured node of a Redis
    /// Cluster (for pub/sub, tried in turn).
    subscribers: Vec<Client>,
    connection: OnceCell<Connection>,
    /// `host:port` (the first node's for a Redis Cluster), never the
    /// credentials, for messages.
    addr: String,
    /// How long connecting, and then each request, may take.
    timeout: Duration,
    /// How long making the connection may take in all (it retries once).
    connect_within: Duration,
}

/// The connection every request goes through: a connection manager to one
/// server (it reconnects by itself) or a Redis Cluster connection (it
/// routes by slot and follows the cluster's topology). Cheap to clone.
#[derive(Clone)]
pub enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Single(c) => c.req_packed_command(cmd),
            Connection::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Connection::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(c) => c.get_db(),
            Connection::Cluster(c) => c.get_db(),
        }
    }
}

/// Where a link goes and how it is secured.
pub struct LinkTarget<'a> {
    /// One server's URL, or some nodes of a Redis Cluster.
    pub urls: &'a [String],
    pub cluster: bool,
    /// For `rediss://`: the roots to trust instead of the system's, and a
    /// client certificate. `None`: the system roots, no client certificate.
    pub tls: Option<TlsCertificates>,
}

/// Why the first connection failed, told apart: a setting that cannot work
/// (a wrong password, a certificate not trusted) stops the process at
/// start-up; a server that is down does not.
#[derive(Debug)]
pub struct ConnectError {
    pub message: String,
    pub misconfigured: bool,
}

impl RedisLink {
    /// One server, trusting the system roots for `rediss://`. Parses the
    /// URL; connects on first use. The error is Redis's own: the caller
    /// says which setting held the URL, without quoting it (it may hold a
    /// password).
    pub fn open(
        url: &str,
        timeout: Duration,
        connect_within: Duration,
    ) -> Result<Arc<RedisLink>, RedisError> {
        let urls = [url.to_string()];
        let target = LinkTarget {
            urls: &urls,
            cluster: false,
            tls: None,
        };
        RedisLink::open_target(&target, timeout, connect_within)
    }

    /// A server or a Redis Cluster, as `target` says; connects on first use.
    pub fn open_target(
        target: &LinkTarget<'_>,
        timeout: Duration,
        connect_within: Duration,
    ) -> Result<Arc<RedisLink>, RedisError> {
        let subscribers = target
            .urls
            .iter()
            .map(|url| match &target.tls {
                Some(certs) => Client::build_with_tls(url.as_str(), certs.clone()),
                None => Client::open(url.as_str()),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let Some(first) = subscribers.first() else {
            return Err(RedisError::from((
                ErrorKind::InvalidClientConfig,
                "no Redis URL",
            )));
        };
        let addr = first.get_connection_info().addr().to_string();
        let cluster = if target.cluster {
            let mut builder = ClusterClientBuilder::new(target.urls.iter().map(String::as_str))
                .connection_timeout(timeout)
                .response_timeout(timeout);
            if let Some(certs) = &target.tls {
                builder = builder.certs(certs.clone());
            }
            Some(builder.build()?)
        } else {
            None
        };
        Ok(Arc::new(RedisLink {
            cluster,
            subscribers,
            connection: OnceCell::new(),
            addr,
            timeout,
            connect_within,
        }))
    }

    /// Plain clients for pub/sub (see the module's doc).
    pub fn subscribers(&self) -> &[Client] {
        &self.subscribers
    }

    /// Whether this is a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        self.cluster.is_some()
    }

    /// `host:port`, for messages.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The shared connection, made on first use and retried on each call
    /// until made; after that it reconnects by itself. The error is a
    /// message naming the server (`redis at host:port: …`).
    pub async fn connection(&self) -> Result<Connection, String> {
        self.connected().await.map_err(|e| e.message)
    }

    /// Connects (if not yet) and sends `PING`: whether the settings work.
    /// A Redis Cluster node named by a single URL is a setting that cannot
    /// work too (keys of other nodes' slots would fail one by one).
    pub async fn probe(&self) -> Result<(), ConnectError> {
        let mut con = self.connected().await?;
        let ping = redis::cmd("PING");
        match tokio::time::timeout(self.timeout, ping.query_async::<Value>(&mut con)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(self.failure(e)),
            Err(_) => {
                return Err(ConnectError {
                    message: format!("redis at {}: no answer", self.addr),
                    misconfigured: false,
                });
            }
        }
        if self.is_cluster() {
            return Ok(());
        }
        let info = redis::cmd("INFO").arg("cluster").clone();
        // A server that hides INFO (ACL) is taken for what it was named.
        let text = match tokio::time::timeout(self.timeout, info.query_async(&mut con)).await {
            Ok(Ok(text)) => text,
            _ => String::new(),
        };
        if text.contains("cluster_enabled:1") {
            return Err(ConnectError {
                message: format!(
                    "redis at {} is a node of a Redis Cluster: list its nodes as \
                     redis = [\"redis://…\", …]",
                    self.addr
                ),
                misconfigured: true,
            });
        }
        Ok(())
    }

    async fn connected(&self) -> Result<Connection, ConnectError> {
        self.connection
            .get_or_try_init(|| self.connect())
            .await
            .cloned()
    }

    async fn connect(&self) -> Result<Connection, ConnectError> {
        let made = async {
            match &self.cluster {
                None => {
                    let config = ConnectionManagerConfig::new()
                        .set_connection_timeout(Some(self.timeout))
                        .set_response_timeout(Some(self.timeout))
                        .set_number_of_retries(1);
                    ConnectionManager::new_with_config(self.subscribers[0].clone(), config)
                        .await
                        .map(Connection::Single)
                }
                Some(client) => client.get_async_connection().await.map(Connection::Cluster),
            }
        };
        match tokio::time::timeout(self.connect_within, made).await {
            Ok(Ok(c)) => Ok(c),
            Ok(Err(e)) => Err(self.failure(e)),
            Err(_) => Err(ConnectError {
                message: format!("redis at {}: cannot connect", self.addr),
                misconfigured: false,
            }),
        }
    }

    fn failure(&self, e: RedisError) -> ConnectError {
        ConnectError {
            misconfigured: misconfigured(&e),
            message: format!("redis at {}: {e}", self.addr),
        }
    }
}

/// Whether `e` says a setting is wrong rather than the server away: bad
/// credentials, missing rights, a TLS peer not trusted (or no TLS where
/// TLS was asked), a TLS server refusing this client (no or a wrong client
/// certificate), a Redis Cluster spoken to as one server or the reverse.
fn misconfigured(e: &RedisError) -> bool {
    if matches!(
        e.kind(),
        ErrorKind::AuthenticationFailed | ErrorKind::InvalidClientConfig
    ) || matches!(e.code(), Some("NOAUTH" | "WRONGPASS" | "NOPERM"))
    {
        return true;
    }
    // rustls reports a failed handshake as an I/O error of kind InvalidData.
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::InvalidData
        {
            return true;
        }
        source = err.source();
    }
    // A server that wants a client certificate says so with an alert after
    // the handshake, on the first read.
    let text = e.to_string();
    [
        "certificate",
        "fatal alert",
        "cluster support disabled",
        "MOVED",
    ]
    .iter()
    .any(|hint| text.contains(hint))
}
