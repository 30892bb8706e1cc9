//! Linking a component against the host imports, and a fresh `Store` of
//! [`GuestState`] for each call, armed with its limits. Above `guest.rs`,
//! `limits.rs` and the files serving one import each, which it wires in.

use std::sync::Arc;

use wasmtime::component::{HasSelf, Linker};

use super::bindings::tool::hangar::plugin::host;
use super::bindings::tool::hangar::plugin::{client, config, credentials, kv};
use super::guest::{GuestState, PluginMeta, Preopens};
use super::kv::KvCall;
use super::sched::Scheduler;
use crate::call::EventSink;

/// Pre-links a component against Hangar's imports, once, at load time.
pub fn instance_pre(
    linker: &Linker<GuestState>,
    component: &wasmtime::component::Component,
) -> anyhow::Result<wasmtime::component::InstancePre<GuestState>> {
    linker
        .instantiate_pre(component)
        .map_err(|e| anyhow::anyhow!("cannot link: {e:?}"))
}

/// Adds WASI p2, `wasi:http` and the `hangar:plugin/host`, `config`,
/// `credentials`, `kv` and `client` imports to a linker.
pub fn link(linker: &mut Linker<GuestState>) -> anyhow::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    // File writes under the call's cap (calls without a writable folder
    // pass straight through).
    super::write_cap::shadow::shadow_writers(linker).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    // Linked for every plugin; a request goes out only under a grant.
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    host::add_to_linker::<GuestState, HasSelf<GuestState>>(linker, |s| s)
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    config::add_to_linker::<GuestState, HasSelf<GuestState>>(linker, |s| s)
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    credentials::add_to_linker::<GuestState, HasSelf<GuestState>>(linker, |s| s)
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    link_kv(linker)?;
    client::add_to_linker::<GuestState, HasSelf<GuestState>>(linker, |s| s)
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    Ok(())
}

/// A fresh store for one call of `plugin`, armed with `limits`.
pub fn store(
    engine: &wasmtime::Engine,
    plugin: &PluginMeta,
    limits: &crate::config::Limits,
    cancel: &crate::call::CancelToken,
    events: EventSink,
    trace_id: Option<&str>,
    sched: &Arc<Scheduler>,
) -> wasmtime::Store<GuestState> {
    let state = GuestState::new(plugin.clone(), limits, events, trace_id);
    let mut store = wasmtime::Store::new(engine, state);
    super::limits::arm(&mut store, limits, cancel, sched);
    store
}

/// [`store`], with the call's folders mounted.
#[allow(clippy::too_many_arguments)]
pub fn store_with(
    engine: &wasmtime::Engine,
    plugin: &PluginMeta,
    limits: &crate::config::Limits,
    cancel: &crate::call::CancelToken,
    events: EventSink,
    trace_id: Option<&str>,
    sched: &Arc<Scheduler>,
    preopens: &Preopens,
) -> anyhow::Result<wasmtime::Store<GuestState>> {
    let state = GuestState::with_preopens(plugin.clone(), limits, events, trace_id, preopens)?;
    let mut store = wasmtime::Store::new(engine, state);
    super::limits::arm(&mut store, limits, cancel, sched);
    Ok(store)
}

/// Adds the `hangar:plugin/kv` import to a linker; each call serves it from
/// its `GuestState`'s [`KvCall`].
fn link_kv(linker: &mut Linker<GuestState>) -> anyhow::Result<()> {
    kv::add_to_linker::<GuestState, HasSelf<KvCall>>(linker, |s| &mut s.kv)
        .map_err(|e| anyhow::anyhow!("{e:?}"))
}
