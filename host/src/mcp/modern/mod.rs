//! MCP 2026-07-28, the "modern" revision, beside the 2025 revisions on the
//! same `/mcp` endpoint. A modern request carries its protocol version and
//! the client's capabilities in `params._meta` and in headers; there is no
//! session and no `initialize`. Here only the module declarations: `admit`
//! decides which revision a POST speaks and checks a modern request's
//! `_meta` and headers before anything runs, `result` turns answers into
//! modern results (`resultType`, the server's identity, caching hints),
//! `codes` holds the revision's error codes, `post` dispatches, `rounds`
//! the input-required rounds, `listen` `subscriptions/listen`, `tasks` /
//! `task_calls` / `task_input` / `waiting` the tasks extension.

mod admit;
pub(in crate::mcp) mod codes;
mod headers;
mod listen;
pub(in crate::mcp) mod meta;
mod post;
pub(in crate::mcp) mod result;
pub(in crate::mcp) mod rounds;
pub(in crate::mcp) mod state;
pub(in crate::mcp) mod task_calls;
mod task_input;
pub(in crate::mcp) mod tasks;
mod waiting;

pub use admit::{Era, era};
pub(super) use post::post;
