//! The one way every call goes: resolve → auth → input map → validate →
//! execute → output map. Surfaces (MCP, REST) build a [`CallContext`] and
//! hand the call to [`Pipeline::call`]; stages know nothing of transports.

mod access;
mod adapters;
mod code;
mod connected;
mod door;
mod failures;
mod files;
mod live;
pub mod meta;
mod observe;
mod offers;
mod present;
mod setup;

use serde_json::{Value, json};

pub use door::Door;
pub use failures::AuthFailures;
use hangar_core::call::{
    CallContext, CallError, ErrorKind, Principal, RequestInfo, Stage, ToolResult, Toolset,
};
pub use live::Live;
pub use setup::Pipeline;

use crate::catalog::{Backend, CatalogTool};

impl Pipeline {
    /// Runs one call through every stage; the first stage that fails ends
    /// it, and no later stage runs. The auth stage sets `cx.principal`.
    /// Each call leaves one access line in the log (`hangar::access`).
    pub async fn call(
        &self,
        name: &str,
        args: Value,
        cx: &mut CallContext,
    ) -> Result<ToolResult, CallError> {
        let started = std::time::Instant::now();
        // A meta-tool's inner call is timed and counted on its own, and
        // its span is a child of the outer call's running stage.
        let outer = cx.trace_parent.clone();
        let mut clock = observe::StageClock::start(&self.metrics, name, cx);
        let fuel_before = cx.usage.fuel();
        let outcome = self.run_stages(name, args, cx, &mut clock).await;
        let stages = clock.finish(name, cx.session_id.as_deref(), &outcome);
        cx.trace_parent = outer;
        access::log(name, cx, &outcome, started.elapsed());
        let fuel = cx.usage.fuel() - fuel_before;
        observe::ended(&self.metrics, name, cx, &outcome, fuel, stages);
        outcome
    }

    async fn run_stages(
        &self,
        name: &str,
        args: Value,
        cx: &mut CallContext,
        clock: &mut observe::StageClock,
    ) -> Result<ToolResult, CallError> {
        if meta::is_meta(&self.catalog, cx.toolset.as_ref(), name) {
            // A meta-tool runs as the call's handler: the calls it makes
            // (call_tool's, a program's) are spans under its own.
            proceed(cx, clock, Stage::Handler, true)?;
            return self.call_meta(name, args, cx).await;
        }
        let tool = self.resolve(name, cx.toolset.as_ref())?;
        let stages = &tool.stages;
        cx.events
            .set_budget(tool.limits.max_events, tool.limits.max_event_bytes);

        // A tool shown only to some callers needs to know who calls, and
        // answers exactly as an unknown tool to anyone else.
        let hidden = stages.visible_to.is_some();
        let default_auth = if hidden {
            self.catalog.default_auth()
        } else {
            None
        };
        let auth = stages.auth.as_ref().or(default_auth);
        // A toolset's own auth check (`[toolsets.NAME] auth`) comes first.
        let gate = self.catalog.scope(cx.toolset.as_ref()).auth();
        proceed(cx, clock, Stage::Auth, auth.is_some() || gate.is_some())?;
        if let Some(gate) = gate {
            let principal = self.door.check(gate, name, cx).await?;
            cx.principal = Some(with_access_token(principal, cx));
        }
        if let Some(auth) = auth {
            match self.door.check(auth, name, cx).await {
                Ok(principal) => cx.principal = Some(with_access_token(principal, cx)),
                Err(e) if hidden && e.kind == ErrorKind::Unauthorized => {
                    return Err(CallError::not_found(name));
                }
                Err(e) => return Err(e),
            }
        }
        if !stages.visible(cx.principal.as_ref()) {
            return Err(CallError::not_found(name));
        }
        if let Some(required) = stages.missing_scopes(cx.principal.as_ref()) {
            return Err(CallError::insufficient_scope(name, required));
        }
        // A definition changed under the session (`pinning = "block"`).
        if let Some(pins) = &cx.pins
            && let Some(refused) =
                hangar_core::call::pins::refusal(pins, self.catalog.pinning(), &*tool.current_def())
        {
            tracing::warn!(tool = name, session = ?cx.session_id, "call refused: {}", refused.message);
            return Err(refused);
        }

        proceed(cx, clock, Stage::RateLimit, false)?;
        tool.rate.admit(cx).await?;

        proceed(cx, clock, Stage::InputMap, stages.input_map.is_some())?;
        let mut args = match &stages.input_map {
            None => args,
            Some(m) => {
                let payload = InputPayload {
                    tool: name,
                    arguments: &args,
                    principal: cx.principal.as_ref(),
                };
                m.plugin
                    .map(Stage::InputMap, &payload, "arguments", cx, &m.limits)
                    .await?
            }
        };

        proceed(cx, clock, Stage::Validate, false)?;
        if let Backend::Sql(db) = &tool.backend {
            // Inputs bound from claims never come from the caller.
            db.drop_claim_inputs(&mut args);
        }
        let mut args = stages.validator.validate(args)?;
        // Upload handles are the caller's own, or the call goes no further.
        let staged = self.stage_files(&tool, &mut args, cx).await?;

        proceed(cx, clock, Stage::Handler, true)?;
        let mut outcome = execute(&tool, &args, cx, &staged).await;
        self.finish_files(&staged, &mut outcome, cx).await;
        drop(staged);
        let result = outcome?;
        // State sync: a successful write makes the reads it names stale.
        let invalidated = (!stages.invalidates.is_empty() && !result.is_error)
            .then(|| self.catalog.invalidate(&stages.invalidates));

        proceed(cx, clock, Stage::OutputMap, stages.output_map.is_some())?;
        let mut result = match &stages.output_map {
            None => result,
            Some(m) => {
                let payload = OutputPayload {
                    tool: name,
                    arguments: &args,
                    result: &result,
                };
                m.plugin
                    .map(Stage::OutputMap, &payload, "CallToolResult", cx, &m.limits)
                    .await?
            }
        };
        // Most tools declare no output schema or cut: no stage to time.
        if !stages.output.is_idle() {
            proceed(cx, clock, Stage::Output, false)?;
            self.present(name, &stages.output, &mut result)?;
        }
        if let Some(invalidated) = invalidated {
            result.set_meta(INVALIDATED_META, json!(invalidated));
        }
        Ok(result)
    }
}

impl Pipeline {
    /// A client session ended (deleted or expired): the upstream sessions
    /// opened for it are closed, in the background.
    pub fn session_ended(&self, session_id: &str) {
        for upstream in self.catalog.upstreams() {
            upstream.end_client_session(session_id);
        }
    }

    /// Who the server-wide `[auth]` check says sends an HTTP request that is
    /// no call (`/uploads`, `/connect`), if there is one and it accepts.
    /// `counted`: a refusal counts against the client's `auth_failures`;
    /// uncounted, a throttled client is not checked at all.
    pub async fn request_principal(
        &self,
        request: RequestInfo,
        counted: bool,
    ) -> Option<Principal> {
        let auth = self.catalog.default_auth()?;
        let mut cx = CallContext::new(None);
        cx.request = Some(std::sync::Arc::new(request));
        if counted {
            self.door.check(auth, "", &cx).await.ok()
        } else {
            self.door.identify(auth, "", &cx).await
        }
    }

    /// Who is asking for a listing, when the catalog shows some tools only to
    /// some callers: the server-wide auth check's principal, if it accepts.
    /// Through a toolset with its own auth check, the one that check
    /// accepts (none: the listings show nothing).
    pub async fn listing_principal(&self, cx: &CallContext) -> Option<Principal> {
        if let Some(gate) = self.catalog.scope(cx.toolset.as_ref()).auth() {
            return self.door.lister(gate, cx).await;
        }
        if !self.catalog.has_restricted() && !self.catalog.requires_any() {
            return None;
        }
        // Without a server-wide check, the bearer token's principal (if any).
        let Some(auth) = self.catalog.default_auth() else {
            return cx.principal.clone();
        };
        self.door.lister(auth, cx).await
    }

    /// Who calls the tool `name`, before the call runs (for quotas kept per
    /// caller, such as tasks): the bearer token's principal, or the one the
    /// tool's auth check (the server-wide one, for a hidden tool) accepts.
    /// `None`: anonymous — no check, or it refused (the call will say why).
    pub async fn caller(&self, name: &str, cx: &CallContext) -> Option<Principal> {
        if let Some(principal) = &cx.principal {
            return Some(principal.clone());
        }
        let tool = self.resolve(name, cx.toolset.as_ref()).ok()?;
        let stages = &tool.stages;
        let auth = match &stages.auth {
            Some(auth) => auth,
            None if stages.visible_to.is_some() => self.catalog.default_auth()?,
            None => return None,
        };
        // Through the door (a throttled client is not checked), uncounted:
        // the call that follows counts its own refusal.
        self.door.identify(auth, name, cx).await
    }

    /// The tool `name` as a request through `toolset` finds it: one outside
    /// the toolset is not found, exactly as an unknown one.
    pub fn resolve(
        &self,
        name: &str,
        toolset: Option<&Toolset>,
    ) -> Result<std::sync::Arc<CatalogTool>, CallError> {
        if !self.catalog.scope(toolset).tool(name) {
            return Err(CallError::not_found(name));
        }
        self.catalog.resolve(name)
    }

    /// The definitions `tools/list` shows a caller through `toolset`, in
    /// order (without the tools `hide_unconnected` hides from it).
    pub async fn listed<'a>(
        &'a self,
        principal: Option<&'a Principal>,
        toolset: Option<&Toolset>,
    ) -> Vec<std::borrow::Cow<'a, crate::catalog::ToolDef>> {
        use hangar_config::CatalogMode;
        use std::borrow::Cow;
        let mode = self.catalog.mode_for(toolset);
        let mut listed = Vec::new();
        let scope = self.catalog.scope(toolset);
        if !scope.admits(principal) {
            return listed;
        }
        for def in meta::definitions(&self.catalog, toolset) {
            listed.push(Cow::Borrowed(def));
        }
        if !matches!(mode, CatalogMode::Meta | CatalogMode::Code) {
            let hidden = self.unconnected(principal).await;
            // An upstream's tool as it is now, not as it was at startup.
            listed.extend(
                (self.catalog.visible(principal))
                    .filter(|t| scope.tool(&t.def.name) && !hidden.hides(&t.stages))
                    .map(|t| t.current_def()),
            );
        }
        listed
    }
}

/// What an input mapper is given: `{"tool", "arguments", "principal"}`.
#[derive(serde::Serialize)]
struct InputPayload<'a> {
    tool: &'a str,
    arguments: &'a Value,
    principal: Option<&'a Principal>,
}

/// What an output mapper is given: `{"tool", "arguments", "result"}`.
#[derive(serde::Serialize)]
struct OutputPayload<'a> {
    tool: &'a str,
    arguments: &'a Value,
    result: &'a ToolResult,
}

/// `principal`, as an auth check named it, with the OAuth access token the
/// request came with when the check names the token's own subject (an
/// upstream's token exchange acts on it). A check naming someone else gets
/// none: the token is not theirs to exchange.
fn with_access_token(mut principal: Principal, cx: &CallContext) -> Principal {
    if principal.access_token.is_none()
        && let Some(door) = &cx.principal
        && door.subject == principal.subject
    {
        principal.access_token = door.access_token.clone();
    }
    principal
}

/// Stops the call before `next` if its caller cancelled it.
fn not_cancelled(cx: &CallContext, next: Stage) -> Result<(), CallError> {
    if cx.cancel.is_cancelled() {
        return Err(CallError::cancelled(next));
    }
    Ok(())
}

/// Stops the call before `next` if its caller cancelled it, and times
/// `next` from now on (with a span of its own when `traced`).
fn proceed(
    cx: &mut CallContext,
    clock: &mut observe::StageClock,
    next: Stage,
    traced: bool,
) -> Result<(), CallError> {
    not_cancelled(cx, next)?;
    clock.enter(next, traced, cx);
    Ok(())
}

/// `_meta` key of the tools and resources whose cached results a call
/// invalidated (`[[tools]] invalidates`).
pub const INVALIDATED_META: &str = "hangar/invalidated";

async fn execute(
    tool: &CatalogTool,
    args: &Value,
    cx: &CallContext,
    staged: &files::Staged,
) -> Result<ToolResult, CallError> {
    match &tool.backend {
        Backend::Wasm {
            plugin,
            guest_name,
            gate,
        } => {
            plugin
                .call(
                    cx,
                    guest_name,
                    args,
                    &tool.limits,
                    gate.as_deref(),
                    &staged.preopens(),
                )
                .await
        }
        Backend::Sql(db) => {
            db.execute(args, cx.principal.as_ref(), &cx.cancel, &staged.blobs)
                .await
        }
        Backend::Upstream { upstream, remote } => upstream.call(remote, args, cx).await,
        Backend::UploadUrl(helper) => Ok(adapters::upload_url(helper, cx)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hangar_core::call::AccessToken;

    #[test]
    fn a_check_naming_the_tokens_subject_keeps_the_token_and_another_does_not() {
        let mut cx = CallContext::new(None);
        let mut door = Principal::new("alice", json!({}));
        door.access_token = Some(AccessToken::new("the-token"));
        cx.principal = Some(door);
        let same = with_access_token(Principal::new("alice", json!({"role": "x"})), &cx);
        assert_eq!(
            same.access_token.map(|t| t.secret().to_string()),
            Some("the-token".into())
        );
        let other = with_access_token(Principal::new("mallory", json!({})), &cx);
        assert!(other.access_token.is_none());
        assert!(!format!("{same_debug:?}", same_debug = cx.principal).contains("the-token"));
    }
}
