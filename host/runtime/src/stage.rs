//! `StageComponent`: what an auth check and a mapper share. Each run gets a
//! slot in the stages pool, a fresh store under the stage's limits (or, when
//! the plugin opted into `instances.reuse`, a warm instance re-armed with
//! them), one exported function called, its stderr logged and its fate
//! settled into a [`CallError`] when it traps, overruns or is cancelled.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::OwnedSemaphorePermit;
use wasmtime::{Engine, Store};

use super::guest_state::{Caller, GuestState, PluginMeta};
use super::limits;
use super::linking;
use super::sched::{Pool, Scheduler};
use super::warm::{Pooled, WarmPool};
use hangar_config::Limits;
use hangar_core::call::{CallContext, CallError, EventSink, Stage};

/// A loaded stage component: its pre-linked instance `P` (the bindings'
/// `AuthPre` or `MapperPre`) and, when the operator opted into reuse, idle
/// instances `B` (the bindings' `Auth` or `Mapper`) kept between runs.
pub struct StageComponent<P, B> {
    pub meta: PluginMeta,
    pub pre: P,
    engine: Engine,
    sched: Arc<Scheduler>,
    warm: WarmPool<StageInstance<B>>,
}

/// A live stage instance: its store, its exports and the slot it occupies.
struct StageInstance<B> {
    store: Store<GuestState>,
    exports: B,
    _slot: OwnedSemaphorePermit,
}

impl<B> Pooled for StageInstance<B> {
    fn store(&self) -> &Store<GuestState> {
        &self.store
    }
}

impl<P, B> StageComponent<P, B> {
    pub fn new(meta: PluginMeta, pre: P, engine: Engine, sched: Arc<Scheduler>) -> Self {
        StageComponent {
            warm: WarmPool::new(meta.reuse.clone()),
            meta,
            pre,
            engine,
            sched,
        }
    }

    pub fn name(&self) -> &str {
        &self.meta.name
    }

    /// Runs `call` on an instance: a warm one when reuse is on and one is
    /// idle, else one `instantiate` makes in a new store. `Ok` holds what the
    /// export returned, including the guest's own error value; `Err` is the
    /// host's verdict (trap, fuel, deadline, memory, cancellation, no free
    /// slot). Only an instance whose run ended cleanly is kept.
    pub async fn run<T>(
        &self,
        stage: Stage,
        cx: &CallContext,
        limits: &Limits,
        events: EventSink,
        instantiate: impl AsyncFnOnce(&P, &mut Store<GuestState>) -> wasmtime::Result<B>,
        call: impl AsyncFnOnce(&B, &mut Store<GuestState>) -> wasmtime::Result<T>,
    ) -> Result<T, CallError>
    where
        B: Send + 'static,
    {
        let (mut live, runs) = match self.warm.take() {
            Some((mut live, runs)) => {
                let store = &mut live.store;
                store
                    .data_mut()
                    .reset_for_call(limits, events, Caller::of(cx));
                limits::arm(store, limits, &cx.cancel, &self.sched);
                (live, runs)
            }
            None => (
                self.instantiate(stage, cx, limits, events, instantiate)
                    .await?,
                0,
            ),
        };
        let deadline = live.store.data().deadline;
        let out = limits::bounded(
            &self.sched,
            deadline,
            limits,
            &cx.cancel,
            stage,
            call(&live.exports, &mut live.store),
        )
        .await;
        limits::log_stderr(&live.store);
        // A trapped, timed-out or cancelled instance is never kept.
        let out = limits::settle(out, &live.store, stage, limits, &cx.cancel)?;
        self.warm.give_back(live, runs + 1);
        Ok(out)
    }

    /// A new instance in a slot of the stages pool, in a store armed with `limits`.
    async fn instantiate(
        &self,
        stage: Stage,
        cx: &CallContext,
        limits: &Limits,
        events: EventSink,
        instantiate: impl AsyncFnOnce(&P, &mut Store<GuestState>) -> wasmtime::Result<B>,
    ) -> Result<StageInstance<B>, CallError> {
        let until = Instant::now() + limits.queue_timeout;
        let slot = self.sched.slot(Pool::Stages, until, stage).await?;
        let mut store = linking::store(
            &self.engine,
            &self.meta,
            limits,
            &cx.cancel,
            events,
            Caller::of(cx),
            &self.sched,
        );
        let deadline = store.data().deadline;
        let out = limits::bounded(
            &self.sched,
            deadline,
            limits,
            &cx.cancel,
            stage,
            instantiate(&self.pre, &mut store),
        )
        .await;
        limits::log_stderr(&store);
        let exports = limits::settle(out, &store, stage, limits, &cx.cancel)?;
        Ok(StageInstance {
            store,
            exports,
            _slot: slot,
        })
    }
}
