//! Messages between replicas over Redis pub/sub (channel `<prefix>:bus`):
//! a `notifications/cancelled`, or a client's answer to a server-to-client
//! request, that landed on a replica which does not run the call is
//! published, and the replica that does run it acts on it.
//!
//! Delivery is at most once and only to replicas subscribed at that
//! moment, as pub/sub is: a replica that is down has no call to cancel.
//!
//! On a Redis Cluster the channel is an ordinary (not sharded) one: a
//! `PUBLISH` sent to any node reaches the subscribers of every node, so each
//! replica subscribes on one configured node, and on the next one when that
//! subscription breaks.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Cluster, Result};

/// What one replica tells the others.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum BusMessage {
    /// Cancel the call with JSON-RPC id `request` of session `session`.
    Cancel { session: String, request: Value },
    /// The client's response `id` (a `result` or an `error`) to a question
    /// the server asked within `session`.
    Answer {
        session: Option<String>,
        id: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<Value>,
    },
    /// A guest on replica `from` announced that resource `uri` changed:
    /// the other replicas tell their subscribed sessions' streams.
    Updated { uri: String, from: String },
}

/// Receives every message some replica published.
pub type Handler = Arc<dyn Fn(BusMessage) + Send + Sync>;

/// How long to wait before subscribing again after the subscription broke.
const RETRY: Duration = Duration::from_millis(500);

impl Cluster {
    fn channel(&self) -> String {
        self.key("bus")
    }

    /// Sends `message` to every replica (this one included); how many
    /// received it.
    pub async fn publish(&self, message: &BusMessage) -> Result<u64> {
        let payload = serde_json::to_string(message).expect("bus messages serialize");
        self.query(
            redis::cmd("PUBLISH")
                .arg(self.channel())
                .arg(payload)
                .clone(),
        )
        .await
    }

    /// Subscribes to the bus and hands each message to `handler`, for the
    /// life of the process, subscribing again whenever the connection drops.
    pub fn listen(self: &Arc<Self>, handler: Handler) {
        let cluster = self.clone();
        tokio::spawn(async move {
            for attempt in 0usize.. {
                if let Err(e) = cluster.receive(attempt, &handler).await {
                    tracing::debug!("cluster bus: {e}");
                }
                tokio::time::sleep(RETRY).await;
            }
        });
    }

    /// One subscription (on the `attempt`-th configured node, in turn),
    /// until its connection ends.
    async fn receive(&self, attempt: usize, handler: &Handler) -> Result<()> {
        let nodes = self.link.subscribers();
        let mut pubsub = nodes[attempt % nodes.len()]
            .get_async_pubsub()
            .await
            .map_err(|e| self.error(e))?;
        pubsub
            .subscribe(self.channel())
            .await
            .map_err(|e| self.error(e))?;
        let mut messages = pubsub.into_on_message();
        while let Some(msg) = messages.next().await {
            match serde_json::from_slice::<BusMessage>(msg.get_payload_bytes()) {
                Ok(message) => handler(message),
                Err(e) => tracing::debug!("cluster bus: a message not understood: {e}"),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn messages_round_trip() {
        for m in [
            BusMessage::Cancel {
                session: "s".into(),
                request: json!(7),
            },
            BusMessage::Answer {
                session: None,
                id: json!("hangar-1"),
                result: Some(json!({"action": "accept"})),
                error: None,
            },
            BusMessage::Updated {
                uri: "file:///x".into(),
                from: "n1".into(),
            },
        ] {
            let text = serde_json::to_string(&m).unwrap();
            assert_eq!(serde_json::from_str::<BusMessage>(&text).unwrap(), m);
        }
    }
}
