//! What one call carries through the pipeline besides its arguments.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;
use tokio::sync::mpsc;

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

/// Something a running call reports before its result.
#[derive(Debug, Clone)]
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
}

/// Where a call's events go, and which of them the caller wants.
#[derive(Debug, Clone, Default)]
pub struct EventSink {
    tx: Option<mpsc::UnboundedSender<CallEvent>>,
    min_log: Option<LogLevel>,
    progress: bool,
}

impl EventSink {
    /// A sink that forwards log events at or above `min_log` (none when
    /// `None`) and progress events when `progress` is set.
    pub fn new(
        tx: mpsc::UnboundedSender<CallEvent>,
        min_log: Option<LogLevel>,
        progress: bool,
    ) -> EventSink {
        EventSink {
            tx: Some(tx),
            min_log,
            progress,
        }
    }

    pub fn log(&self, level: LogLevel, logger: &str, message: &str) {
        if self.min_log.is_some_and(|min| level >= min) {
            self.send(CallEvent::Log {
                level,
                logger: logger.to_string(),
                message: message.to_string(),
            });
        }
    }

    pub fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        if self.progress {
            self.send(CallEvent::Progress {
                progress,
                total,
                message,
            });
        }
    }

    fn send(&self, event: CallEvent) {
        if let Some(tx) = &self.tx {
            // The receiver is gone only when the caller is; nothing to do then.
            let _ = tx.send(event);
        }
    }
}

/// Set once when the caller cancels or goes away; checked before every stage
/// and, inside a guest, at every epoch tick.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
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
    /// Names lower-cased.
    pub headers: Vec<(String, String)>,
    pub client_addr: Option<String>,
}

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
            headers: headers
                .iter()
                .filter_map(|(k, v)| {
                    Some((
                        k.as_str().to_ascii_lowercase(),
                        v.to_str().ok()?.to_string(),
                    ))
                })
                .collect(),
            client_addr: client_addr.map(|a| a.to_string()),
        }
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
        let (tx, mut rx) = mpsc::unbounded_channel();
        let sink = EventSink::new(tx, Some(LogLevel::Warning), false);
        sink.log(LogLevel::Info, "p", "dropped");
        sink.log(LogLevel::Error, "p", "kept");
        sink.progress(1.0, None, None);
        drop(sink);
        let got: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        assert_eq!(got.len(), 1);
        assert!(matches!(&got[0], CallEvent::Log { message, .. } if message == "kept"));
    }
}
