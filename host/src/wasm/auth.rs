//! `AuthPlugin`: a loaded component of the `auth` world.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::{Component, Linker};

use super::bindings::auth::AuthPre;
use super::bindings::tool::hangar::plugin::types as wit;
use super::limits;
use super::sched::{Pool, Scheduler};
use super::state::{self, GuestState, PluginMeta};
use crate::config::Limits;
use crate::pipeline::{
    CallContext, CallError, ErrorKind, EventSink, Principal, RequestInfo, Stage, Transport,
};

/// An auth check, instantiated fresh for every call it guards.
pub struct AuthPlugin {
    meta: PluginMeta,
    pre: AuthPre<GuestState>,
    sched: Arc<Scheduler>,
}

impl AuthPlugin {
    pub fn new(
        meta: PluginMeta,
        component: &Component,
        linker: &Linker<GuestState>,
        sched: Arc<Scheduler>,
    ) -> anyhow::Result<AuthPlugin> {
        let pre = AuthPre::new(state::instance_pre(linker, component)?)
            .map_err(|e| anyhow::anyhow!("not an auth component: {e:?}"))?;
        Ok(AuthPlugin { meta, pre, sched })
    }

    pub fn name(&self) -> &str {
        &self.meta.name
    }

    /// Runs `authenticate`. A refusal is `Unauthorized` with a generic
    /// message; the plugin's reason, and whatever it logs, go to the log only. No free instance
    /// slot is `busy:`, not a refusal.
    pub async fn authenticate(
        &self,
        tool: &str,
        policy: &str,
        cx: &CallContext,
        limits: &Limits,
    ) -> Result<Principal, CallError> {
        let until = Instant::now() + limits.queue_timeout;
        let _slot = self.sched.slot(Pool::Stages, until, Stage::Auth).await?;
        // No event sink: what the check logs goes to the host log only,
        // never to the caller (it would tell a hidden tool from an unknown one).
        let mut store = state::store(
            self.pre.engine(),
            &self.meta,
            limits,
            &cx.cancel,
            EventSink::default(),
            super::tool::trace(cx),
            &self.sched,
        );
        let request = request_context(tool, cx);
        let deadline = store.data().deadline;
        let out = limits::bounded(deadline, limits, &cx.cancel, Stage::Auth, async {
            let auth = self.pre.instantiate_async(&mut store).await?;
            auth.call_authenticate(&mut store, &request, policy).await
        })
        .await;
        limits::log_stderr(&store);
        match limits::settle(out, &store, Stage::Auth, limits, &cx.cancel) {
            Ok(Ok(p)) => Ok(Principal {
                claims: serde_json::from_str(&p.claims).unwrap_or(serde_json::Value::Null),
                subject: p.subject,
            }),
            Ok(Err(e)) => {
                tracing::info!(plugin = %self.meta.name, tool, trace_id = %cx.trace_id, "unauthorized: {}", e.message);
                Err(CallError::new(
                    Stage::Auth,
                    ErrorKind::Unauthorized,
                    "Unauthorized",
                ))
            }
            Err(failure) => {
                if failure.kind == ErrorKind::Cancelled {
                    return Err(failure);
                }
                // A broken auth check denies: never let a call through on a trap.
                tracing::warn!(plugin = %self.meta.name, tool, trace_id = %cx.trace_id, "auth check failed: {}", failure.message);
                Err(CallError::new(
                    Stage::Auth,
                    ErrorKind::Unauthorized,
                    "Unauthorized",
                ))
            }
        }
    }
}

fn request_context(tool: &str, cx: &CallContext) -> wit::RequestContext {
    let default = RequestInfo::default();
    let req = cx.request.as_deref().unwrap_or(&default);
    wit::RequestContext {
        tool: tool.to_string(),
        transport: match req.transport {
            Transport::Mcp => wit::Transport::Mcp,
            Transport::Rest => wit::Transport::Rest,
        },
        method: req.method.clone(),
        path: req.path.clone(),
        headers: req.headers.clone(),
        client_addr: req.client_addr.clone(),
        session_id: cx.session_id.clone(),
        trace_id: cx.trace_id.clone(),
    }
}
