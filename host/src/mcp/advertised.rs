//! What the server advertises to a client (MCP's `capabilities` object):
//! in the legacy front's `initialize` answer and the modern front's
//! `server/discover`.

use serde_json::{Value, json};

use super::state::McpState;
use hangar_core::call::apps::{APP_MIME_TYPE, UI_EXTENSION};

/// What the server offers now: `listChanged` is true because a reload
/// (plugins or config changed, SIGHUP) sends `notifications/*/list_changed`
/// on the session's GET stream; `subscribe` is true because resource
/// updates are sent there too. Through a toolset, resources and prompts
/// are offered only when it holds some, and the MCP Apps extension only
/// when one of its tools links a view.
pub(super) fn advertised(st: &McpState, toolset: Option<&hangar_core::call::Toolset>) -> Value {
    let pipeline = st.pipeline.current();
    let (offered, scope) = (
        pipeline.catalog().offered(),
        pipeline.catalog().scope(toolset),
    );
    let mut caps = json!({ "tools": { "listChanged": true }, "logging": {} });
    // Code mode lists `hangar://code/tools.d.ts`.
    let artifacts = pipeline.catalog().produces_artifacts()
        || crate::pipeline::meta::offers_run(pipeline.catalog(), toolset);
    let resources = offered.resources.iter().any(|r| scope.resource(&r.def.uri))
        || (offered.templates.iter()).any(|t| scope.resource(&t.def.uri_template));
    if resources || artifacts {
        caps["resources"] = json!({ "subscribe": true, "listChanged": true });
    }
    if offered.prompts.iter().any(|p| scope.prompt(&p.def.name)) {
        caps["prompts"] = json!({ "listChanged": true });
    }
    if offered.completes() {
        caps["completions"] = json!({});
    }
    // MCP Apps: only when a tool of this endpoint links a view.
    if pipeline.catalog().offers_apps(toolset) {
        caps["extensions"] = json!({ UI_EXTENSION: { "mimeTypes": [APP_MIME_TYPE] } });
    }
    caps
}
