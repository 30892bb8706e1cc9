//! What a running call reports before its result (logs, progress) or asks
//! of its client, and the sink that carries it: which events the caller
//! wants, and the per-call budget a guest that floods runs into.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use super::question::{Askable, Question, QuestionError, QuestionKind};

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
    Question(Question),
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
        let limits = hangar_config::Limits::default();
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
        kind: QuestionKind,
        key: Option<String>,
        params: serde_json::Value,
        until: std::time::Instant,
    ) -> Result<serde_json::Value, QuestionError> {
        self.askable.check(kind)?;
        let Some(tx) = &self.tx else {
            return Err(QuestionError::Unsupported("this call has no stream".into()));
        };
        let (answer, answered) = oneshot::channel();
        let ask = async {
            tx.send(CallEvent::Question(Question {
                kind,
                key,
                params,
                answer,
            }))
            .await
            .map_err(|_| QuestionError::Failed("the client went away".into()))?;
            answered.await.map_err(|_| {
                QuestionError::Failed("the call's stream closed before the client answered".into())
            })?
        };
        tokio::time::timeout_at(until.into(), ask)
            .await
            .unwrap_or(Err(QuestionError::Timeout))
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

#[cfg(test)]
mod tests {
    use super::*;

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
