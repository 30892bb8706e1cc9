//! Watching one call go through the stages. [`StageClock`] notes when each
//! stage starts and ends: stage latency for [`Metrics`] and, when traces are
//! exported ([`crate::traces`]), a span per call (`tools/call <tool>`, with
//! the MCP semantic-convention attributes) and a child span per stage that
//! runs something: the auth check, each mapper, the handler. Stages that
//! only look at the call (rate limit, validation) are timed but get no span
//! of their own; a call that fails in one names it on the call's span
//! (`hangar.stage`). Spans cost the exporter on the same cores: an echo
//! call makes two, not seven.
//! [`ended`] counts the call once it is over, with its stages' times. The
//! clock lives on the stack of [`super::Pipeline::call`] and is handed to
//! every stage boundary.

use opentelemetry::trace::{SpanId, TraceId};

use super::access;
use crate::metrics::{CallOutcome, Metrics, StageTimes, UNKNOWN_TOOL};
use crate::traces::{self, Parent, SpanClock, SpanRecord, Tracer, What};
use hangar_core::call::Tick;
use hangar_core::call::{CallContext, CallError, ErrorKind, Stage, ToolResult};

/// The running stage of one call and when it began; inert (and free) when
/// neither metrics nor traces are on.
#[derive(Default)]
pub(super) struct StageClock(Option<Clock>);

struct Clock {
    /// Whether metrics are on: stage times are kept only then.
    timed: bool,
    current: Option<(Stage, Tick)>,
    /// The stages that ended, and how long each took.
    times: StageTimes,
    spans: Option<Spans>,
}

/// The call's span and the running stage's, each handed to the tracer
/// when it ends (the call's with its tool and session, borrowed then).
struct Spans {
    tracer: &'static Tracer,
    clock: SpanClock,
    trace_id: TraceId,
    span_id: SpanId,
    parent: Option<Parent>,
    /// The running stage's span: its stage, id and start.
    stage: Option<(Stage, SpanId, u64)>,
}

impl StageClock {
    /// A clock for a call of `tool` that starts now, in its resolve stage.
    /// With traces on, the call's span continues `cx.trace_parent` (the
    /// stage of the meta-tool call this one runs inside), or else the
    /// request's `traceparent`; `cx.trace_id` becomes the span's trace id
    /// (when trace ids are on), so the access line and outbound requests
    /// name it. An unsampled call records no span; the calls inside it
    /// follow its decision.
    pub(super) fn start(metrics: &Metrics, tool: &str, cx: &mut CallContext) -> StageClock {
        let tracer = traces::tracer();
        if tracer.is_none() && !metrics.is_on() {
            return StageClock(None);
        }
        let now = Tick::now();
        let spans = tracer.and_then(|tracer| start_call_span(tracer, tool, cx, now));
        StageClock(Some(Clock {
            timed: metrics.is_on(),
            current: Some((Stage::Resolve, now)),
            times: StageTimes::default(),
            spans,
        }))
    }

    /// Ends the running stage and starts `next`; `traced`: it runs a
    /// component or backend and gets a span. With traces on, a call made
    /// inside a traced stage continues its span (`cx.trace_parent`).
    pub(super) fn enter(&mut self, next: Stage, traced: bool, cx: &mut CallContext) {
        let Some(clock) = &mut self.0 else { return };
        let now = Tick::now();
        clock.stop(now, None);
        clock.current = Some((next, now));
        if !traced {
            return;
        }
        if let Some(spans) = &mut clock.spans {
            let span_id = spans.tracer.new_span_id();
            cx.trace_parent = Some(traces::context_of(spans.trace_id, span_id, true));
            spans.stage = Some((next, span_id, spans.clock.nanos(now)));
        }
    }

    /// Ends the running stage and the call's span: the call of `tool`
    /// (in `session`, if any) is over. Returns how long each stage took,
    /// for [`ended`].
    pub(super) fn finish(
        self,
        tool: &str,
        session: Option<&str>,
        outcome: &Result<ToolResult, CallError>,
    ) -> StageTimes {
        let Some(mut clock) = self.0 else {
            return StageTimes::default();
        };
        let error = match outcome {
            Ok(r) if r.is_error => Some("tool_error"),
            Ok(_) => None,
            Err(e) => Some(e.kind.as_str()),
        };
        let failed_in = clock.current.map(|(stage, _)| stage);
        let now = Tick::now();
        clock.stop(now, error);
        if let Some(spans) = clock.spans.take() {
            spans.tracer.record(&SpanRecord {
                trace_id: spans.trace_id,
                span_id: spans.span_id,
                parent: spans.parent,
                what: What::Call {
                    tool,
                    session,
                    failed_in: error.and(failed_in).map(Stage::as_str),
                },
                start: spans.clock.start(),
                end: spans.clock.nanos(now),
                error,
            });
        }
        clock.times
    }
}

/// The call's span, started at `now`, or `None` when the sampler drops it.
fn start_call_span(
    tracer: &'static Tracer,
    tool: &str,
    cx: &mut CallContext,
    now: Tick,
) -> Option<Spans> {
    let (parent, remote) = match &cx.trace_parent {
        Some(stage) => (Some(stage.clone()), false),
        None => (
            cx.request.as_ref().and_then(|r| traces::incoming_parent(r)),
            true,
        ),
    };
    // Without a parent the span takes the call's own id: an error answered
    // with `cx.trace_id` (cloned before the call) names the exported trace.
    let own = TraceId::from_hex(&cx.trace_id).ok();
    let started = tracer.start(parent.as_ref(), own, tool);
    if !cx.trace_id.is_empty() {
        set_hex(&mut cx.trace_id, started.trace_id);
    }
    if !started.sampled {
        cx.trace_parent = Some(traces::context_of(started.trace_id, started.span_id, false));
        return None;
    }
    let clock = SpanClock::new(now);
    Some(Spans {
        tracer,
        clock,
        trace_id: started.trace_id,
        span_id: started.span_id,
        parent: parent.map(|p| Parent {
            span_id: p.span_id(),
            remote,
        }),
        stage: None,
    })
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

impl Clock {
    /// Ends the running stage (its span failed with `error`, if any).
    fn stop(&mut self, now: Tick, error: Option<&'static str>) {
        if let Some((stage, since)) = self.current.take()
            && self.timed
        {
            self.times.set(stage, now.since(since));
        }
        if let Some(spans) = &mut self.spans
            && let Some((stage, span_id, start)) = spans.stage.take()
        {
            spans.tracer.record(&SpanRecord {
                trace_id: spans.trace_id,
                span_id,
                parent: Some(Parent {
                    span_id: spans.span_id,
                    remote: false,
                }),
                what: What::Stage(stage),
                start,
                end: spans.clock.nanos(now),
                error,
            });
        }
    }
}

/// Counts a finished call of `tool` that burned `fuel`, and times its `stages`.
pub(super) fn ended(
    metrics: &Metrics,
    tool: &str,
    cx: &CallContext,
    outcome: &Result<ToolResult, CallError>,
    fuel: u64,
    stages: StageTimes,
) {
    let (result, stage) = access::outcome(outcome);
    let unknown = matches!(outcome, Err(e) if e.kind == ErrorKind::NotFound);
    metrics.call_ended(CallOutcome {
        tool: if unknown { UNKNOWN_TOOL } else { tool },
        stage,
        outcome: result,
        fuel,
        dropped_events: cx.events.dropped(),
        stages,
        in_program: cx.in_program,
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
}
