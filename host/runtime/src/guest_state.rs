//! `GuestState`: what one guest instance's `Store` owns: the call's limits
//! and events, and each capability's state (`capability::CallCaps`). The
//! host functions live with their capabilities (`capability/`); `linking.rs`
//! links them and makes fresh stores.

use std::sync::Arc;

use std::time::Instant;
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;

use super::capability::files::Preopens;
use super::capability::{CallCaps, CallSetup, GuestStore, HasCaps, PluginCaps};
use super::sched::LaneTurn;
use super::stderr::StderrCapture;
use hangar_core::call::{CallContext, EventSink, Principal};

/// Who a guest's call is for: its trace id (for `traceparent` on outbound
/// requests) and the principal the auth stage found (whose own credentials
/// `credentials.get` resolves). Both none for a warm-up instance.
#[derive(Clone, Copy, Default)]
pub struct Caller<'a> {
    pub trace_id: Option<&'a str>,
    pub principal: Option<&'a Principal>,
}

impl<'a> Caller<'a> {
    pub fn of(cx: &'a CallContext) -> Caller<'a> {
        Caller {
            trace_id: (!cx.trace_id.is_empty()).then_some(cx.trace_id.as_str()),
            principal: cx.principal.as_ref(),
        }
    }
}

/// Who a guest is: its plugin name, how its instances are reused, and what
/// each capability keeps for it (its grants, config values, log share…).
#[derive(Debug, Clone, Default)]
pub struct PluginMeta {
    pub name: Arc<str>,
    /// Warm-instance reuse, when the operator opted in.
    pub reuse: Option<hangar_config::InstancesConfig>,
    /// Each capability's part of the plugin (see [`super::capability`]).
    pub caps: PluginCaps,
}

/// WASI resources (streams, pollables…) one instance may hold at once; each
/// costs host memory outside the guest's memory cap.
const MAX_WASI_RESOURCES: usize = 10_000;

/// The data of one `Store`: the call (its deadline, lane turn, memory cap,
/// events and stderr) and each capability's state for it. The resource
/// table is shared by the capabilities whose resources live in it (WASI's
/// streams, `wasi:http`'s requests).
pub struct GuestState {
    pub(super) table: ResourceTable,
    pub(super) memory: MemoryCap,
    pub(super) stderr: StderrCapture,
    /// The plugin's name, for logs.
    pub(super) plugin: Arc<str>,
    /// When the current call's deadline passes (set with the call's state,
    /// read by `limits::arm`).
    pub(super) deadline: Instant,
    /// The store's long-running-lane permit, while it holds one.
    pub(super) turn: LaneTurn,
    /// Each capability's state for the call (see [`super::capability`]).
    pub(super) caps: CallCaps,
    /// The code sandbox's run: the calls its program makes (empty in
    /// every other store).
    pub(super) program: super::code::calls::ProgramState,
}

impl GuestState {
    /// State for one call of `plugin`: no files, no network, no environment,
    /// no stdin; stdout is dropped and stderr captured for the host log.
    pub fn new(
        plugin: &PluginMeta,
        limits: &hangar_config::Limits,
        events: EventSink,
        caller: Caller<'_>,
    ) -> GuestState {
        Self::with_preopens(plugin, limits, events, caller, &Preopens::default())
            .expect("a context without folders cannot fail")
    }

    /// As [`GuestState::new`], with the call's folders mounted; fails when
    /// one cannot be opened.
    pub fn with_preopens(
        plugin: &PluginMeta,
        limits: &hangar_config::Limits,
        events: EventSink,
        caller: Caller<'_>,
        preopens: &Preopens,
    ) -> anyhow::Result<GuestState> {
        let stderr = StderrCapture::default();
        let deadline = Instant::now() + limits.deadline;
        let caps = CallCaps::new(
            &plugin.caps,
            &CallSetup {
                plugin: &plugin.name,
                limits,
                trace_id: caller.trace_id,
                principal: caller.principal,
                preopens,
                stderr: &stderr,
                events: &events,
                deadline,
            },
        )?;
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_WASI_RESOURCES);
        Ok(GuestState {
            table,
            memory: MemoryCap::new(limits.memory_bytes()),
            stderr,
            plugin: plugin.name.clone(),
            deadline,
            turn: LaneTurn::default(),
            caps,
            program: Default::default(),
        })
    }

    /// Readies a reused instance's state for its next call.
    pub fn reset_for_call(
        &mut self,
        limits: &hangar_config::Limits,
        events: EventSink,
        caller: Caller<'_>,
    ) {
        self.memory = MemoryCap::new(limits.memory_bytes());
        self.deadline = Instant::now() + limits.deadline;
        self.stderr.clear();
        let none = Preopens::default();
        self.caps.next_call(&CallSetup {
            plugin: &self.plugin,
            limits,
            trace_id: caller.trace_id,
            principal: caller.principal,
            preopens: &none,
            stderr: &self.stderr,
            events: &events,
            deadline: self.deadline,
        });
    }
}

impl HasCaps for GuestState {
    fn caps(&mut self) -> &mut CallCaps {
        &mut self.caps
    }
}

/// WASI's resources live in the store's table; the context is the files
/// capability's.
impl wasmtime_wasi::WasiView for GuestState {
    fn ctx(&mut self) -> wasmtime_wasi::WasiCtxView<'_> {
        self.caps.files.view(&mut self.table)
    }
}

/// `wasi:http`'s resources live in the store's table; the context and
/// hooks are the http capability's.
impl wasmtime_wasi_http::WasiHttpView for GuestState {
    fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
        self.caps.http.view(&mut self.table)
    }
}

impl GuestStore for GuestState {}

/// The linear-memory cap of one store. It remembers a refused growth so the
/// caller can be told it was the memory cap, whatever the guest did next
/// (a Rust guest aborts with `unreachable` when allocation fails).
pub struct MemoryCap {
    max: usize,
    pub(super) refused: bool,
}

impl MemoryCap {
    fn new(max: usize) -> MemoryCap {
        MemoryCap {
            max,
            refused: false,
        }
    }
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max {
            self.refused = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}
