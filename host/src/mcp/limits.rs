//! Client limits: what one client may hold open: long-lived streams
//! (`GET /mcp`, `subscriptions/listen`) and sessions, counted per client
//! address (an IPv6 /64, [`hangar_core::call::client_key`]) and per principal
//! (the bearer token's subject). `max_connections` is one budget for
//! everyone, and streams are exempt from timeouts: without these limits one
//! client opening streams would hold every connection and everyone else,
//! `/healthz` included, would be turned away.
//!
//! Past a cap the new stream or session is refused (429 with `Retry-After`
//! and a JSON-RPC error): nothing another client holds is evicted, and a
//! client's own sessions are not either — which one it still needs is the
//! client's to say (`DELETE /mcp`), or idleness (`session_timeout`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use axum::http::header::RETRY_AFTER;
use axum::response::Response;
use serde_json::{Value, json};

use super::jsonrpc::{self, RpcError};
use super::reply::json_response;

/// How long a refused client is asked to wait: a stream or session frees
/// up when the client closes one, not on a clock.
const RETRY_AFTER_SECS: u64 = 5;

/// What one client may hold open; `[server] max_*_per_client`.
pub struct ClientLimits {
    pub(super) streams: Counter,
    pub(super) sessions: Counter,
    pub(super) max_subscriptions: usize,
}

impl ClientLimits {
    pub fn new(max_streams: usize, max_sessions: usize, max_subscriptions: usize) -> ClientLimits {
        ClientLimits {
            streams: Counter::new("streams", max_streams),
            sessions: Counter::new("sessions", max_sessions),
            max_subscriptions: max_subscriptions.max(1),
        }
    }
}

impl Default for ClientLimits {
    fn default() -> ClientLimits {
        let d = hangar_config::ServerConfig::default();
        ClientLimits::new(
            d.max_streams_per_client,
            d.max_sessions_per_client,
            d.max_subscriptions_per_session,
        )
    }
}

/// The keys a request counts under: its client address, and its principal.
pub(super) fn keys(client: SocketAddr, subject: Option<&str>) -> Vec<String> {
    let mut keys = vec![format!("ip:{}", hangar_core::call::client_key(client.ip()))];
    if let Some(subject) = subject {
        keys.push(format!("sub:{subject}"));
    }
    keys
}

/// How many of one thing each key holds, at most `max` each.
pub(super) struct Counter {
    what: &'static str,
    max: usize,
    held: Arc<Mutex<HashMap<String, usize>>>,
}

impl Counter {
    fn new(what: &'static str, max: usize) -> Counter {
        Counter {
            what,
            max: max.max(1),
            held: Arc::default(),
        }
    }

    /// One more for every key in `keys`, or — when any of them holds `max`
    /// already — the refusal to answer.
    pub(super) fn take(&self, keys: Vec<String>) -> Result<Held, Refusal> {
        let mut held = self.held.lock().unwrap();
        if let Some(full) = keys
            .iter()
            .find(|k| held.get(*k).is_some_and(|n| *n >= self.max))
        {
            let by = if full.starts_with("sub:") {
                "principal"
            } else {
                "client address"
            };
            return Err(self.refusal(by));
        }
        for k in &keys {
            *held.entry(k.clone()).or_default() += 1;
        }
        Ok(Held {
            held: self.held.clone(),
            keys,
        })
    }

    /// The most each key may hold.
    pub(super) fn max(&self) -> usize {
        self.max
    }

    /// The refusal for a key (a `by`) at the cap.
    pub(super) fn refusal(&self, by: &str) -> Refusal {
        Refusal {
            message: format!(
                "Too many open {}: at most {} per {by}; close one first",
                self.what, self.max
            ),
        }
    }

    /// How many `key` holds now.
    #[cfg(test)]
    fn count(&self, key: &str) -> usize {
        self.held.lock().unwrap().get(key).copied().unwrap_or(0)
    }
}

/// One stream or session counted against its keys until dropped.
pub struct Held {
    held: Arc<Mutex<HashMap<String, usize>>>,
    keys: Vec<String>,
}

impl Held {
    /// The keys it is counted under.
    pub fn keys(&self) -> &[String] {
        &self.keys
    }
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Held").field(&self.keys).finish()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap();
        for k in &self.keys {
            if let Some(n) = held.get_mut(k) {
                *n -= 1;
                if *n == 0 {
                    held.remove(k);
                }
            }
        }
    }
}

/// A cap was reached.
#[derive(Debug)]
pub(super) struct Refusal {
    pub(super) message: String,
}

impl Refusal {
    /// 429 with `Retry-After` and a JSON-RPC error naming the cap.
    pub(super) fn response(&self, id: &Value) -> Response {
        let error = RpcError {
            code: jsonrpc::SERVER_ERROR,
            message: self.message.clone(),
            data: Some(json!({ "retry_after_ms": RETRY_AFTER_SECS * 1000 })),
        };
        let mut response = json_response(
            StatusCode::TOO_MANY_REQUESTS,
            jsonrpc::error_body(id, &error),
        );
        response
            .headers_mut()
            .insert(RETRY_AFTER, RETRY_AFTER_SECS.into());
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_at_its_cap_is_refused_until_one_is_dropped() {
        let c = Counter::new("streams", 2);
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let b: SocketAddr = "127.0.0.2:1".parse().unwrap();
        let one = c.take(keys(a, None)).unwrap();
        let _two = c.take(keys(a, None)).unwrap();
        assert!(c.take(keys(a, None)).is_err());
        // Another address has a cap of its own.
        let _other = c.take(keys(b, None)).unwrap();
        drop(one);
        let _three = c.take(keys(a, None)).unwrap();
        assert_eq!(c.count("ip:127.0.0.1"), 2);
    }

    #[test]
    fn a_principal_is_capped_across_addresses_and_a_refusal_takes_nothing() {
        let c = Counter::new("sessions", 2);
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let b: SocketAddr = "[2001:db8::1]:1".parse().unwrap();
        let first = c.take(keys(a, Some("alice"))).unwrap();
        let second = c.take(keys(b, Some("alice"))).unwrap();
        let refused = c.take(keys("[2001:db8::2]:1".parse().unwrap(), Some("alice")));
        assert!(refused.unwrap_err().message.contains("per principal"));
        // The refused request counted for nothing: its /64 holds one.
        assert_eq!(c.count("ip:2001:db8::"), 1);
        drop((first, second));
        assert_eq!(c.count("sub:alice"), 0);
        assert!(c.held.lock().unwrap().is_empty());
    }
}
