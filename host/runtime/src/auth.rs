//! `AuthPlugin`: a loaded component of the `auth` world.

use std::sync::Arc;

use wasmtime::component::{Component, Linker};

use super::bindings::auth::{Auth, AuthPre};
use super::bindings::tool::hangar::plugin::types as wit;
use super::guest_state::{GuestState, PluginMeta};
use super::linking;
use super::sched::Scheduler;
use super::stage::StageComponent;
use hangar_config::Limits;
use hangar_core::call::{
    CallContext, CallError, ErrorKind, EventSink, Principal, RequestInfo, Stage, Surface,
};

/// An auth check, instantiated fresh for every call it guards (or kept warm
/// between calls when the operator opted into `instances.reuse`).
pub struct AuthPlugin(StageComponent<AuthPre<GuestState>, Auth>);

impl AuthPlugin {
    pub fn new(
        meta: PluginMeta,
        component: &Component,
        linker: &Linker<GuestState>,
        sched: Arc<Scheduler>,
    ) -> anyhow::Result<AuthPlugin> {
        let pre = AuthPre::new(linking::instance_pre(linker, component)?)
            .map_err(|e| anyhow::anyhow!("not an auth component: {e:?}"))?;
        let engine = pre.engine().clone();
        Ok(AuthPlugin(StageComponent::new(meta, pre, engine, sched)))
    }

    pub fn name(&self) -> &str {
        self.0.name()
    }

    /// Runs `authenticate`. A refusal is `Unauthorized` with a generic
    /// message; the plugin's reason, and whatever it logs, go to the log
    /// only. No free instance slot is `busy:`, not a refusal.
    pub async fn authenticate(
        &self,
        tool: &str,
        policy: &str,
        cx: &CallContext,
        limits: &Limits,
    ) -> Result<Principal, CallError> {
        let request = request_context(tool, cx);
        // No event sink: what the check logs goes to the host log only,
        // never to the caller (it would tell a hidden tool from an unknown one).
        let events = EventSink::default();
        let out = self
            .0
            .run(
                Stage::Auth,
                cx,
                limits,
                events,
                async |pre, store| pre.instantiate_async(store).await,
                async |auth, store| auth.call_authenticate(store, &request, policy).await,
            )
            .await;
        let unauthorized = || CallError::new(Stage::Auth, ErrorKind::Unauthorized, "Unauthorized");
        match out {
            Ok(Ok(p)) => Ok(Principal::new(
                p.subject,
                serde_json::from_str(&p.claims).unwrap_or(serde_json::Value::Null),
            )),
            Ok(Err(e)) => {
                tracing::info!(plugin = %self.name(), tool, trace_id = %cx.trace_id, "unauthorized: {}", e.message);
                Err(unauthorized())
            }
            Err(failure) if failure.kind == ErrorKind::Cancelled => Err(failure),
            Err(failure) => {
                // A broken auth check denies: never let a call through on a trap.
                tracing::warn!(plugin = %self.name(), tool, trace_id = %cx.trace_id, "auth check failed: {}", failure.message);
                Err(unauthorized())
            }
        }
    }
}

fn request_context(tool: &str, cx: &CallContext) -> wit::RequestContext {
    let default = RequestInfo::default();
    let req = cx.request.as_deref().unwrap_or(&default);
    wit::RequestContext {
        tool: tool.to_string(),
        transport: match req.surface {
            Surface::Mcp => wit::Transport::Mcp,
            Surface::Rest => wit::Transport::Rest,
        },
        method: req.method.clone(),
        path: req.path.clone(),
        headers: req.header_pairs(),
        client_addr: req.client_addr.map(|a| a.to_string()),
        session_id: cx.session_id.clone(),
        trace_id: cx.trace_id.clone(),
    }
}
