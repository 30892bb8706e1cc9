//! How a code-mode program (the `run` tool) calls tools: [`ProgramCalls`],
//! implemented by the pipeline and handed down to the code sandbox, so the
//! sandbox (a backend, in `wasm/`) makes whole pipeline calls without
//! naming the pipeline above it.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use super::context::CallContext;
use super::error::CallError;
use super::result::ToolResult;

/// A future a [`ProgramCalls`] answers; owned, so the sandbox can run many
/// at once on tasks of their own.
pub type ProgramCall = Pin<Box<dyn Future<Output = Result<ToolResult, CallError>> + Send>>;

/// One program's way out of its sandbox: every call goes through every
/// stage (resolve, auth with the caller's credentials, mappers,
/// validation, rate limits, execution) as a call of the program's caller.
pub trait ProgramCalls: Send + Sync {
    /// Calls the tool `name` with `arguments`; `cx` is the run's context,
    /// readied for this call (its own cancel token, its parent span).
    fn call(&self, name: String, arguments: Value, cx: CallContext) -> ProgramCall;
}
