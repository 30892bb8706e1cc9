//! Watching one call go through the stages. [`StageClock`] notes when each
//! stage starts and ends: stage latency for [`Metrics`] and, when traces are
//! exported ([`crate::traces`]), a span per call (`tools/call <tool>`, with
//! the MCP semantic-convention attributes) and a child span per stage that
//! runs something: the auth check, each mapper, the handler. Stages that
//! only look at the call (rate limit, validation) are timed but get no span
//! of their own; a call that fails in one names it on the call's span
//! (`hangar.stage`). Spans cost the exporter on the same cores: an echo
//! call makes two, not seven.
//! [`ended`] counts the call once it is over. The clock lives on the stack
//! of [`super::Pipeline::call`] and is handed to every stage boundary.

use std::time::Instant;

use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{SdkTracer, Span};

use super::{CallContext, CallError, ErrorKind, Stage, ToolResult, Transport, access};
use crate::metrics::{CallOutcome, Metrics, UNKNOWN_TOOL};
use crate::traces;

/// The running stage of one call and when it began; inert (and free) when
/// neither metrics nor traces are on.
#[derive(Default)]
pub(super) struct StageClock<'m>(Option<Clock<'m>>);

struct Clock<'m> {
    metrics: &'m Metrics,
    current: Option<(Stage, Instant)>,
    spans: Option<Spans>,
}

/// The call's span (inside its context, the parent of every stage span)
/// and the running stage's span.
struct Spans {
    tracer: &'static SdkTracer,
    call: Context,
    stage: Option<Span>,
}

impl<'m> StageClock<'m> {
    /// A clock for a call of `tool` that starts now, in its resolve stage.
    /// With traces on, the call's span continues `cx.trace_parent` (the
    /// meta-tool call this one runs inside), or else the request's
    /// `traceparent`; `cx.trace_id` becomes the span's trace id (when trace
    /// ids are on), so the access line and outbound requests name it.
    pub(super) fn start(metrics: &'m Metrics, tool: &str, cx: &mut CallContext) -> StageClock<'m> {
        let tracer = traces::tracer();
        if tracer.is_none() && !metrics.is_on() {
            return StageClock(None);
        }
        let spans = tracer.map(|tracer| {
            let parent = cx.trace_parent.clone().unwrap_or_else(|| {
                cx.request
                    .as_ref()
                    .map_or_else(Context::new, |r| traces::incoming_parent(&r.headers))
            });
            let mut attributes = vec![
                KeyValue::new("mcp.method.name", "tools/call"),
                KeyValue::new("gen_ai.tool.name", tool.to_string()),
                KeyValue::new("gen_ai.operation.name", "execute_tool"),
            ];
            if let Some(session) = &cx.session_id {
                attributes.push(KeyValue::new("mcp.session.id", session.clone()));
            }
            let transport = match cx.request.as_ref().map(|r| r.transport) {
                Some(Transport::Rest) => "rest",
                Some(Transport::Mcp) => "mcp",
                None => "internal",
            };
            attributes.push(KeyValue::new("hangar.transport", transport));
            let span = tracer
                .span_builder(format!("tools/call {tool}"))
                .with_kind(SpanKind::Server)
                .with_attributes(attributes)
                .start_with_context(tracer, &parent);
            if !cx.trace_id.is_empty() {
                cx.trace_id = span.span_context().trace_id().to_string();
            }
            Spans {
                tracer,
                call: parent.with_span(span),
                stage: None,
            }
        });
        StageClock(Some(Clock {
            metrics,
            current: Some((Stage::Resolve, Instant::now())),
            spans,
        }))
    }

    /// Ends the running stage and starts `next`; `traced`: it runs a
    /// component or backend and gets a span. With traces on, a call made
    /// inside a traced stage continues its span (`cx.trace_parent`).
    pub(super) fn enter(&mut self, next: Stage, traced: bool, cx: &mut CallContext) {
        let Some(clock) = &mut self.0 else { return };
        let now = Instant::now();
        clock.stop(now, None);
        clock.current = Some((next, now));
        if !traced {
            return;
        }
        if let Some(spans) = &mut clock.spans {
            let stage = spans
                .tracer
                .span_builder(next.as_str())
                .with_attributes([KeyValue::new("hangar.stage", next.as_str())])
                .start_with_context(spans.tracer, &spans.call);
            cx.trace_parent = Some(
                spans
                    .call
                    .with_remote_span_context(stage.span_context().clone()),
            );
            spans.stage = Some(stage);
        }
    }

    /// Ends the running stage and the call's span: the call is over.
    pub(super) fn finish(self, outcome: &Result<ToolResult, CallError>) {
        let Some(mut clock) = self.0 else { return };
        let error = match outcome {
            Ok(r) if r.is_error => Some("tool_error"),
            Ok(_) => None,
            Err(e) => Some(e.kind.as_str()),
        };
        let failed_in = clock.current.map(|(stage, _)| stage);
        clock.stop(Instant::now(), error);
        if let Some(spans) = clock.spans.take() {
            let span = spans.call.span();
            if let Some(error) = error {
                span.set_attribute(KeyValue::new("error.type", error));
                if let Some(stage) = failed_in {
                    span.set_attribute(KeyValue::new("hangar.stage", stage.as_str()));
                }
                span.set_status(Status::error(error));
            }
            span.end();
        }
    }
}

impl Clock<'_> {
    /// Ends the running stage (its span failed with `error`, if any).
    fn stop(&mut self, now: Instant, error: Option<&'static str>) {
        if let Some((stage, since)) = self.current.take() {
            self.metrics.stage_took(stage, now.duration_since(since));
        }
        if let Some(mut span) = self.spans.as_mut().and_then(|s| s.stage.take()) {
            if let Some(error) = error {
                span.set_attribute(KeyValue::new("error.type", error));
                span.set_status(Status::error(error));
            }
            span.end();
        }
    }
}

/// Counts a finished call of `tool` that burned `fuel`.
pub(super) fn ended(
    metrics: &Metrics,
    tool: &str,
    cx: &CallContext,
    outcome: &Result<ToolResult, CallError>,
    fuel: u64,
) {
    let (result, stage) = access::outcome(outcome);
    let unknown = matches!(outcome, Err(e) if e.kind == ErrorKind::NotFound);
    metrics.call_ended(CallOutcome {
        tool: if unknown { UNKNOWN_TOOL } else { tool },
        stage,
        outcome: result,
        fuel,
        dropped_events: cx.events.dropped(),
    });
}
