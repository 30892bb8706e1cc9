//! MCP sessions: issued on `initialize`, ended by `DELETE /mcp` or idleness.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::pipeline::{CancelToken, LogLevel};

/// Sessions idle longer than this are forgotten.
const IDLE_TTL: Duration = Duration::from_secs(3600);

/// What the server remembers of one client between requests.
#[derive(Debug)]
pub struct Session {
    pub id: String,
    /// The lowest level the client asked to receive, if it asked.
    log_level: Mutex<Option<LogLevel>>,
    /// Calls running now, by JSON-RPC request id, so they can be cancelled.
    in_flight: Mutex<HashMap<String, CancelToken>>,
    last_seen: Mutex<Instant>,
}

impl Session {
    fn new() -> Session {
        Session {
            id: uuid::Uuid::new_v4().simple().to_string(),
            log_level: Mutex::new(None),
            in_flight: Mutex::new(HashMap::new()),
            last_seen: Mutex::new(Instant::now()),
        }
    }

    pub fn log_level(&self) -> Option<LogLevel> {
        *self.log_level.lock().unwrap()
    }

    pub fn set_log_level(&self, level: LogLevel) {
        *self.log_level.lock().unwrap() = Some(level);
    }

    /// Registers a running call; it is forgotten when the guard drops.
    pub fn track(self: &Arc<Self>, id: &Value, token: CancelToken) -> InFlight {
        let key = id.to_string();
        self.in_flight.lock().unwrap().insert(key.clone(), token);
        InFlight {
            session: self.clone(),
            key,
        }
    }

    /// Cancels the running call with this request id; false when none runs.
    pub fn cancel(&self, id: &Value) -> bool {
        match self.in_flight.lock().unwrap().get(&id.to_string()) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    fn touch(&self) {
        *self.last_seen.lock().unwrap() = Instant::now();
    }

    fn idle_for(&self) -> Duration {
        self.last_seen.lock().unwrap().elapsed()
    }
}

/// Removes a call from its session's in-flight table when dropped.
pub struct InFlight {
    session: Arc<Session>,
    key: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.session.in_flight.lock().unwrap().remove(&self.key);
    }
}

/// Every live session.
#[derive(Debug, Default)]
pub struct Sessions {
    map: RwLock<HashMap<String, Arc<Session>>>,
}

impl Sessions {
    /// Starts a session, forgetting idle ones first.
    pub fn create(&self) -> Arc<Session> {
        let session = Arc::new(Session::new());
        let mut map = self.map.write().unwrap();
        map.retain(|_, s| s.idle_for() < IDLE_TTL);
        map.insert(session.id.clone(), session.clone());
        session
    }

    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        let session = self.map.read().unwrap().get(id).cloned()?;
        session.touch();
        Some(session)
    }

    /// Ends a session; false when it did not exist.
    pub fn remove(&self, id: &str) -> bool {
        self.map.write().unwrap().remove(id).is_some()
    }
}
