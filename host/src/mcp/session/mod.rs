//! MCP sessions: issued on `initialize`, ended by `DELETE /mcp`, by
//! idleness (`session_timeout`), or evicted when `max_sessions` are live.
//!
//! With `[cluster]` the session is also kept in the replicas' shared Redis
//! (`hangar_core::cluster::sessions`), which is then the authority: each request
//! reads it there (one round trip that also pushes its TTL back), so a
//! session opened on one replica is found on any other, and one deleted or
//! expired anywhere is gone everywhere. The in-process map then holds each
//! replica's copy, refreshed by every such read: what is only per process
//! (running calls to cancel, the GET stream, pins) lives there. While Redis
//! is unreachable the replica serves from its copies alone.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use quick_cache::sync::Cache;
use quick_cache::{DefaultHashBuilder, Lifecycle, OptionsBuilder, UnitWeighter};
use serde::Serialize;
use serde_json::Value;

mod declared;
mod shared;

pub use declared::ClientAsks;

use super::limits::Held;
use hangar_core::call::{Askable, CancelToken, LogLevel};
use hangar_core::cluster::Cluster;

/// The longest pause between two sweeps for idle sessions.
const MAX_SWEEP_INTERVAL: Duration = Duration::from_secs(60);

/// What the server remembers of one client between requests.
#[derive(Debug)]
pub struct Session {
    pub id: String,
    /// The lowest level the client asked to receive, if it asked.
    log_level: Mutex<Option<LogLevel>>,
    /// Calls running now, by JSON-RPC request id, so they can be cancelled.
    in_flight: Mutex<HashMap<String, CancelToken>>,
    last_seen: Mutex<Instant>,
    /// What the client declared it answers (`initialize`'s capabilities).
    asks: ClientAsks,
    /// Resource URIs the client subscribed to.
    subscriptions: Mutex<HashSet<String>>,
    /// The subject of the bearer token that opened the session (`[oauth]`):
    /// another token's requests do not find it.
    owner: Option<String>,
    /// Which GET stream is the session's current one: opening a stream
    /// replaces the one before (a client that lost its connection can open
    /// another at once), and only the current one carries messages.
    stream_gen: AtomicU64,
    /// Wakes a replaced stream so it ends.
    stream_replaced: tokio::sync::Notify,
    /// Tool definitions pinned by the session's first listing (its calls carry them).
    pub pins: Arc<hangar_core::call::pins::Pins>,
    /// The session counted against its client's and principal's caps
    /// (`max_sessions_per_client`), released when the session is dropped.
    /// `None` for a copy of a session another replica opened (it counts there).
    _held: Option<Held>,
    /// The stream slot (`max_streams_per_client`) of the session's GET
    /// stream while one is open: a stream replacing it takes the same slot,
    /// so a client reconnecting at its cap is not refused by its own
    /// stream that is ending.
    stream_slot: Mutex<Weak<Held>>,
}

impl Session {
    fn new(asks: ClientAsks, owner: Option<String>, held: Option<Held>) -> Session {
        let mut session = Session::with_id(uuid::Uuid::new_v4().simple().to_string(), asks, owner);
        session._held = held;
        session
    }

    /// This session, counted in `held`.
    fn holding(mut self, held: Held) -> Session {
        self._held = Some(held);
        self
    }

    fn with_id(id: String, asks: ClientAsks, owner: Option<String>) -> Session {
        Session {
            owner,
            id,
            log_level: Mutex::new(None),
            in_flight: Mutex::new(HashMap::new()),
            last_seen: Mutex::new(Instant::now()),
            asks,
            subscriptions: Mutex::new(HashSet::new()),
            stream_gen: AtomicU64::new(0),
            stream_replaced: tokio::sync::Notify::new(),
            pins: Default::default(),
            _held: None,
            stream_slot: Mutex::new(Weak::new()),
        }
    }

    /// What a call of this session may ask its client (on an SSE answer).
    pub fn askable(&self) -> Askable {
        Askable::Yes {
            elicitation: self.asks.elicitation,
            elicitation_url: self.asks.elicitation_url,
            sampling: self.asks.sampling,
            roots: self.asks.roots,
        }
    }

    /// Whether the client declared it renders MCP Apps.
    pub fn runs_apps(&self) -> bool {
        self.asks.apps
    }

    /// Subscribes to `uri`; false (and nothing changes) when the session
    /// holds `max` subscriptions already.
    pub fn subscribe(&self, uri: &str, max: usize) -> bool {
        let mut subs = self.subscriptions.lock().unwrap();
        if subs.len() >= max && !subs.contains(uri) {
            return false;
        }
        subs.insert(uri.to_string());
        true
    }

    /// False when the session was not subscribed to `uri`.
    pub fn unsubscribe(&self, uri: &str) -> bool {
        self.subscriptions.lock().unwrap().remove(uri)
    }

    pub fn subscribed(&self, uri: &str) -> bool {
        self.subscriptions.lock().unwrap().contains(uri)
    }

    /// Makes a new GET stream the session's current one, ending the one
    /// before. Its stream slot is the one before's, if that is still held;
    /// otherwise one from `take`, or `take`'s refusal (and the stream
    /// before, if any, goes on).
    pub fn open_stream<E>(
        self: &Arc<Self>,
        take: impl FnOnce() -> Result<Held, E>,
    ) -> Result<StreamClaim, E> {
        let slot = {
            let mut kept = self.stream_slot.lock().unwrap();
            match kept.upgrade() {
                Some(slot) => slot,
                None => {
                    let slot = Arc::new(take()?);
                    *kept = Arc::downgrade(&slot);
                    slot
                }
            }
        };
        let generation = self.stream_gen.fetch_add(1, Ordering::AcqRel) + 1;
        self.stream_replaced.notify_waiters();
        Ok(StreamClaim {
            session: self.clone(),
            generation,
            _slot: slot,
        })
    }

    /// The session is gone (deleted, expired or evicted): its GET stream ends.
    fn end(&self) {
        self.stream_gen.fetch_add(1, Ordering::AcqRel);
        self.stream_replaced.notify_waiters();
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

    /// Marks the session as in use now (a request, or its GET stream still open).
    pub fn touch(&self) {
        *self.last_seen.lock().unwrap() = Instant::now();
    }

    fn idle_for(&self) -> Duration {
        self.last_seen.lock().unwrap().elapsed()
    }
}

/// One GET stream of a session, current until another replaces it.
pub struct StreamClaim {
    session: Arc<Session>,
    generation: u64,
    /// The client's stream slot, released when the stream ends.
    _slot: Arc<Held>,
}

impl StreamClaim {
    pub fn session(&self) -> &Arc<Session> {
        &self.session
    }

    /// Whether this is still the session's current stream.
    pub fn current(&self) -> bool {
        self.session.stream_gen.load(Ordering::Acquire) == self.generation
    }

    /// Resolves when a newer stream replaces this one.
    pub async fn replaced(&self) {
        loop {
            let notified = self.session.stream_replaced.notified();
            if !self.current() {
                return;
            }
            notified.await;
        }
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

/// Every live session: at most `max_sessions`, each forgotten after
/// `session_timeout` unused.
///
/// A concurrent cache (`quick_cache`: sharded, short locks; nothing scans
/// every session on the request path). At the cap, a new session evicts one
/// by the cache's CLOCK-Pro policy: sessions not used since they were
/// created go first, oldest first, so a flood of `initialize` mostly
/// evicts its own sessions rather than those clients keep using. A
/// background task forgets idle sessions.
#[derive(Clone)]
pub struct Sessions {
    inner: Arc<Inner>,
    /// The replicas' shared Redis (`[cluster]`); `None`: in-process only.
    shared: Option<Arc<Cluster>>,
}

struct Inner {
    map: Cache<String, Arc<Session>, UnitWeighter, DefaultHashBuilder, Ending>,
    max: usize,
    ttl: Duration,
    expired: AtomicU64,
    evicted: Arc<AtomicU64>,
    ended: OnEnd,
}

/// Told the id of each session that ends (deleted, expired or evicted), so
/// what was kept for it elsewhere (upstream sessions) ends too. It must not
/// block: it runs on the request or sweeping path.
pub type OnEnd = Arc<dyn Fn(&str) + Send + Sync>;

/// Ends an evicted session's GET stream, counts it, and says it ended.
#[derive(Clone)]
struct Ending(Arc<AtomicU64>, OnEnd);

impl Lifecycle<String, Arc<Session>> for Ending {
    type RequestState = ();

    fn on_evict(&self, _: &mut (), id: String, session: Arc<Session>) {
        session.end();
        self.0.fetch_add(1, Ordering::Relaxed);
        (self.1)(id.as_str());
    }
}

/// What `/healthz` shows under `sessions`.
#[derive(Debug, Serialize)]
pub struct SessionReport {
    pub open: usize,
    pub max: usize,
    pub expired: u64,
    pub evicted: u64,
}

impl Sessions {
    /// As [`Sessions::with_on_end`], telling no one.
    #[cfg(test)]
    pub fn new(max: usize, ttl: Duration) -> Sessions {
        Sessions::with_on_end(max, ttl, Arc::new(|_: &str| {}))
    }

    /// At most `max` sessions, each forgotten after `ttl` unused; `ended`
    /// is told of each session that ends. Inside a Tokio runtime, starts the
    /// task that sweeps idle ones; it stops when the sessions are dropped.
    pub fn with_on_end(max: usize, ttl: Duration, ended: OnEnd) -> Sessions {
        let max = max.max(1);
        let evicted = Arc::new(AtomicU64::new(0));
        let options = OptionsBuilder::new()
            .estimated_items_capacity(max)
            .weight_capacity(max as u64)
            .build()
            .expect("valid cache options");
        let map = Cache::with_options(
            options,
            UnitWeighter,
            DefaultHashBuilder::default(),
            Ending(evicted.clone(), ended.clone()),
        );
        let inner = Arc::new(Inner {
            map,
            max,
            ttl,
            expired: AtomicU64::new(0),
            evicted,
            ended,
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(sweep(Arc::downgrade(&inner)));
        }
        Sessions {
            inner,
            shared: None,
        }
    }

    /// Starts a session for the token subject `owner` (evicting one when
    /// at the cap), counted in `held` against its client's caps.
    pub fn create(
        &self,
        asks: ClientAsks,
        owner: Option<String>,
        held: Option<Held>,
    ) -> Arc<Session> {
        let session = Arc::new(Session::new(asks, owner, held));
        self.inner.map.insert(session.id.clone(), session.clone());
        session
    }

    /// The live session `id` of the token subject `owner`, marked as used
    /// now. A session another subject opened is not found, as if unknown.
    pub fn get(&self, id: &str, owner: Option<&str>) -> Option<Arc<Session>> {
        let session = self.inner.map.get(id)?;
        if session.owner.as_deref() != owner {
            return None;
        }
        // Past its time but not swept yet: gone all the same. (With
        // `[cluster]`, Redis decides; this copy may have been idle here
        // while another replica served it.)
        if self.shared.is_none() && session.idle_for() >= self.inner.ttl {
            self.inner.expire(id);
            return None;
        }
        session.touch();
        Some(session)
    }

    /// Ends every session's GET stream (the sessions stay): at shutdown, so
    /// an open stream does not hold the server for the whole grace.
    pub fn end_streams(&self) {
        for (_, session) in self.inner.map.iter() {
            session.end();
        }
    }

    /// Ends a session; false when it did not exist.
    /// Ends the session `id` of `owner`; whether there was one.
    pub fn remove(&self, id: &str, owner: Option<&str>) -> bool {
        if self.get(id, owner).is_none() {
            return false;
        }
        match self.inner.map.remove(id) {
            Some((_, session)) => {
                session.end();
                (self.inner.ended)(id);
                true
            }
            None => false,
        }
    }

    pub fn report(&self) -> SessionReport {
        SessionReport {
            open: self.inner.map.len(),
            max: self.inner.max,
            expired: self.inner.expired.load(Ordering::Relaxed),
            evicted: self.inner.evicted.load(Ordering::Relaxed),
        }
    }
}

impl Inner {
    fn expire(&self, id: &str) {
        if let Some((_, session)) = self
            .map
            .remove_if(id, |s: &Arc<Session>| s.idle_for() >= self.ttl)
        {
            session.end();
            self.expired.fetch_add(1, Ordering::Relaxed);
            (self.ended)(id);
        }
    }

    /// Forgets every session unused for `ttl`.
    fn sweep(&self) {
        let idle: Vec<String> = self
            .map
            .iter()
            .filter(|(_, s)| s.idle_for() >= self.ttl)
            .map(|(id, _)| id)
            .collect();
        for id in idle {
            self.expire(&id);
        }
    }
}

/// Sweeps idle sessions a few times per `ttl` (at most a minute apart)
/// while the sessions exist.
async fn sweep(inner: Weak<Inner>) {
    let Some(ttl) = inner.upgrade().map(|i| i.ttl) else {
        return;
    };
    let every = (ttl / 4).clamp(Duration::from_millis(100), MAX_SWEEP_INTERVAL);
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        match inner.upgrade() {
            Some(inner) => inner.sweep(),
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(session: &Arc<Session>) -> StreamClaim {
        let caps = crate::mcp::limits::ClientLimits::default();
        let addr = "127.0.0.1:1".parse().unwrap();
        session
            .open_stream(|| caps.streams.take(crate::mcp::limits::keys(addr, None)))
            .unwrap()
    }

    #[test]
    fn at_the_cap_a_new_session_evicts_an_old_one_and_is_kept() {
        let sessions = Sessions::new(3, Duration::from_secs(3600));
        let ids: Vec<String> = (0..20)
            .map(|_| {
                sessions
                    .create(ClientAsks::default(), None, None)
                    .id
                    .clone()
            })
            .collect();
        let live = ids
            .iter()
            .filter(|id| sessions.get(id, None).is_some())
            .count();
        assert!(live <= 3, "{live} sessions live");
        assert!(sessions.get(ids.last().unwrap(), None).is_some());
        assert!(sessions.report().evicted >= 17);
    }

    #[test]
    fn a_session_used_again_outlives_a_flood_of_new_ones() {
        let sessions = Sessions::new(50, Duration::from_secs(3600));
        let kept = sessions
            .create(ClientAsks::default(), None, None)
            .id
            .clone();
        for _ in 0..10 {
            for _ in 0..20 {
                sessions.create(ClientAsks::default(), None, None);
            }
            assert!(sessions.get(&kept, None).is_some());
        }
        assert!(sessions.report().open <= 50);
    }

    #[test]
    fn an_idle_session_is_gone_and_its_stream_ends() {
        let sessions = Sessions::new(10, Duration::from_millis(50));
        let session = sessions.create(ClientAsks::default(), None, None);
        let claim = open(&session);
        assert!(claim.current());
        std::thread::sleep(Duration::from_millis(80));
        assert!(sessions.get(&session.id, None).is_none());
        assert!(!claim.current());
        let report = sessions.report();
        assert_eq!((report.open, report.expired), (0, 1));
    }

    #[test]
    fn every_way_a_session_ends_is_told() {
        let ended = Arc::new(Mutex::new(Vec::<String>::new()));
        let seen = ended.clone();
        let hook: OnEnd = Arc::new(move |id: &str| seen.lock().unwrap().push(id.to_string()));
        let sessions = Sessions::with_on_end(2, Duration::from_millis(50), hook);
        let deleted = sessions
            .create(ClientAsks::default(), None, None)
            .id
            .clone();
        assert!(sessions.remove(&deleted, None));
        let expired = sessions
            .create(ClientAsks::default(), None, None)
            .id
            .clone();
        std::thread::sleep(Duration::from_millis(80));
        assert!(sessions.get(&expired, None).is_none());
        assert_eq!(*ended.lock().unwrap(), [deleted, expired]);
        for _ in 0..5 {
            sessions.create(ClientAsks::default(), None, None);
        }
        // At the cap of two, new sessions evicted at least three.
        assert!(ended.lock().unwrap().len() >= 5);
    }

    #[test]
    fn a_deleted_session_ends_its_stream() {
        let sessions = Sessions::new(10, Duration::from_secs(60));
        let session = sessions.create(ClientAsks::default(), None, None);
        let claim = open(&session);
        assert!(sessions.remove(&session.id, None));
        assert!(!claim.current());
        assert!(!sessions.remove(&session.id, None));
    }

    #[tokio::test]
    async fn the_sweeper_forgets_idle_sessions() {
        let sessions = Sessions::new(10, Duration::from_millis(100));
        for _ in 0..5 {
            sessions.create(ClientAsks::default(), None, None);
        }
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(sessions.report().open, 0);
        assert_eq!(sessions.report().expired, 5);
    }

    #[test]
    fn a_session_is_found_only_with_the_token_subject_that_opened_it() {
        let sessions = Sessions::new(10, Duration::from_secs(60));
        let id = sessions
            .create(ClientAsks::default(), Some("alice".into()), None)
            .id
            .clone();
        assert!(sessions.get(&id, Some("mallory")).is_none());
        assert!(sessions.get(&id, None).is_none());
        assert!(!sessions.remove(&id, Some("mallory")));
        assert!(sessions.get(&id, Some("alice")).is_some());
        assert!(sessions.remove(&id, Some("alice")));
    }
}
