//! Upstream sessions: one per client session (per principal without one),
//! opened on first use under the breaker, opened again once when the
//! upstream ended it (404: it restarted) and the call sent again
//! (`session_termination_retries`), closed when idle or past the cap.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use serde_json::Value;

use super::Upstream;
use super::client::{Client, Handshake, WireError};
use super::slot::{CATALOG_KEY, Slot, client_session_key};
use hangar_core::call::{AccessToken, CallError, ErrorKind};

/// Upstream sessions kept at once per upstream; past it the least recently
/// used is closed.
const MAX_SESSIONS: usize = 1024;

/// An upstream session unused this long is closed when another is opened.
const IDLE_SESSION: std::time::Duration = std::time::Duration::from_secs(30 * 60);

impl Upstream {
    /// Runs `op` in the session keyed `key` under the breaker (calls only):
    /// opens the session if needed, and opens a fresh one and runs `op`
    /// again, up to `session_termination_retries` times, when the upstream
    /// ended it.
    pub(super) async fn with_session<T, F, Fut>(
        &self,
        key: &str,
        traceparent: Option<&str>,
        capabilities: Value,
        bearer: Option<AccessToken>,
        op: F,
    ) -> Result<T, CallError>
    where
        F: Fn(Client, Handshake, u64) -> Fut,
        Fut: std::future::Future<Output = Result<T, WireError>>,
    {
        // The catalog's own listing is the breaker's probe: an open breaker
        // does not refuse it (it comes once per `refresh`), and its success
        // closes the breaker.
        if key != CATALOG_KEY
            && let Err(left) = self.breaker.admit()
        {
            return Err(self.error(
                ErrorKind::Failed,
                &format!(
                    "unavailable: circuit open after repeated failures, retrying in {}s",
                    left.as_secs().max(1)
                ),
            ));
        }
        let slot = self.slot(key);
        let retries = self.config.session_termination_retries;
        for attempt in 0..=retries {
            let outcome = async {
                let mut hs = {
                    let mut guard = slot.handshake.lock().await;
                    match &*guard {
                        Some(hs) => hs.clone(),
                        None => {
                            let hs = self
                                .client
                                .initialize(capabilities.clone(), traceparent, bearer.clone())
                                .await?;
                            *guard = Some(hs.clone());
                            hs
                        }
                    }
                };
                // The caller's token as it is now (an exchanged one is
                // renewed while the session lasts).
                hs.bearer = bearer.clone();
                let id = self.next_id.fetch_add(16, Ordering::Relaxed);
                op(self.client.clone(), hs, id).await
            }
            .await;
            match outcome {
                Ok(value) => {
                    self.breaker.success();
                    return Ok(value);
                }
                Err(WireError::SessionExpired) if attempt < retries => {
                    tracing::info!(upstream = %self.name, "upstream session expired (404); opening a new one and sending the request again");
                    *slot.handshake.lock().await = None;
                }
                Err(e) => {
                    if e.is_outage() && self.breaker.failure() {
                        tracing::warn!(upstream = %self.name, "upstream circuit breaker opened: {e}");
                    }
                    if e.is_outage() || e == WireError::SessionExpired {
                        // The next call starts afresh (the server may have restarted).
                        *slot.handshake.lock().await = None;
                    }
                    let kind = match e {
                        WireError::Timeout => ErrorKind::Limit,
                        _ => ErrorKind::Failed,
                    };
                    return Err(self.error(kind, &e.to_string()));
                }
            }
        }
        Err(self.error(
            ErrorKind::Failed,
            "the upstream ended its session again after session_termination_retries fresh ones",
        ))
    }

    /// Ends the upstream session of MCP session `session_id` (deleted or
    /// expired): the upstream is sent `DELETE` in the background, best effort.
    pub fn end_client_session(&self, session_id: &str) {
        let key = client_session_key(session_id);
        // With `auth`, the session's keys go on with its principal.
        let slots: Vec<Arc<Slot>> = {
            let mut sessions = self.sessions.lock().expect("sessions lock");
            let keys: Vec<String> = (sessions.keys())
                .filter(|k| {
                    **k == key
                        || k.strip_prefix(key.as_str())
                            .is_some_and(|r| r.starts_with('#'))
                })
                .cloned()
                .collect();
            keys.iter().filter_map(|k| sessions.remove(k)).collect()
        };
        for slot in slots {
            self.close_later(slot);
        }
    }

    /// Sends `DELETE` for the slot's session, if it has one, off the caller's path.
    fn close_later(&self, slot: Arc<Slot>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let client = self.client.clone();
        runtime.spawn(async move {
            if let Some(hs) = slot.handshake.lock().await.take() {
                client.close(&hs).await;
            }
        });
    }

    /// The slot for `key`, made on first use. Making one also closes the
    /// sessions idle longer than [`IDLE_SESSION`] (their client session is
    /// most likely gone), and the least recently used past [`MAX_SESSIONS`].
    pub(super) fn slot(&self, key: &str) -> Arc<Slot> {
        let mut sessions = self.sessions.lock().expect("sessions lock");
        let slot = match sessions.get(key) {
            Some(slot) => slot.clone(),
            None => {
                let now = Instant::now();
                let idle = |s: &Slot| {
                    s.used
                        .lock()
                        .expect("used lock")
                        .is_none_or(|t| now.duration_since(t) > IDLE_SESSION)
                };
                let mut gone: Vec<String> = sessions
                    .iter()
                    .filter(|(k, s)| k.as_str() != CATALOG_KEY && idle(s))
                    .map(|(k, _)| k.clone())
                    .collect();
                if gone.is_empty()
                    && sessions.len() >= MAX_SESSIONS
                    && let Some(oldest) = sessions
                        .iter()
                        .filter(|(k, _)| k.as_str() != CATALOG_KEY)
                        .min_by_key(|(_, s)| *s.used.lock().expect("used lock"))
                        .map(|(k, _)| k.clone())
                {
                    gone.push(oldest);
                }
                for key in gone {
                    if let Some(evicted) = sessions.remove(&key) {
                        self.close_later(evicted);
                    }
                }
                let slot = Arc::new(Slot::default());
                sessions.insert(key.to_string(), slot.clone());
                slot
            }
        };
        *slot.used.lock().expect("used lock") = Some(Instant::now());
        slot
    }
}

impl Drop for Upstream {
    /// An upstream no catalog serves any more (a reload replaced it) ends
    /// its sessions, best effort.
    fn drop(&mut self) {
        let slots: Vec<Arc<Slot>> = self
            .sessions
            .get_mut()
            .map(|s| s.drain().map(|(_, slot)| slot).collect())
            .unwrap_or_default();
        for slot in slots {
            self.close_later(slot);
        }
    }
}
