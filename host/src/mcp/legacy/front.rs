//! [`Legacy`]: the 2025 revisions' side of the shared handlers. Results and
//! error codes are MCP's plain ones; what the client declared (its log
//! level, whether it renders MCP Apps, which questions it answers) is its
//! session's, from `initialize`; a call's questions go out on the call's
//! own SSE stream, so there are no rounds.

use serde_json::Value;

use crate::mcp::jsonrpc::RpcError;
use crate::mcp::request::{Front, Request, Rounds};
use hangar_core::call::{Askable, LogLevel};

/// The legacy front. It keeps nothing of its own: its state (the sessions,
/// the questions waiting for answers) is the shared handlers' `McpState`,
/// which they read through `Request::session`.
pub(super) struct Legacy;

impl Front for Legacy {
    fn reshapes(&self) -> bool {
        false
    }

    fn result(&self, _: &Request<'_>, result: Value) -> Value {
        result
    }

    fn error_code(&self, code: i64) -> i64 {
        code
    }

    /// The level the session set with `logging/setLevel`.
    fn log_level(&self, req: &Request<'_>) -> Option<LogLevel> {
        req.session.as_ref().and_then(|s| s.log_level())
    }

    /// Declared in the session's `initialize`; a request without a session
    /// declared nothing.
    fn runs_apps(&self, req: &Request<'_>) -> bool {
        req.session.as_ref().is_some_and(|s| s.runs_apps())
    }

    /// What the session declared it answers, when the answer may be a
    /// stream to send the questions on.
    fn askable(&self, req: &Request<'_>, sse: bool) -> Askable {
        match (&req.session, sse) {
            (_, false) => {
                Askable::No("the request did not accept an SSE stream (text/event-stream)")
            }
            (None, true) => {
                Askable::No("the call has no MCP session, so the client's capabilities are unknown")
            }
            (Some(session), true) => session.askable(),
        }
    }

    fn rounds(
        &self,
        _: &Request<'_>,
        _: &str,
        _: &Value,
    ) -> Result<Option<Box<dyn Rounds>>, RpcError> {
        Ok(None)
    }
}
