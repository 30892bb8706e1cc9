//! `ClientAsks`: what a client declared in `initialize` that the server may
//! use on its calls (the questions it answers, MCP Apps).

/// The server-to-client requests a client declared it handles.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientAsks {
    pub elicitation: bool,
    /// URL-mode elicitation (2025-11-25: `elicitation: { url: {} }`).
    pub elicitation_url: bool,
    pub sampling: bool,
    pub roots: bool,
    /// Not a question the server asks: the client renders MCP Apps (it
    /// declared the `io.modelcontextprotocol/ui` extension with its MIME
    /// type), kept with the rest of what `initialize` declared.
    pub apps: bool,
}

impl ClientAsks {
    /// From `initialize`'s `params.capabilities`.
    pub fn from_capabilities(caps: Option<&serde_json::Value>) -> ClientAsks {
        let has = |name: &str| {
            caps.and_then(|c| c.get(name))
                .is_some_and(|v| v.is_object())
        };
        ClientAsks {
            elicitation: has("elicitation"),
            elicitation_url: caps
                .and_then(|c| c.pointer("/elicitation/url"))
                .is_some_and(|v| v.is_object()),
            sampling: has("sampling"),
            roots: has("roots"),
            apps: hangar_core::call::apps::client_runs_apps(caps),
        }
    }
}
