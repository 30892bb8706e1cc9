//! Resource changes announced by guests (`client.resource-updated`), for the
//! surfaces that tell subscribed clients (`notifications/resources/updated`).

use tokio::sync::broadcast;

/// Changes waiting for a slow subscriber before the oldest are skipped.
const BACKLOG: usize = 1024;

/// The server-wide channel of changed resource URIs. Cloning shares it.
#[derive(Debug, Clone)]
pub struct ResourceChanges {
    tx: broadcast::Sender<String>,
}

impl Default for ResourceChanges {
    fn default() -> Self {
        ResourceChanges {
            tx: broadcast::channel(BACKLOG).0,
        }
    }
}

impl ResourceChanges {
    /// Announces that `uri` changed; nobody listening is fine.
    pub fn updated(&self, uri: &str) {
        let _ = self.tx.send(uri.to_string());
    }

    pub fn subscribe(&self) -> broadcast::Receiver<String> {
        self.tx.subscribe()
    }
}
