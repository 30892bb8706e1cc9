//! OpenTelemetry traces, configured by the standard environment
//! (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`,
//! `OTEL_SERVICE_NAME`, `OTEL_BSP_*`; OTLP over HTTP with protobuf). With
//! no endpoint set nothing is built and [`tracer`] is `None`: the pipeline
//! then makes no span at all. This module owns the process's tracer
//! provider (set once at startup, flushed by [`Traces::shutdown`]); the
//! spans themselves are made by `pipeline::observe`. The SDK's own
//! warnings reach the log: a failed export, and spans thrown away because
//! the batch queue was full (the exporter thread fell behind), counted
//! again at shutdown (`dropped_span_count`).

use std::sync::OnceLock;

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};

static TRACER: OnceLock<SdkTracer> = OnceLock::new();

/// The process's tracer, when traces are exported.
pub fn tracer() -> Option<&'static SdkTracer> {
    TRACER.get()
}

/// The exporting provider; dropping it without [`Traces::shutdown`] may
/// lose the last batch.
pub struct Traces {
    provider: SdkTracerProvider,
}

/// Whether the environment asks for traces.
pub fn wanted() -> bool {
    [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|var| std::env::var(var).is_ok_and(|v| !v.trim().is_empty()))
}

/// Starts exporting when the environment asks for it (see [`wanted`]).
/// Must run outside the async runtime: the exporter's blocking HTTP client
/// owns a runtime of its own.
pub fn init() -> anyhow::Result<Option<Traces>> {
    if !wanted() {
        return Ok(None);
    }
    if let Ok(protocol) = std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL")
        && protocol != "http/protobuf"
    {
        tracing::warn!(
            "OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: Hangar exports traces as http/protobuf only"
        );
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .build();
    let _ = TRACER.set(provider.tracer("hangar"));
    Ok(Some(Traces { provider }))
}

impl Traces {
    /// Exports what is still queued and stops.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!("flushing traces at shutdown: {e}");
        }
    }
}

/// The W3C header that names a call's parent span.
static TRACEPARENT: axum::http::HeaderName = axum::http::HeaderName::from_static("traceparent");

/// The parent an incoming W3C `traceparent` (and `tracestate`) names, from
/// request headers as the call context keeps them (names lower-cased).
/// Without a `traceparent` the call starts a trace of its own: the common
/// case, answered by one lookup of a prebuilt header name rather than the
/// propagator's parse of the name and clone of the current context.
pub fn incoming_parent(headers: &axum::http::HeaderMap) -> opentelemetry::Context {
    if !headers.contains_key(&TRACEPARENT) {
        return opentelemetry::Context::new();
    }
    TraceContextPropagator::new().extract(&Headers(headers))
}

struct Headers<'a>(&'a axum::http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|name| name.as_str()).collect()
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::TraceContextExt;

    use super::*;

    #[test]
    fn an_incoming_traceparent_is_the_parent() {
        let mut headers = axum::http::HeaderMap::new();
        headers.insert(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
                .parse()
                .unwrap(),
        );
        let parent = incoming_parent(&headers);
        let span = parent.span();
        let sc = span.span_context();
        assert!(sc.is_remote());
        assert_eq!(
            sc.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(sc.span_id().to_string(), "00f067aa0ba902b7");
        assert!(!incoming_parent(&Default::default()).has_active_span());
    }
}
