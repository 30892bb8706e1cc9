//! The 2025 revisions (2025-11-25, also 2025-06-18 and 2025-03-26), the
//! "legacy" front: sessions opened by `initialize` (kept in
//! `mcp/session/`), the session's GET SSE stream of unprompted messages,
//! `logging/setLevel` and resource subscriptions per session, client
//! notifications, and a call's questions to the client sent as
//! server-to-client requests on its SSE stream (`mcp/questions.rs`), whose
//! answers come back as POSTed JSON-RPC responses.
//!
//! The shared handlers see this front through `Front` (`front.rs`), as they
//! see the modern one: plain results and codes, what the session declared.
//! Here: `post` answers one message by kind and method, `front` the
//! `Front`, `lifecycle` `initialize`, notifications and `logging/setLevel`,
//! `stream` the session's GET stream (which the stdio transport relays).

mod front;
mod lifecycle;
mod post;
mod stream;

pub(super) use post::post;
pub(super) use stream::session_stream;
