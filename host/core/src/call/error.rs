//! `CallError`: why a call stopped, and at which stage. It knows nothing of
//! HTTP or JSON-RPC; each surface maps it in one place.

use std::fmt;

/// The pipeline's stages, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Resolve,
    Auth,
    /// A tool whose definition changed under the session (`pinning = "block"`).
    Pinning,
    InputMap,
    RateLimit,
    Validate,
    Env,
    Connector,
    Handler,
    /// An upstream MCP server's call (unreachable, timed out, breaker open).
    Upstream,
    OutputMap,
    /// The presenter: a result checked against the tool's `outputSchema`.
    Output,
}

impl Stage {
    /// How many stages there are (for tables indexed by `stage as usize`;
    /// `Output` is the last variant).
    pub const COUNT: usize = Stage::Output as usize + 1;

    /// Every stage, in order: `ALL[stage as usize] == stage`.
    pub const ALL: [Stage; Stage::COUNT] = [
        Stage::Resolve,
        Stage::Auth,
        Stage::Pinning,
        Stage::InputMap,
        Stage::RateLimit,
        Stage::Validate,
        Stage::Env,
        Stage::Connector,
        Stage::Handler,
        Stage::Upstream,
        Stage::OutputMap,
        Stage::Output,
    ];

    /// The name used in messages and in `data.stage`.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Resolve => "resolve",
            Stage::Auth => "auth",
            Stage::Pinning => "pinning",
            Stage::InputMap => "input_map",
            Stage::RateLimit => "rate_limit",
            Stage::Validate => "validate",
            Stage::Env => "env",
            Stage::Connector => "connector",
            Stage::Handler => "handler",
            Stage::Upstream => "upstream",
            Stage::OutputMap => "output_map",
            Stage::Output => "output",
        }
    }
}

/// What kind of failure it was; surfaces choose status codes from this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    NotFound,
    Unauthorized,
    Invalid,
    /// A fuel, deadline, memory or output limit was reached.
    Limit,
    /// No concurrency permit or instance slot came free in time; the
    /// message starts with `busy:` and the caller may retry.
    Busy,
    /// The caller is over a rate limit; `retry_after` says for how long.
    RateLimited,
    /// The caller's token lacks a scope the tool needs (`required_scope`).
    InsufficientScope,
    Cancelled,
    Failed,
}

impl ErrorKind {
    /// The name used in logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not_found",
            ErrorKind::Unauthorized => "unauthorized",
            ErrorKind::Invalid => "invalid",
            ErrorKind::Limit => "limit",
            ErrorKind::Busy => "busy",
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::InsufficientScope => "insufficient_scope",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::Failed => "failed",
        }
    }
}

/// A call that did not produce a result.
#[derive(Debug, Clone)]
pub struct CallError {
    pub stage: Stage,
    pub kind: ErrorKind,
    /// Safe to show to the caller.
    pub message: String,
    /// When the caller may try again (rate limits).
    pub retry_after: Option<std::time::Duration>,
    /// The scopes the call needs, space-separated (insufficient scope).
    pub required_scope: Option<String>,
    /// An upstream MCP server's JSON-RPC error object, which the MCP
    /// surface passes on unchanged.
    pub upstream_error: Option<serde_json::Value>,
}

impl CallError {
    pub fn new(stage: Stage, kind: ErrorKind, message: impl Into<String>) -> CallError {
        CallError {
            stage,
            kind,
            message: message.into(),
            retry_after: None,
            required_scope: None,
            upstream_error: None,
        }
    }

    pub fn not_found(tool: &str) -> CallError {
        CallError::new(
            Stage::Resolve,
            ErrorKind::NotFound,
            format!("Tool not found: {tool}"),
        )
    }

    pub fn resource_not_found(uri: &str) -> CallError {
        CallError::new(
            Stage::Resolve,
            ErrorKind::NotFound,
            format!("Resource not found: {uri}"),
        )
    }

    pub fn prompt_not_found(name: &str) -> CallError {
        CallError::new(
            Stage::Resolve,
            ErrorKind::NotFound,
            format!("Prompt not found: {name}"),
        )
    }

    pub fn rate_limited(message: String, retry_after: std::time::Duration) -> CallError {
        CallError {
            retry_after: Some(retry_after),
            ..CallError::new(Stage::RateLimit, ErrorKind::RateLimited, message)
        }
    }

    pub fn insufficient_scope(tool: &str, required: String) -> CallError {
        CallError {
            required_scope: Some(required),
            ..CallError::new(
                Stage::Auth,
                ErrorKind::InsufficientScope,
                format!("insufficient scope: tool {tool} needs a scope the token lacks"),
            )
        }
    }

    pub fn cancelled(stage: Stage) -> CallError {
        CallError::new(stage, ErrorKind::Cancelled, "request cancelled")
    }
}

impl fmt::Display for CallError {
    /// `stage: message`, except for resolution, whose message stands alone.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.stage, self.kind) {
            // Resolution's message stands alone; auth's is only ever
            // "Unauthorized"; busy's starts with `busy:` so callers can match it.
            (Stage::Resolve, _) | (_, ErrorKind::Unauthorized | ErrorKind::Busy) => {
                f.write_str(&self.message)
            }
            (stage, _) => write!(f, "{}: {}", stage.as_str(), self.message),
        }
    }
}

impl std::error::Error for CallError {}
