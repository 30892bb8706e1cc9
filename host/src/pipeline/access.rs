//! The access log: one line per call (target `hangar::access`, so
//! `RUST_LOG=hangar::access=off` silences it) with the tool, who called,
//! over what, how it ended and how long it took — never the arguments.

use std::time::Duration;

use hangar_core::call::{CallContext, CallError, Surface, ToolResult};

pub(super) fn log(
    tool: &str,
    cx: &CallContext,
    outcome: &Result<ToolResult, CallError>,
    took: Duration,
) {
    let transport = match cx.request.as_ref().map(|r| r.surface) {
        _ if cx.in_program => "code",
        Some(Surface::Rest) => "rest",
        Some(Surface::Mcp) => "mcp",
        None => "internal",
    };
    let principal = cx.principal.as_ref().map_or("-", |p| p.subject.as_str());
    let (outcome, stage) = self::outcome(outcome);
    tracing::info!(
        target: "hangar::access",
        tool,
        principal,
        transport,
        outcome,
        stage,
        ms = took.as_secs_f64() * 1000.0,
        trace_id = %cx.trace_id,
        "call"
    );
}

/// How a call ended and in which stage: `("ok", "-")`, `("tool_error",
/// "handler")` or the error's kind and stage. The access line and the
/// call counter say it alike.
pub(super) fn outcome(outcome: &Result<ToolResult, CallError>) -> (&'static str, &'static str) {
    match outcome {
        Ok(r) if r.is_error => ("tool_error", "handler"),
        Ok(_) => ("ok", "-"),
        Err(e) => (e.kind.as_str(), e.stage.as_str()),
    }
}
