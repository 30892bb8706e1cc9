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

use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt, TraceId, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{SdkTracer, Span};

use super::{CallContext, CallError, ErrorKind, Stage, ToolResult, access};
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
    /// stage of the meta-tool call this one runs inside), or else the
    /// request's `traceparent`; `cx.trace_id` becomes the span's trace id
    /// (when trace ids are on), so the access line and outbound requests
    /// name it.
    pub(super) fn start(metrics: &'m Metrics, tool: &str, cx: &mut CallContext) -> StageClock<'m> {
        let tracer = traces::tracer();
        if tracer.is_none() && !metrics.is_on() {
            return StageClock(None);
        }
        let spans = tracer.map(|tracer| {
            let parent = match &cx.trace_parent {
                Some(stage) => Context::new().with_remote_span_context(stage.clone()),
                None => cx
                    .request
                    .as_ref()
                    .map_or_else(Context::new, |r| traces::incoming_parent(&r.headers)),
            };
            // Only what the MCP conventions ask for: the exporter spends about
            // 1.2k instructions on each string attribute (converting, sizing
            // and encoding it) against some 4.5k for a span without any. The
            // transport is on the access line, which names the same trace
            // id. Sized for every attribute, so the push never regrows it.
            let mut attributes = Vec::with_capacity(4);
            attributes.extend([
                KeyValue::new("mcp.method.name", CALL_METHOD),
                KeyValue::new("gen_ai.tool.name", tool.to_string()),
                KeyValue::new("gen_ai.operation.name", "execute_tool"),
            ]);
            if let Some(session) = &cx.session_id {
                attributes.push(KeyValue::new("mcp.session.id", session.clone()));
            }
            let span = tracer
                .span_builder(call_span_name(tool))
                .with_kind(SpanKind::Server)
                .with_attributes(attributes)
                .start_with_context(tracer, &parent);
            if !cx.trace_id.is_empty() {
                set_hex(&mut cx.trace_id, span.span_context().trace_id());
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
            cx.trace_parent = Some(stage.span_context().clone());
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

/// The MCP method a call span stands for.
const CALL_METHOD: &str = "tools/call";

/// `tools/call <tool>`, the call span's name (MCP semantic conventions),
/// built with one allocation and no formatting machinery: it is made for
/// every traced call.
fn call_span_name(tool: &str) -> String {
    let mut name = String::with_capacity(CALL_METHOD.len() + 1 + tool.len());
    name.push_str(CALL_METHOD);
    name.push(' ');
    name.push_str(tool);
    name
}

/// Overwrites `out` with `id` as 32 lower-case hex digits (the W3C form),
/// reusing its buffer: the call's trace id, rewritten on every traced call.
fn set_hex(out: &mut String, id: TraceId) {
    let mut digits = [0u8; 32];
    // 16 bytes always fit 32 digits, and hex digits are ASCII.
    if hex::encode_to_slice(id.to_bytes(), &mut digits).is_ok()
        && let Ok(digits) = std::str::from_utf8(&digits)
    {
        out.clear();
        out.push_str(digits);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_id_is_written_as_w3c_hex_in_place() {
        let id = TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap();
        let mut out = String::from("an older id that was longer than thirty-two");
        set_hex(&mut out, id);
        assert_eq!(out, id.to_string());
        assert_eq!(out, "4bf92f3577b34da6a3ce929d0e0e4736");
    }

    #[test]
    fn the_call_span_is_named_for_its_tool() {
        assert_eq!(call_span_name("echo"), "tools/call echo");
    }
}
