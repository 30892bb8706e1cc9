//! The `program-tools` import: the calls a running program makes, each a
//! task of its own (so `Promise.all` runs them together, up to
//! `max_parallel_calls`), each a whole pipeline call through the
//! [`ProgramCalls`] the run was given.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use crate::bindings::code::hangar::plugin::program_tools as wit;
use crate::sched::LaneTurn;
use hangar_core::call::{
    CallContext, CallError, CallUsage, CancelToken, Content, ProgramCalls, ToolResult,
};

/// What a run allows its program's calls.
#[derive(Debug, Clone, Copy)]
pub struct CallBudget {
    /// Calls running at once; later ones wait for one to end.
    pub parallel: u32,
    /// Calls one run may make in all.
    pub total: u32,
}

/// The calls of the run a store belongs to; `None` in every other store
/// (whose components cannot import `program-tools` anyway: only the code
/// sandbox is linked with it).
#[derive(Default)]
pub struct ProgramState(Option<Running>);

struct Running {
    calls: Arc<dyn ProgramCalls>,
    /// The run's context, which each call's is made from.
    cx: CallContext,
    /// Cancelled when the run ends, however it ends: calls its program
    /// started and never waited for stop with it.
    stop: CancelToken,
    parallel: Arc<Semaphore>,
    budget: CallBudget,
    started: u32,
    pending: HashMap<u32, JoinHandle<Result<ToolResult, CallError>>>,
    /// The store's CPU turn, given back while the program waits.
    turn: LaneTurn,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl ProgramState {
    /// The state of one run: its program's calls go through `calls`, as
    /// calls made in `cx`.
    pub fn new(
        calls: Arc<dyn ProgramCalls>,
        cx: &CallContext,
        budget: CallBudget,
        turn: LaneTurn,
    ) -> Self {
        ProgramState(Some(Running {
            calls,
            cx: cx.clone(),
            stop: CancelToken::default(),
            parallel: Arc::new(Semaphore::new(budget.parallel.max(1) as usize)),
            budget,
            started: 0,
            pending: HashMap::new(),
            turn,
        }))
    }

    /// How many calls the program started.
    pub fn started(&self) -> u32 {
        self.0.as_ref().map_or(0, |r| r.started)
    }
}

fn failure(code: &str, stage: &str, message: impl Into<String>) -> wit::CallFailure {
    wit::CallFailure {
        code: code.into(),
        stage: stage.into(),
        message: message.into(),
    }
}

impl Running {
    fn start(&mut self, name: String, arguments: String) -> Result<u32, wit::CallFailure> {
        if self.started >= self.budget.total {
            return Err(failure(
                "limit",
                "resolve",
                format!(
                    "max_tool_calls of {} exceeded: a run may make at most {} tool calls",
                    self.budget.total, self.budget.total
                ),
            ));
        }
        let arguments: Value = serde_json::from_str(&arguments).map_err(|e| {
            failure(
                "invalid",
                "validate",
                format!("arguments are not JSON: {e}"),
            )
        })?;
        self.started += 1;
        let handle = self.started;
        // The call's own cancel token and usage: cancelling the run, or
        // the run ending, cancels it; its fuel is its own call's.
        let token = CancelToken::default();
        let mut cx = self.cx.clone();
        cx.cancel = token.clone();
        cx.usage = CallUsage::default();
        cx.in_program = true;
        let call = self.calls.call(name, arguments, cx);
        let (parallel, stop, outer) = (
            self.parallel.clone(),
            self.stop.clone(),
            self.cx.cancel.clone(),
        );
        let task = tokio::spawn(async move {
            let ended = async {
                tokio::select! {
                    _ = stop.cancelled() => {},
                    _ = outer.cancelled() => {},
                }
            };
            tokio::pin!(ended);
            let _permit = tokio::select! {
                permit = parallel.acquire_owned() => permit.ok(),
                _ = &mut ended => return Err(CallError::cancelled(hangar_core::call::Stage::Resolve)),
            };
            tokio::pin!(call);
            tokio::select! {
                out = &mut call => out,
                _ = &mut ended => {
                    // The call sees the cancel at its next stage or tick,
                    // and ends as cancelled.
                    token.cancel();
                    call.await
                }
            }
        });
        self.pending.insert(handle, task);
        Ok(handle)
    }
}

/// What the program gets of a call's result: its structured content when
/// it has one, else its text (JSON text either way); a tool error is a
/// failure with code `tool_error`.
fn answer(out: Result<ToolResult, CallError>) -> Result<String, wit::CallFailure> {
    let result = match out {
        Ok(result) => result,
        Err(e) => return Err(failure(e.kind.as_str(), e.stage.as_str(), e.message)),
    };
    let text = || {
        let texts: Vec<&str> = result
            .content
            .iter()
            .filter_map(|c| match c {
                Content::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        texts.join("\n")
    };
    if result.is_error {
        return Err(failure("tool_error", "handler", text()));
    }
    let value = match &result.structured_content {
        Some(value) => value.clone(),
        None if result
            .content
            .iter()
            .all(|c| matches!(c, Content::Text { .. })) =>
        {
            Value::String(text())
        }
        // Images, audio, links: the program gets the blocks as MCP has them.
        None => serde_json::to_value(&result.content).unwrap_or(Value::Null),
    };
    Ok(value.to_string())
}

impl wit::Host for ProgramState {
    fn start(&mut self, name: String, arguments: String) -> Result<u32, wit::CallFailure> {
        match &mut self.0 {
            Some(running) => running.start(name, arguments),
            None => Err(failure("failed", "resolve", "no tools in this sandbox")),
        }
    }

    async fn finish(&mut self, call: u32) -> Result<String, wit::CallFailure> {
        let Some(running) = self.0.as_mut() else {
            return Err(failure("failed", "resolve", "no tools in this sandbox"));
        };
        let Some(task) = running.pending.remove(&call) else {
            return Err(failure(
                "invalid",
                "resolve",
                format!("no call {call} is running"),
            ));
        };
        // Waiting, the program runs no guest code: its CPU turn is given
        // back, so the calls it waits for (guests themselves) can run.
        running.turn.release();
        match task.await {
            Ok(out) => answer(out),
            Err(e) => Err(failure(
                "failed",
                "handler",
                format!("the call ended abnormally: {e}"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hangar_core::call::{ErrorKind, Stage};
    use serde_json::json;

    fn text(t: &str) -> Content {
        Content::Text { text: t.into() }
    }

    #[test]
    fn a_program_gets_structured_content_else_text() {
        let mut r = ToolResult {
            content: vec![text("{\"a\":1}")],
            structured_content: Some(json!({"a": 1})),
            is_error: false,
            meta: None,
        };
        assert_eq!(answer(Ok(r.clone())).unwrap(), "{\"a\":1}");
        r.structured_content = None;
        r.content = vec![text("one"), text("two")];
        assert_eq!(answer(Ok(r)).unwrap(), "\"one\\ntwo\"");
    }

    #[test]
    fn a_tool_error_and_a_call_error_are_failures_with_code_and_stage() {
        let f = answer(Ok(ToolResult::error("nope"))).unwrap_err();
        assert_eq!(
            (f.code.as_str(), f.stage.as_str(), f.message.as_str()),
            ("tool_error", "handler", "nope")
        );
        let f = answer(Err(CallError::new(
            Stage::Auth,
            ErrorKind::Unauthorized,
            "who?",
        )))
        .unwrap_err();
        assert_eq!(
            (f.code.as_str(), f.stage.as_str(), f.message.as_str()),
            ("unauthorized", "auth", "who?")
        );
    }
}
