//! What one call carries through the pipeline besides its arguments: its
//! trace id, session, principal, request, event sink, cancel token, usage
//! and pins, each its own file's type, put together here.

use std::sync::Arc;

use super::cancel::CancelToken;
use super::events::EventSink;
use super::principal::Principal;
use super::request::RequestInfo;
use super::usage::CallUsage;

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
    /// The toolset the request came through: what is outside it answers as
    /// what does not exist. `None`: the whole catalog.
    pub toolset: Option<super::toolset::Toolset>,
    /// Made by a code-mode program (`run`): its access line and metrics
    /// say `transport="code"`.
    pub in_program: bool,
}

impl CallContext {
    /// The `Host` its request was sent to, for absolute URLs in answers.
    pub fn host(&self) -> Option<String> {
        let request = self.request.as_ref()?;
        let host = request.headers.get(axum::http::header::HOST)?;
        host.to_str().ok().map(str::to_string)
    }

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
                .unwrap_or_else(fresh_trace_id),
            ..CallContext::default()
        }
    }
}

/// A fresh trace id: a random UUID as 32 lower-case hex digits, written
/// straight into its string (not through `Display`'s formatter).
fn fresh_trace_id() -> String {
    let mut digits = [0u8; uuid::fmt::Simple::LENGTH];
    uuid::Uuid::new_v4()
        .simple()
        .encode_lower(&mut digits)
        .to_owned()
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
}
