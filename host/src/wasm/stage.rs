//! `StageComponent`: what an auth check and a mapper share. Each run gets a
//! slot in the stages pool, a fresh store under the stage's limits, one
//! exported function called, its stderr logged and its fate settled into a
//! [`CallError`] when it traps, overruns or is cancelled.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::{Engine, Store};

use super::limits;
use super::sched::{Pool, Scheduler};
use super::state::{self, GuestState, PluginMeta};
use crate::call::{CallContext, CallError, EventSink, Stage};
use crate::config::Limits;

/// A loaded stage component: its pre-linked instance `P` (the bindings'
/// `AuthPre` or `MapperPre`), instantiated fresh for every run.
pub struct StageComponent<P> {
    pub meta: PluginMeta,
    pub pre: P,
    engine: Engine,
    sched: Arc<Scheduler>,
}

impl<P> StageComponent<P> {
    pub fn new(meta: PluginMeta, pre: P, engine: Engine, sched: Arc<Scheduler>) -> Self {
        StageComponent {
            meta,
            pre,
            engine,
            sched,
        }
    }

    pub fn name(&self) -> &str {
        &self.meta.name
    }

    /// Runs `call` (instantiate, then call one export) in a new store.
    /// `Ok` holds what the export returned, including the guest's own
    /// error value; `Err` is the host's verdict (trap, fuel, deadline,
    /// memory, cancellation, no free slot).
    pub async fn run<T>(
        &self,
        stage: Stage,
        cx: &CallContext,
        limits: &Limits,
        events: EventSink,
        call: impl AsyncFnOnce(&P, &mut Store<GuestState>) -> wasmtime::Result<T>,
    ) -> Result<T, CallError> {
        let until = Instant::now() + limits.queue_timeout;
        let _slot = self.sched.slot(Pool::Stages, until, stage).await?;
        let mut store = state::store(
            &self.engine,
            &self.meta,
            limits,
            &cx.cancel,
            events,
            super::tool::trace(cx),
            &self.sched,
        );
        let deadline = store.data().deadline;
        let out = limits::bounded(
            deadline,
            limits,
            &cx.cancel,
            stage,
            call(&self.pre, &mut store),
        )
        .await;
        limits::log_stderr(&store);
        limits::settle(out, &store, stage, limits, &cx.cancel)
    }
}
