//! One connection to a Redis server, made on first use: what the cluster
//! and the kv store's Redis backend both speak through.
//!
//! [`RedisLink`] owns the client and its `ConnectionManager`, so a process
//! whose kv lives in the cluster's Redis (`[cluster]` without `[kv]`) holds
//! one manager for both rather than two to the same server. It lives here,
//! in the lowest layer, because the backends above (`wasm::kv`) may name
//! `cluster` but not the other way round.

use std::sync::Arc;
use std::time::Duration;

use redis::Client;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::OnceCell;

/// A Redis server and the one connection manager to it.
pub struct RedisLink {
    client: Client,
    manager: OnceCell<ConnectionManager>,
    /// `host:port`, never the credentials, for messages.
    addr: String,
    /// How long connecting, and then each request, may take.
    timeout: Duration,
    /// How long making the manager may take in all (it retries once).
    connect_within: Duration,
}

impl RedisLink {
    /// Parses the URL; connects on first use. The error is Redis's own: the
    /// caller says which setting held the URL, without quoting it (it may
    /// hold a password).
    pub fn open(
        url: &str,
        timeout: Duration,
        connect_within: Duration,
    ) -> Result<Arc<RedisLink>, redis::RedisError> {
        let client = Client::open(url)?;
        let addr = client.get_connection_info().addr().to_string();
        Ok(Arc::new(RedisLink {
            client,
            manager: OnceCell::new(),
            addr,
            timeout,
            connect_within,
        }))
    }

    /// The client, for what a manager does not carry (pub/sub).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// `host:port`, for messages.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The shared connection, made on first use and retried on each call
    /// until made; after that it reconnects by itself. The error is a
    /// message naming the server (`redis at host:port: …`).
    pub async fn connection(&self) -> Result<ConnectionManager, String> {
        let connect = || async {
            let config = ConnectionManagerConfig::new()
                .set_connection_timeout(Some(self.timeout))
                .set_response_timeout(Some(self.timeout))
                .set_number_of_retries(1);
            let made = ConnectionManager::new_with_config(self.client.clone(), config);
            match tokio::time::timeout(self.connect_within, made).await {
                Ok(Ok(m)) => Ok(m),
                Ok(Err(e)) => Err(format!("redis at {}: {e}", self.addr)),
                Err(_) => Err(format!("redis at {}: cannot connect", self.addr)),
            }
        };
        self.manager.get_or_try_init(connect).await.cloned()
    }
}
