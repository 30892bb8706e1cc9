//! What one call carries through the pipeline besides its arguments.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use super::ask::{Ask, AskError, AskKind, Askable};

/// MCP log levels, lowest first; the order is the severity order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

/// Who is calling, once the auth stage has said so.
#[derive(Debug, Clone, Serialize)]
pub struct Principal {
    pub subject: String,
    pub claims: serde_json::Value,
}

/// Something a running call reports before its result, or a question it
/// puts to its client.
#[derive(Debug)]
pub enum CallEvent {
    Log {
        level: LogLevel,
        logger: String,
        message: String,
    },
    Progress {
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    },
    /// Not counted against the event budget: the guest waits for its answer.
    Ask(Ask),
}

/// Where a call's events go, which of them the caller wants, and how many it
/// may send. The channel is bounded and the budget is per call: a guest that
/// floods loses its extra events (counted), never the server's memory.
#[derive(Debug, Clone, Default)]
pub struct EventSink {
    tx: Option<mpsc::Sender<CallEvent>>,
    min_log: Option<LogLevel>,
    progress: bool,
    budget: Arc<EventBudget>,
    /// What the client may be asked on this call.
    askable: Askable,
}

/// The per-call event allowance, shared by every clone of a sink (auth,
/// mappers and the handler of one call draw from one budget).
#[derive(Debug)]
struct EventBudget {
    max_events: AtomicU64,
    max_bytes: AtomicU64,
    events: AtomicU64,
    bytes: AtomicU64,
    dropped: AtomicU64,
}

impl Default for EventBudget {
    fn default() -> Self {
        let limits = crate::config::Limits::default();
        EventBudget {
            max_events: AtomicU64::new(limits.max_events.into()),
            max_bytes: AtomicU64::new(limits.max_event_bytes),
            events: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }
}

impl EventBudget {
    /// Takes one event of `size` bytes from the budget, or counts it dropped.
    fn admit(&self, size: u64) -> bool {
        let events = self.events.fetch_add(1, Ordering::Relaxed) + 1;
        let bytes = self.bytes.fetch_add(size, Ordering::Relaxed) + size;
        if events > self.max_events.load(Ordering::Relaxed)
            || bytes > self.max_bytes.load(Ordering::Relaxed)
        {
            // Give the bytes back so one huge message does not starve the rest.
            self.bytes.fetch_sub(size, Ordering::Relaxed);
            self.events.fetch_sub(1, Ordering::Relaxed);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        true
    }
}

impl EventSink {
    /// A sink that forwards log events at or above `min_log` (none when
    /// `None`) and progress events when `progress` is set.
    pub fn new(
        tx: mpsc::Sender<CallEvent>,
        min_log: Option<LogLevel>,
        progress: bool,
    ) -> EventSink {
        EventSink {
            tx: Some(tx),
            min_log,
            progress,
            budget: Arc::default(),
            askable: Askable::default(),
        }
    }

    /// This sink, able to carry questions the client declared it answers.
    pub fn with_askable(mut self, askable: Askable) -> EventSink {
        self.askable = askable;
        self
    }

    /// What the client may be asked on this call.
    pub fn askable(&self) -> Askable {
        self.askable
    }

    /// Puts a question (named `key` by the guest, or not) to the client and
    /// waits for its answer until `until`.
    pub async fn ask(
        &self,
        kind: AskKind,
        key: Option<String>,
        params: serde_json::Value,
        until: std::time::Instant,
    ) -> Result<serde_json::Value, AskError> {
        self.askable.check(kind)?;
        let Some(tx) = &self.tx else {
            return Err(AskError::Unsupported("this call has no stream".into()));
        };
        let (answer, answered) = oneshot::channel();
        let ask = async {
            tx.send(CallEvent::Ask(Ask {
                kind,
                key,
                params,
                answer,
            }))
            .await
            .map_err(|_| AskError::Failed("the client went away".into()))?;
            answered.await.map_err(|_| {
                AskError::Failed("the call's stream closed before the client answered".into())
            })?
        };
        tokio::time::timeout_at(until.into(), ask)
            .await
            .unwrap_or(Err(AskError::Timeout))
    }

    /// Sets the call's budget (the resolved tool's `max_events` and `max_event_bytes`).
    pub fn set_budget(&self, max_events: u32, max_bytes: u64) {
        self.budget
            .max_events
            .store(max_events.into(), Ordering::Relaxed);
        self.budget.max_bytes.store(max_bytes, Ordering::Relaxed);
    }

    pub fn log(&self, level: LogLevel, logger: &str, message: &str) {
        if self.min_log.is_some_and(|min| level >= min) {
            let size = (logger.len() + message.len()) as u64;
            self.send(size, || CallEvent::Log {
                level,
                logger: logger.to_string(),
                message: message.to_string(),
            });
        }
    }

    pub fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        if self.progress {
            let size = 16 + message.as_ref().map_or(0, String::len) as u64;
            self.send(size, || CallEvent::Progress {
                progress,
                total,
                message,
            });
        }
    }

    /// Events of this call dropped so far (over budget, or the caller not keeping up).
    pub fn dropped(&self) -> u64 {
        self.budget.dropped.load(Ordering::Relaxed)
    }

    /// The one warning that ends a call whose events were dropped.
    pub fn dropped_notice(&self) -> Option<CallEvent> {
        let dropped = self.dropped();
        (dropped > 0).then(|| CallEvent::Log {
            level: LogLevel::Warning,
            logger: "hangar".into(),
            message: format!(
                "dropped {dropped} events of this call: over its budget of {} events / {} bytes, or the client did not keep up",
                self.budget.max_events.load(Ordering::Relaxed),
                self.budget.max_bytes.load(Ordering::Relaxed)
            ),
        })
    }

    fn send(&self, size: u64, event: impl FnOnce() -> CallEvent) {
        let Some(tx) = &self.tx else { return };
        if !self.budget.admit(size) {
            return;
        }
        match tx.try_send(event()) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.budget.dropped.fetch_add(1, Ordering::Relaxed);
            }
            // The receiver is gone only when the caller is; nothing to do then.
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }
}

/// Set once when the caller cancels or goes away; checked before every stage
/// and, inside a guest, at every epoch tick; awaited around every guest call
/// (a guest blocked in a host call sees no epoch tick).
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<CancelState>);

#[derive(Debug, Default)]
struct CancelState {
    cancelled: AtomicBool,
    notify: tokio::sync::Notify,
}

impl CancelToken {
    pub fn cancel(&self) {
        self.0.cancelled.store(true, Ordering::Relaxed);
        self.0.notify.notify_waiters();
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.cancelled.load(Ordering::Relaxed)
    }

    /// Resolves once the token is cancelled.
    pub async fn cancelled(&self) {
        loop {
            let notified = self.0.notify.notified();
            tokio::pin!(notified);
            // Registered before the check, so a cancel between the two is not missed.
            notified.as_mut().enable();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }

    /// A guard that cancels this token when dropped unless disarmed: ties a
    /// call's life to the request (or stream) that waits for it.
    pub fn drop_guard(&self) -> CancelOnDrop {
        CancelOnDrop(Some(self.clone()))
    }
}

pub struct CancelOnDrop(Option<CancelToken>);

impl CancelOnDrop {
    pub fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(token) = self.0.take() {
            token.cancel();
        }
    }
}

/// Which surface a call came in through.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Transport {
    #[default]
    Mcp,
    Rest,
}

/// What the auth stage may look at of the HTTP request that carried the call.
#[derive(Debug, Clone, Default)]
pub struct RequestInfo {
    pub transport: Transport,
    pub method: String,
    pub path: String,
    /// As received (names are lower-case in a `HeaderMap`). Kept whole, not
    /// copied into strings: most calls never look at them.
    pub headers: axum::http::HeaderMap,
    pub client_addr: Option<std::net::SocketAddr>,
    /// The W3C `traceparent` header, if one came: looked up once, here,
    /// for the call's trace id and for the span it continues.
    pub traceparent: Option<axum::http::HeaderValue>,
}

/// The W3C header that names a call's parent span.
static TRACEPARENT: axum::http::HeaderName = axum::http::HeaderName::from_static("traceparent");

impl RequestInfo {
    pub fn new(
        transport: Transport,
        method: &str,
        path: &str,
        headers: &axum::http::HeaderMap,
        client_addr: Option<std::net::SocketAddr>,
    ) -> RequestInfo {
        RequestInfo {
            transport,
            method: method.to_string(),
            path: path.to_string(),
            headers: headers.clone(),
            client_addr,
            traceparent: headers.get(&TRACEPARENT).cloned(),
        }
    }

    /// The `traceparent` header as text, if it came and is text.
    pub fn traceparent(&self) -> Option<&str> {
        self.traceparent.as_ref().and_then(|v| v.to_str().ok())
    }

    /// The headers as text pairs (what an auth check's WIT record holds);
    /// a value that is not visible ASCII is left out.
    pub fn header_pairs(&self) -> Vec<(String, String)> {
        self.headers
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
            .collect()
    }
}

/// Built once per request, read by every stage.
#[derive(Debug, Clone, Default)]
pub struct CallContext {
    pub trace_id: String,
    pub session_id: Option<String>,
    /// Set by the auth stage.
    pub principal: Option<Principal>,
    pub request: Option<Arc<RequestInfo>>,
    pub events: EventSink,
    pub cancel: CancelToken,
    /// What the call's guests consumed, for metrics.
    pub usage: CallUsage,
    /// The span a call made inside this one continues (a meta-tool's
    /// inner call): the running stage's, set by the pipeline while a traced
    /// call runs. A span context, not a `Context`: most calls make no inner
    /// call, and the context is built only by one that does.
    pub trace_parent: Option<opentelemetry::trace::SpanContext>,
    /// The definitions the caller's MCP session pinned (`[server] pinning`).
    pub pins: Option<Arc<super::pins::Pins>>,
}

/// Fuel a call's tool handler burned, added up by the wasm backend and
/// shared by every clone of the call's context.
#[derive(Debug, Clone, Default)]
pub struct CallUsage(Arc<AtomicU64>);

impl CallUsage {
    pub fn add_fuel(&self, fuel: u64) {
        self.0.fetch_add(fuel, Ordering::Relaxed);
    }

    pub fn fuel(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl CallContext {
    /// A context with the trace id of an incoming W3C `traceparent`, a fresh
    /// one, or none when trace ids are off.
    pub fn traced(traceparent: Option<&str>, trace_ids: bool) -> CallContext {
        if trace_ids {
            CallContext::new(traceparent)
        } else {
            CallContext::default()
        }
    }

    /// A context with a fresh trace id, or the one of an incoming W3C `traceparent`.
    pub fn new(traceparent: Option<&str>) -> CallContext {
        CallContext {
            trace_id: traceparent
                .and_then(trace_id_of)
                .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string()),
            ..CallContext::default()
        }
    }
}

/// The trace id of a `traceparent` header (`00-<32 hex>-<16 hex>-<2 hex>`).
fn trace_id_of(traceparent: &str) -> Option<String> {
    let mut parts = traceparent.trim().split('-');
    let (_version, trace) = (parts.next()?, parts.next()?);
    let valid = trace.len() == 32
        && trace.bytes().all(|b| b.is_ascii_hexdigit())
        && trace.bytes().any(|b| b != b'0');
    valid.then(|| trace.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_trace_id_is_honoured() {
        let cx = CallContext::new(Some(
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        ));
        assert_eq!(cx.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
    }

    #[test]
    fn bad_traceparent_gets_a_fresh_id() {
        let cx = CallContext::new(Some(
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        ));
        assert_eq!(cx.trace_id.len(), 32);
        assert_ne!(cx.trace_id, "00000000000000000000000000000000");
        assert_ne!(CallContext::new(None).trace_id, cx.trace_id);
    }

    #[test]
    fn sink_filters_by_level() {
        let (tx, mut rx) = mpsc::channel(8);
        let sink = EventSink::new(tx, Some(LogLevel::Warning), false);
        sink.log(LogLevel::Info, "p", "dropped");
        sink.log(LogLevel::Error, "p", "kept");
        sink.progress(1.0, None, None);
        drop(sink);
        let got: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        assert_eq!(got.len(), 1);
        assert!(matches!(&got[0], CallEvent::Log { message, .. } if message == "kept"));
    }

    #[test]
    fn sink_drops_past_its_budget_and_says_how_many() {
        let (tx, mut rx) = mpsc::channel(100);
        let sink = EventSink::new(tx, Some(LogLevel::Debug), true);
        sink.set_budget(3, 1000);
        for _ in 0..10 {
            sink.progress(1.0, None, None);
        }
        // Past the three events, and over the byte budget too: dropped.
        sink.log(LogLevel::Info, "p", &"x".repeat(2000));
        assert_eq!(std::iter::from_fn(|| rx.try_recv().ok()).count(), 3);
        assert_eq!(sink.dropped(), 8);
        let notice = sink.dropped_notice().expect("a notice");
        assert!(
            matches!(notice, CallEvent::Log { level: LogLevel::Warning, message, .. } if message.starts_with("dropped 8 events"))
        );
    }

    #[test]
    fn sink_counts_what_a_full_channel_refuses() {
        let (tx, _rx) = mpsc::channel(2);
        let sink = EventSink::new(tx, None, true);
        for _ in 0..5 {
            sink.progress(1.0, None, None);
        }
        assert_eq!(sink.dropped(), 3);
    }
}
