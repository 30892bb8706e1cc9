//! Resource updates from an upstream (`resources/subscribe`): the first
//! client session that subscribes to one of its URIs makes Hangar subscribe
//! to it in the upstream's catalog session (once per URI; again after every
//! refresh, which follows a restart), and the upstream's
//! `notifications/resources/updated` for a watched URI is announced to
//! Hangar's sessions (`heard`), which pass it to those subscribed (as a
//! component's update). Over stdio the upstream says it at any time on its
//! stdout; over HTTP, on a call's stream or on the catalog session's
//! standalone stream (`GET`), which Hangar keeps open while a URI is
//! watched.

use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::json;

use super::Upstream;
use super::slot::CATALOG_KEY;
use hangar_core::call::CallError;

/// How long the standalone stream waits before it is opened again.
const RECONNECT: Duration = Duration::from_secs(2);

impl Upstream {
    /// Has the upstream send updates of `uri` (one of its resources a
    /// client session subscribes to); the first time only.
    pub async fn watch(self: &Arc<Self>, uri: &str) -> Result<(), CallError> {
        let new = (self.heard.watch(uri))
            .map_err(|why| self.error(hangar_core::call::ErrorKind::Limit, &why))?;
        if !new {
            return Ok(());
        }
        if let Err(e) = self.subscribe(uri).await {
            self.heard.unwatch(uri);
            return Err(e);
        }
        // Over HTTP, updates come on the standalone stream: opened once.
        if !self.client.is_stdio()
            && !(self.heard.listening).swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            self.spawn_listen();
        }
        Ok(())
    }

    /// `resources/subscribe` in the catalog's session.
    async fn subscribe(&self, uri: &str) -> Result<(), CallError> {
        let params = json!({ "uri": uri });
        let reply = self
            .with_session(CATALOG_KEY, None, json!({}), None, |client, hs, id| {
                let params = params.clone();
                async move {
                    client
                        .request(&hs, id, "resources/subscribe", params, None, &mut |_| {})
                        .await
                }
            })
            .await?;
        match reply {
            super::client::Reply::Result(_) => Ok(()),
            super::client::Reply::Error(error) => Err(self.answered_error(error)),
        }
    }

    /// Subscribes again to every watched URI (after a refresh: the upstream
    /// may have restarted and forgotten them).
    pub(super) async fn resubscribe(&self) {
        for uri in self.heard.watched() {
            if let Err(e) = self.subscribe(&uri).await {
                tracing::warn!(upstream = %self.name, %uri, "subscribing again: {e}");
            }
        }
    }

    /// Keeps the catalog session's standalone stream open (HTTP) for as
    /// long as the upstream is in use, opening it again after it ends; a
    /// server that offers none (405) is not asked again.
    fn spawn_listen(self: &Arc<Self>) {
        let weak: Weak<Upstream> = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut last_session: Option<String> = None;
            loop {
                let Some(upstream) = weak.upgrade() else {
                    return;
                };
                let hs = upstream.slot(CATALOG_KEY).handshake.lock().await.clone();
                if let Some(hs) = hs {
                    if hs.session_id != last_session && last_session.is_some() {
                        upstream.resubscribe().await;
                    }
                    last_session = hs.session_id.clone();
                    let heard = upstream.heard.clone();
                    let client = upstream.client.clone();
                    drop(upstream);
                    match client
                        .listen(&hs, &mut |m| {
                            heard.note(m);
                        })
                        .await
                    {
                        Ok(()) => {}
                        Err(super::client::WireError::Protocol(why)) if why.contains("405") => {
                            tracing::info!(
                                "an upstream offers no standalone stream: updates come on calls' streams only"
                            );
                            return;
                        }
                        Err(e) => tracing::debug!("an upstream's standalone stream ended: {e}"),
                    }
                } else {
                    drop(upstream);
                }
                tokio::time::sleep(RECONNECT).await;
            }
        });
    }
}
