//! Linking a component against the host imports, and a fresh `Store` of
//! [`GuestState`] for each call, armed with its limits. Above `guest_state.rs`,
//! `limits.rs` and `capability/`, which it wires in.

use std::sync::Arc;

use wasmtime::component::Linker;

use super::capability::files::Preopens;
use super::guest_state::{Caller, GuestState, PluginMeta};
use super::sched::Scheduler;
use hangar_core::call::EventSink;

/// Pre-links a component against Hangar's imports, once, at load time.
pub fn instance_pre(
    linker: &Linker<GuestState>,
    component: &wasmtime::component::Component,
) -> anyhow::Result<wasmtime::component::InstancePre<GuestState>> {
    linker
        .instantiate_pre(component)
        .map_err(|e| anyhow::anyhow!("cannot link: {e:?}"))
}

/// Adds every capability's imports (`capability::link`: WASI p2,
/// `wasi:http`, and the `hangar:plugin` ones) to a linker.
pub fn link(linker: &mut Linker<GuestState>) -> anyhow::Result<()> {
    super::capability::link::<GuestState>(linker)
}

/// A fresh store for one call of `plugin`, armed with `limits`.
pub fn store(
    engine: &wasmtime::Engine,
    plugin: &PluginMeta,
    limits: &hangar_config::Limits,
    cancel: &hangar_core::call::CancelToken,
    events: EventSink,
    caller: Caller<'_>,
    sched: &Arc<Scheduler>,
) -> wasmtime::Store<GuestState> {
    let state = GuestState::new(plugin, limits, events, caller);
    let mut store = wasmtime::Store::new(engine, state);
    super::limits::arm(&mut store, limits, cancel, sched);
    store
}

/// [`store`], with the call's folders mounted.
#[allow(clippy::too_many_arguments)]
pub fn store_with(
    engine: &wasmtime::Engine,
    plugin: &PluginMeta,
    limits: &hangar_config::Limits,
    cancel: &hangar_core::call::CancelToken,
    events: EventSink,
    caller: Caller<'_>,
    sched: &Arc<Scheduler>,
    preopens: &Preopens,
) -> anyhow::Result<wasmtime::Store<GuestState>> {
    let state = GuestState::with_preopens(plugin, limits, events, caller, preopens)?;
    let mut store = wasmtime::Store::new(engine, state);
    super::limits::arm(&mut store, limits, cancel, sched);
    Ok(store)
}
