//! OpenTelemetry traces, configured by the standard environment
//! (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`,
//! `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`,
//! `OTEL_BSP_*`; OTLP over HTTP with protobuf). With no endpoint set
//! nothing is built and [`tracer`] is `None`: the pipeline then makes no
//! span at all.
//!
//! The pieces: the OpenTelemetry SDK decides what it is good at deciding
//! (the sampler, ids, the resource, all from the environment; the two
//! samplers that keep every trace they may are decided here, see
//! [`Sampling`]); the
//! pipeline (`pipeline::observe`) hands finished spans over as plain
//! [`SpanRecord`]s, which [`encode`] writes in OTLP protobuf into the
//! queue of [`export`], whose thread batches and posts them. The SDK's
//! own span objects and the opentelemetry-otlp exporter are not used: together they cost an echo
//! call ~19k instructions (5k on the request path, 14k encoding on the
//! exporter thread), where the whole call is ~135k (see `encode`).

mod encode;
mod export;
mod local;
mod sampling;
mod span;
mod tracer;

pub use local::on_park;

use std::sync::Arc;

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::Config;

use hangar_core::call::RequestInfo;

use sampling::Sampling;
pub use span::{Parent, SpanClock, SpanRecord, What};
use tracer::TRACER;
pub use tracer::{Tracer, tracer};

/// A call span's identity, as [`Tracer::start`] decided it.
pub struct Started {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    /// Whether the span is recorded and exported; an unsampled call makes
    /// no span, but its children still follow its decision.
    pub sampled: bool,
}

impl Tracer {
    /// Starts the span of a call of `tool` under `parent`: the trace id is
    /// the parent's, else `own` (the id the call was given when it began,
    /// already named in its answers and logs), else a new one; the sampler
    /// decides whether it is kept. The sampler is told the tool's name, not the span's whole
    /// name (`tools/call <tool>`), which would cost an allocation per call
    /// for samplers that do not read it (the standard ones do not).
    pub fn start(&self, parent: Option<&SpanContext>, own: Option<TraceId>, tool: &str) -> Started {
        let parent = parent.filter(|p| p.is_valid());
        let trace_id = match (parent, own.filter(|id| *id != TraceId::INVALID)) {
            (Some(p), _) => p.trace_id(),
            (None, Some(own)) => own,
            (None, None) => self.ids.new_trace_id(),
        };
        let sampled = self.sampling.sampled(parent, trace_id, tool);
        Started {
            trace_id,
            span_id: self.ids.new_span_id(),
            sampled,
        }
    }

    /// A new span id (a stage's span).
    pub fn new_span_id(&self) -> SpanId {
        self.ids.new_span_id()
    }

    /// Hands a finished span to the exporter, encoded (see [`local`]).
    pub fn record(&self, span: &SpanRecord) {
        local::record(self, span);
    }
}

/// The span context a call made inside `span_id` continues.
pub fn context_of(trace_id: TraceId, span_id: SpanId, sampled: bool) -> SpanContext {
    let flags = if sampled {
        TraceFlags::SAMPLED
    } else {
        TraceFlags::default()
    };
    SpanContext::new(trace_id, span_id, flags, false, TraceState::NONE)
}

/// The running exporter; dropping it without [`Traces::shutdown`] may
/// lose the last batch.
pub struct Traces {
    exporter: export::Exporter,
}

/// Starts exporting when the environment names an endpoint
/// (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`).
pub fn init() -> anyhow::Result<Option<Traces>> {
    let Some(settings) = export::Settings::from_env() else {
        return Ok(None);
    };
    if let Ok(protocol) = std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL")
        && protocol != "http/protobuf"
    {
        tracing::warn!(
            "OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: Hangar exports traces as http/protobuf only"
        );
    }
    // The SDK's defaults read the environment: OTEL_TRACES_SAMPLER(_ARG),
    // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES.
    let config = Config::default();
    let envelope = Arc::new(encode::Envelope::new(&config.resource, "hangar"));
    tracing::info!("traces: exporting to {}", settings.endpoint);
    let exporter = export::Exporter::start(settings, envelope.clone())?;
    let tracer = Tracer {
        sampling: Sampling::from_env(config.sampler),
        ids: config.id_generator,
        envelope,
        queue: exporter.queue().clone(),
    };
    if TRACER.set(tracer).is_err() {
        anyhow::bail!("traces were started twice");
    }
    Ok(Some(Traces { exporter }))
}

impl Traces {
    /// Exports what is still queued and stops.
    pub fn shutdown(self) {
        self.exporter.shutdown();
    }
}

/// The parent an incoming W3C `traceparent` (and `tracestate`) names, from
/// the request as the call context keeps it. Without a `traceparent` the
/// call starts a trace of its own: the common case, answered by the header
/// lookup [`RequestInfo::new`] made, without the propagator's parse.
pub fn incoming_parent(request: &RequestInfo) -> Option<SpanContext> {
    request.traceparent.as_ref()?;
    let cx = TraceContextPropagator::new().extract(&Headers(&request.headers));
    let span = cx.span();
    let parent = span.span_context();
    parent.is_valid().then(|| parent.clone())
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
        let request = |headers| {
            RequestInfo::new(
                hangar_core::call::Surface::Mcp,
                "POST",
                "/mcp",
                &headers,
                None,
            )
        };
        let sc = incoming_parent(&request(headers)).unwrap();
        assert!(sc.is_remote());
        assert_eq!(
            sc.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(sc.span_id().to_string(), "00f067aa0ba902b7");
        assert!(incoming_parent(&request(Default::default())).is_none());
    }
}
