//! What an upstream says outside any call that Hangar acts on: its lists
//! changed (a refresh is woken), a watched resource was updated (announced
//! to Hangar's sessions, which pass it to those subscribed). Who watches
//! what, and asking the upstream for updates, is `updates`.
//!
//! The upstream is a peer like any other: an update for a URI nobody here
//! watches is dropped, and one URI is announced at most every
//! [`MIN_INTERVAL`], however often it is said.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use hangar_core::call::ResourceChanges;

/// The least time between two announcements of one URI's update.
const MIN_INTERVAL: Duration = Duration::from_millis(250);

/// The most URIs watched at one upstream (each client session holds at
/// most `max_subscriptions_per_session`; this bounds them all).
const MAX_WATCHED: usize = 4096;

/// What an upstream says outside any call that Hangar acts on, and the
/// URIs whose updates are passed on.
pub(super) struct Heard {
    pub(super) refresh: Arc<tokio::sync::Notify>,
    /// Set once something keeps the standalone stream open (HTTP).
    pub(super) listening: std::sync::atomic::AtomicBool,
    /// The watched URIs, each with when its update was last announced.
    watched: Mutex<HashMap<String, Option<Instant>>>,
    changes: ResourceChanges,
}

impl Heard {
    pub(super) fn new(changes: ResourceChanges) -> Arc<Heard> {
        Arc::new(Heard {
            refresh: Arc::new(tokio::sync::Notify::new()),
            listening: std::sync::atomic::AtomicBool::new(false),
            watched: Mutex::default(),
            changes,
        })
    }

    /// Acts on one notification; false when it is not one of these.
    pub(super) fn note(&self, message: &Value) -> bool {
        match message.get("method").and_then(Value::as_str) {
            Some(
                "notifications/tools/list_changed"
                | "notifications/resources/list_changed"
                | "notifications/prompts/list_changed",
            ) => {
                self.refresh.notify_one();
                true
            }
            Some("notifications/resources/updated") => {
                if let Some(uri) = message.pointer("/params/uri").and_then(Value::as_str) {
                    self.updated(uri);
                }
                true
            }
            _ => false,
        }
    }

    /// Announces `uri`'s update if it is watched and was not announced
    /// within [`MIN_INTERVAL`].
    fn updated(&self, uri: &str) {
        {
            let mut watched = self.watched.lock().expect("watched lock");
            let Some(last) = watched.get_mut(uri) else {
                return;
            };
            let now = Instant::now();
            if last.is_some_and(|at| now.duration_since(at) < MIN_INTERVAL) {
                return;
            }
            *last = Some(now);
        }
        self.changes.updated(uri);
    }

    /// Starts watching `uri`: true when it was not watched yet.
    pub(super) fn watch(&self, uri: &str) -> Result<bool, String> {
        let mut watched = self.watched.lock().expect("watched lock");
        if watched.contains_key(uri) {
            return Ok(false);
        }
        if watched.len() >= MAX_WATCHED {
            return Err(format!(
                "at most {MAX_WATCHED} of its resources can be watched"
            ));
        }
        watched.insert(uri.to_string(), None);
        Ok(true)
    }

    pub(super) fn unwatch(&self, uri: &str) {
        self.watched.lock().expect("watched lock").remove(uri);
    }

    pub(super) fn watched(&self) -> Vec<String> {
        (self.watched.lock().expect("watched lock").keys())
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[tokio::test]
    async fn only_watched_uris_are_announced_and_not_too_often() {
        let changes = ResourceChanges::default();
        let mut rx = changes.subscribe();
        let heard = Heard::new(changes);
        let update = |uri: &str| json!({ "method": "notifications/resources/updated", "params": { "uri": uri } });
        assert!(heard.note(&update("test://a")));
        assert!(rx.try_recv().is_err(), "not watched: dropped");
        assert_eq!(heard.watch("test://a"), Ok(true));
        assert_eq!(heard.watch("test://a"), Ok(false));
        heard.note(&update("test://a"));
        heard.note(&update("test://a"));
        assert!(
            matches!(rx.try_recv(), Ok(hangar_core::call::Change::Updated(u)) if u == "test://a")
        );
        assert!(
            rx.try_recv().is_err(),
            "the second within the interval is dropped"
        );
        assert!(!heard.note(&json!({ "method": "notifications/message" })));
        assert!(heard.note(&json!({ "method": "notifications/prompts/list_changed" })));
    }
}
