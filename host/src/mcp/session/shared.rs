//! The sessions' side of `[cluster]`: keeping each session in the shared
//! Redis as well as here, and this replica's copy in step with it (see the
//! parent module's doc).

use std::sync::Arc;

use serde_json::Value;

use super::{ClientAsks, Held, Session, Sessions};
use hangar_core::call::LogLevel;
use hangar_core::cluster::Cluster;
use hangar_core::cluster::sessions::SessionRecord;

impl Session {
    /// This replica's copy of a session another replica may have opened.
    fn from_record(id: &str, record: &SessionRecord) -> Session {
        let asks = ClientAsks {
            elicitation: record.elicitation,
            elicitation_url: record.elicitation_url,
            sampling: record.sampling,
            roots: record.roots,
            apps: record.apps,
        };
        let session = Session::with_id(id.to_string(), asks, record.owner.clone());
        session.refresh(record);
        session
    }

    /// Takes what may have changed on another replica: log level, subscriptions.
    fn refresh(&self, record: &SessionRecord) {
        *self.log_level.lock().unwrap() = record
            .log_level
            .as_deref()
            .and_then(|l| serde_json::from_value::<LogLevel>(Value::String(l.to_string())).ok());
        let mut subs = self.subscriptions.lock().unwrap();
        if subs.len() != record.subscriptions.len()
            || !record.subscriptions.iter().all(|u| subs.contains(u))
        {
            *subs = record.subscriptions.iter().cloned().collect();
        }
    }
}

impl Sessions {
    /// Keeps sessions in `cluster`'s Redis too (see the module's doc).
    pub fn shared_by(mut self, cluster: Option<Arc<Cluster>>) -> Sessions {
        self.shared = cluster;
        self
    }

    /// Starts a session (see [`Sessions::create`]) that negotiated
    /// `version`, counted in `held`, and stores it for every replica. With
    /// `[cluster]`, `None` when a key of `held` has `max` sessions across
    /// the replicas already (see `hangar_core::cluster::sessions`).
    pub async fn open(
        &self,
        asks: ClientAsks,
        owner: Option<String>,
        version: &str,
        held: Held,
        max: usize,
    ) -> Option<Arc<Session>> {
        let Some(cluster) = &self.shared else {
            return Some(self.create(asks, owner, Some(held)));
        };
        let session = Session::new(asks, owner.clone(), None);
        let record = SessionRecord {
            version: version.to_string(),
            owner,
            elicitation: asks.elicitation,
            elicitation_url: asks.elicitation_url,
            sampling: asks.sampling,
            roots: asks.roots,
            apps: asks.apps,
            ..SessionRecord::default()
        };
        match cluster
            .session_create(&session.id, &record, self.inner.ttl, held.keys(), max)
            .await
        {
            Ok(true) => {}
            Ok(false) => return None,
            Err(e) => tracing::warn!("session {} kept on this replica only: {e}", session.id),
        }
        let session = Arc::new(session.holding(held));
        self.inner.map.insert(session.id.clone(), session.clone());
        Some(session)
    }

    /// The live session `id` of `owner` (see [`Sessions::get`]); with
    /// `[cluster]`, as Redis has it, wherever it was opened.
    pub async fn find(&self, id: &str, owner: Option<&str>) -> Option<Arc<Session>> {
        let Some(cluster) = &self.shared else {
            return self.get(id, owner);
        };
        match cluster.session_load(id, self.inner.ttl).await {
            Ok(None) => {
                // Ended on another replica, or expired: this copy goes too.
                if let Some((_, session)) = self.inner.map.remove(id) {
                    session.end();
                    (self.inner.ended)(id);
                }
                None
            }
            Ok(Some(record)) => {
                if record.owner.as_deref() != owner {
                    return None;
                }
                let session = match self.inner.map.get(id) {
                    Some(session) => {
                        session.refresh(&record);
                        session
                    }
                    None => {
                        let session = Arc::new(Session::from_record(id, &record));
                        self.inner.map.insert(id.to_string(), session.clone());
                        session
                    }
                };
                session.touch();
                Some(session)
            }
            Err(_) => self.get(id, owner),
        }
    }

    /// Ends the session `id` of `owner` on every replica; whether there was one.
    pub async fn end(&self, id: &str, owner: Option<&str>) -> bool {
        let Some(cluster) = &self.shared else {
            return self.remove(id, owner);
        };
        if self.find(id, owner).await.is_none() {
            return false;
        }
        let here = self.remove(id, owner);
        match cluster.session_remove(id).await {
            Ok(there) => there || here,
            Err(_) => here,
        }
    }

    /// With `[cluster]`, reads `session` from Redis again (subscriptions and
    /// level made on other replicas; its TTL pushed back); false when it
    /// ended meanwhile. In-process only, there is nothing to reread: true.
    pub async fn reread(&self, session: &Session) -> bool {
        match &self.shared {
            None => true,
            Some(_) => self
                .find(&session.id, session.owner.as_deref())
                .await
                .is_some(),
        }
    }

    /// This replica's copy of session `id`, without asking Redis or marking
    /// it used: for a message from another replica about a call running here.
    pub fn local(&self, id: &str) -> Option<Arc<Session>> {
        self.inner.map.get(id)
    }

    /// Sets the session's log level, for every replica.
    pub async fn set_log_level(&self, session: &Session, level: LogLevel) {
        session.set_log_level(level);
        if let Some(cluster) = &self.shared {
            let name = serde_json::to_value(level)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            if let Err(e) = cluster.session_set_level(&session.id, &name).await {
                tracing::warn!("log level of session {} kept here only: {e}", session.id);
            }
        }
    }

    /// Subscribes the session to `uri` (or ends that), for every replica;
    /// false (nothing done) when it holds `max` subscriptions already.
    pub async fn subscribe(&self, session: &Session, uri: &str, on: bool, max: usize) -> bool {
        if on {
            if !session.subscribe(uri, max) {
                return false;
            }
        } else {
            session.unsubscribe(uri);
        }
        if let Some(cluster) = &self.shared {
            match cluster.session_subscribe(&session.id, uri, on, max).await {
                Ok(true) => {}
                // Full in Redis (another replica subscribed meanwhile), or gone.
                Ok(false) if on => {
                    session.unsubscribe(uri);
                    return false;
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!("subscription of session {} kept here only: {e}", session.id)
                }
            }
        }
        true
    }
}
