//! Every JSON-RPC request method `/mcp` answers, each named once, with the
//! revisions that speak it ([`Era`]); and [`answer`], which runs the shared
//! handler of a method both fronts speak. Each front's dispatch reads a
//! method here ([`Method::spoken_in`]), answers its own methods itself, and
//! hands the rest to [`answer`]: neither front writes a method's name.

use axum::response::Response;

use super::calls;
use super::listing::tools_list;
use super::offers;
use super::request::Request;
use super::state::McpState;

/// Which revision one message speaks, and so which front answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// 2025-11-25 and earlier: `initialize`, sessions, server-to-client
    /// requests (the legacy front, `mcp/legacy/`).
    Legacy,
    /// 2026-07-28: stateless, everything in each request (the modern
    /// front, `mcp/modern/`).
    Modern,
}

/// Which revisions speak a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spoken {
    Both,
    Legacy,
    Modern,
}

/// Declares the table: the `Method` enum, each method's name and who speaks it.
macro_rules! methods {
    ($( $(#[$doc:meta])* $method:ident = $name:literal, $spoken:ident; )+) => {
        /// A request method of MCP that `/mcp` answers.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Method {
            $( $(#[$doc])* $method, )+
        }

        impl Method {
            /// Every method, in the table's order.
            pub const ALL: &'static [Method] = &[$( Method::$method, )+];

            /// The method's name on the wire.
            pub fn name(self) -> &'static str {
                match self {
                    $( Method::$method => $name, )+
                }
            }

            fn spoken(self) -> Spoken {
                match self {
                    $( Method::$method => Spoken::$spoken, )+
                }
            }
        }
    };
}

methods! {
    /// Liveness; answered with `{}`.
    Ping = "ping", Legacy;
    /// Opens a session.
    Initialize = "initialize", Legacy;
    /// The session's log level.
    SetLogLevel = "logging/setLevel", Legacy;
    ToolsList = "tools/list", Both;
    ToolsCall = "tools/call", Both;
    ResourcesList = "resources/list", Both;
    TemplatesList = "resources/templates/list", Both;
    ResourcesRead = "resources/read", Both;
    /// A session's subscription to a resource's updates.
    Subscribe = "resources/subscribe", Legacy;
    Unsubscribe = "resources/unsubscribe", Legacy;
    PromptsList = "prompts/list", Both;
    PromptsGet = "prompts/get", Both;
    Complete = "completion/complete", Both;
    /// The revisions spoken and what is offered, without a session.
    Discover = "server/discover", Modern;
    /// A stream of changes and task updates, in place of a session's GET stream.
    Listen = "subscriptions/listen", Modern;
    TasksGet = "tasks/get", Modern;
    TasksCancel = "tasks/cancel", Modern;
    TasksUpdate = "tasks/update", Modern;
}

impl Method {
    /// The method named `name`, if `era` speaks it; `None` is "method not
    /// found" for that front.
    pub fn spoken_in(name: &str, era: Era) -> Option<Method> {
        let method = Method::ALL.iter().copied().find(|m| m.name() == name)?;
        match (method.spoken(), era) {
            (Spoken::Both, _) | (Spoken::Legacy, Era::Legacy) | (Spoken::Modern, Era::Modern) => {
                Some(method)
            }
            _ => None,
        }
    }
}

/// Answers `req` with the handler both fronts share for `method`; `None`
/// for a method only one front speaks, which that front answers itself.
///
/// Every handler but `tools/call`'s (whose pipeline runs boxed in a task of
/// its own) is boxed where it is awaited: inline, the largest of them (~4.5
/// KB) would size the dispatch's future, which axum boxes, and copies, for
/// every request.
pub(super) async fn answer(st: &McpState, method: Method, req: Request<'_>) -> Option<Response> {
    Some(match method {
        Method::ToolsCall => calls::tools_call(st, req).await,
        Method::ToolsList => Box::pin(tools_list(st, &req)).await,
        Method::ResourcesList => Box::pin(offers::resources_list(st, &req)).await,
        Method::TemplatesList => Box::pin(offers::templates_list(st, &req)).await,
        Method::ResourcesRead => Box::pin(offers::resources_read(st, &req)).await,
        Method::PromptsList => Box::pin(offers::prompts_list(st, &req)).await,
        Method::PromptsGet => Box::pin(offers::prompts_get(st, &req)).await,
        Method::Complete => Box::pin(offers::complete(st, &req)).await,
        Method::Ping
        | Method::Initialize
        | Method::SetLogLevel
        | Method::Subscribe
        | Method::Unsubscribe
        | Method::Discover
        | Method::Listen
        | Method::TasksGet
        | Method::TasksCancel
        | Method::TasksUpdate => return None,
    })
}
