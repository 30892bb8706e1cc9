//! MCP 2026-07-28, the "modern" revision: the front that translates it to
//! and from the handlers the 2025 revisions share, on the same `/mcp`
//! endpoint. A modern request carries its protocol version and the
//! client's capabilities in `params._meta` and in headers; there is no
//! session and no `initialize`. The shared handlers name nothing here:
//! they call this front through `Front` and `Rounds` (`mcp/request.rs`).
//!
//! Here only the module declarations: `admit` decides which revision a
//! POST speaks and checks a modern request's `_meta` and headers before
//! anything runs, `post` dispatches, `front` is the front itself (its
//! state, [`Modern`], and one admitted request), `result` turns answers
//! into modern results (`resultType`, the server's identity, caching
//! hints), `codes` holds the revision's error codes, `rounds` / `state`
//! the input-required rounds and their sealed `requestState`, `listen`
//! `subscriptions/listen`, `tasks` / `task_calls` / `task_input` /
//! `waiting` the tasks extension.

mod admit;
pub(super) mod codes;
mod front;
mod headers;
mod listen;
mod meta;
mod post;
mod result;
mod rounds;
mod state;
mod task_calls;
mod task_input;
mod tasks;
mod waiting;

pub(super) use admit::era;
pub use front::Modern;
pub(super) use post::post;
