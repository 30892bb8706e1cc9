//! `GuestState`: what one guest instance's `Store` owns, and the host
//! imports it serves. Below `state.rs` (linking, fresh stores), `limits.rs`
//! and `write_cap/shadow.rs`, which name it; of the per-import files it
//! names only the pieces it holds (`KvCall`, `WriteCap`).

use std::collections::BTreeMap;
use std::sync::Arc;

use std::time::Instant;
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;

use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::tool::hangar::plugin::host;
use super::bindings::tool::hangar::plugin::{config, credentials};
use super::guest_log::GuestLog;
use super::http::{HttpAccess, HttpCall};
use super::kv::KvCall;
use super::sched::LaneTurn;
use super::stderr::StderrCapture;
use super::write_cap::WriteCap;
use crate::call::{EventSink, LogLevel};
use crate::kv::KvStore;

/// Who a guest is: its plugin name and its configuration from `hangar.toml`.
#[derive(Debug, Clone, Default)]
pub struct PluginMeta {
    pub name: Arc<str>,
    /// What `config.get` answers, `{{ env.VAR }}` already substituted.
    pub config: Arc<BTreeMap<String, String>>,
    /// Warm-instance reuse, when the operator opted in.
    pub reuse: Option<crate::config::InstancesConfig>,
    /// The plugin's rate-limited share of the host log.
    pub log: Arc<GuestLog>,
    /// Where the plugin may send HTTP requests (`grants.http`), and the client.
    pub http: Arc<HttpAccess>,
    /// The credential providers the plugin is granted (`grants.credentials`).
    pub credentials: Arc<super::credentials::PluginCredentials>,
    /// The server's kv store (`[kv]`); none when it could not be opened.
    pub kv: Option<Arc<KvStore>>,
    /// Where `client.resource-updated` announces changed resources.
    pub changes: crate::call::ResourceChanges,
}

/// Host folders one call's guest sees, each at its guest path: the only
/// part of the filesystem it can reach. None by default.
#[derive(Debug, Clone, Default)]
pub struct Preopens {
    dirs: Vec<(std::path::PathBuf, String, bool)>,
    /// What the guest may write into its writable folders while it runs.
    write_cap: Option<Arc<WriteCap>>,
}

impl Preopens {
    /// `host` mounted at `guest`, read-only.
    pub fn read_only(&mut self, host: std::path::PathBuf, guest: &str) {
        self.dirs.push((host, guest.to_string(), false));
    }

    /// `host` mounted at `guest`, readable and writable; the guest's
    /// writes fail once they have spent `cap` (see [`WriteCap`]).
    pub fn writable(&mut self, host: std::path::PathBuf, guest: &str, cap: Arc<WriteCap>) {
        self.dirs.push((host, guest.to_string(), true));
        self.write_cap = Some(cap);
    }

    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }
}

/// WASI resources (streams, pollables…) one instance may hold at once; each
/// costs host memory outside the guest's memory cap.
const MAX_WASI_RESOURCES: usize = 10_000;
/// Largest `wasi:random` answer, in bytes (the host allocates it whole).
const MAX_RANDOM_BYTES: u64 = 1 << 20;

/// The data of one `Store`: WASI with nothing granted, the memory cap, the
/// call's deadline and lane turn, and where the guest's log and progress
/// calls go.
pub struct GuestState {
    /// Built on the guest's first WASI call (see [`GuestState::with_preopens`]).
    wasi: Option<WasiCtx>,
    table: ResourceTable,
    pub(super) memory: MemoryCap,
    pub(super) stderr: StderrCapture,
    pub(super) plugin: PluginMeta,
    pub(super) events: EventSink,
    http_ctx: wasmtime_wasi_http::WasiHttpCtx,
    /// Outbound HTTP under the plugin's grants, bounded by the call.
    http: HttpCall,
    /// Key-value state in the plugin's namespace.
    pub(super) kv: KvCall,
    /// When the current call's deadline passes (set by `limits::arm`).
    pub(super) deadline: Instant,
    /// The store's long-running-lane permit, while it holds one.
    pub(super) turn: LaneTurn,
    /// What the guest may still write into its writable folder; `None`
    /// when it has none (its writes then cost nothing extra).
    pub(super) write_cap: Option<Arc<WriteCap>>,
}

impl GuestState {
    /// State for one call of `plugin`: no files, no network, no environment,
    /// no stdin; stdout is dropped and stderr captured for the host log.
    pub fn new(
        plugin: PluginMeta,
        limits: &crate::config::Limits,
        events: EventSink,
        trace_id: Option<&str>,
    ) -> GuestState {
        Self::with_preopens(plugin, limits, events, trace_id, &Preopens::default())
            .expect("a context without folders cannot fail")
    }

    /// As [`GuestState::new`], with the call's folders mounted; fails when
    /// one cannot be opened.
    pub fn with_preopens(
        plugin: PluginMeta,
        limits: &crate::config::Limits,
        events: EventSink,
        trace_id: Option<&str>,
        preopens: &Preopens,
    ) -> anyhow::Result<GuestState> {
        let stderr = StderrCapture::default();
        // Most calls never touch WASI (and a slim component cannot): the
        // context, which seeds a random generator from the OS, is built on
        // first use — except when folders are mounted, so that a folder that
        // cannot be opened fails the call up front.
        let wasi = if preopens.is_empty() {
            None
        } else {
            Some(wasi_ctx(&stderr, preopens)?)
        };
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_WASI_RESOURCES);
        let mut http = HttpCall::new(plugin.name.clone(), plugin.http.clone());
        http.start_call(trace_id, limits.max_http_bytes);
        let kv = KvCall::new(plugin.name.clone(), plugin.kv.clone());
        Ok(GuestState {
            kv,
            http_ctx: wasmtime_wasi_http::WasiHttpCtx::new(),
            http,
            wasi,
            table,
            memory: MemoryCap::new(limits.memory_bytes()),
            stderr,
            plugin,
            events,
            deadline: Instant::now(),
            turn: LaneTurn::default(),
            write_cap: preopens.write_cap.clone(),
        })
    }

    /// Readies a reused instance's state for its next call.
    pub fn reset_for_call(
        &mut self,
        limits: &crate::config::Limits,
        events: EventSink,
        trace_id: Option<&str>,
    ) {
        self.memory = MemoryCap::new(limits.memory_bytes());
        self.events = events;
        self.stderr.clear();
        self.http.start_call(trace_id, limits.max_http_bytes);
    }
}

/// WASI with nothing granted but `preopens`: no network, no environment, no
/// stdin; stdout dropped, stderr into `stderr`.
fn wasi_ctx(stderr: &StderrCapture, preopens: &Preopens) -> anyhow::Result<WasiCtx> {
    let mut builder = WasiCtx::builder();
    builder
        .stderr(stderr.clone())
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .max_random_size(MAX_RANDOM_BYTES);
    for (host, guest, writable) in &preopens.dirs {
        let perms = if *writable {
            wasmtime_wasi::FsPerms::ReadWrite
        } else {
            wasmtime_wasi::FsPerms::ReadOnly
        };
        builder
            .preopened_dir(host, guest, perms)
            .map_err(|e| anyhow::anyhow!("cannot mount {guest}: {e}"))?;
    }
    Ok(builder.build())
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        let stderr = &self.stderr;
        let wasi = self.wasi.get_or_insert_with(|| {
            wasi_ctx(stderr, &Preopens::default()).expect("a context without folders cannot fail")
        });
        WasiCtxView {
            ctx: wasi,
            table: &mut self.table,
        }
    }
}

impl wasmtime_wasi_http::WasiHttpView for GuestState {
    fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
        // Requests are bounded by the deadline of the call running now.
        self.http.deadline = self.deadline;
        wasmtime_wasi_http::WasiHttpCtxView {
            ctx: &mut self.http_ctx,
            table: &mut self.table,
            hooks: &mut self.http,
        }
    }
}

impl host::Host for GuestState {
    fn log(&mut self, level: host::LogLevel, message: String) {
        let level = LogLevel::from(level);
        // A slim guest has no stderr: its SDK's panic hook reports the panic
        // here, and it is kept where a WASI guest's panic would be written,
        // so the call's error names it the same way.
        if level == LogLevel::Error && message.starts_with("panicked at ") {
            self.stderr.write_line(&message);
            return;
        }
        self.plugin.log.line(&self.plugin.name, level, &message);
        self.events.log(level, &self.plugin.name, &message);
    }

    fn progress(&mut self, progress: f64, total: Option<f64>, message: Option<String>) {
        self.events.progress(progress, total, message);
    }
}

impl credentials::Host for GuestState {
    async fn get(&mut self, provider: String) -> Result<String, String> {
        let plugin = &self.plugin;
        plugin.credentials.get(&plugin.name, &provider).await
    }
}

impl config::Host for GuestState {
    fn get(&mut self, key: String) -> Option<String> {
        self.plugin.config.get(&key).cloned()
    }
}

impl From<host::LogLevel> for LogLevel {
    fn from(l: host::LogLevel) -> LogLevel {
        use host::LogLevel as W;
        match l {
            W::Debug => LogLevel::Debug,
            W::Info => LogLevel::Info,
            W::Notice => LogLevel::Notice,
            W::Warning => LogLevel::Warning,
            W::Error => LogLevel::Error,
            W::Critical => LogLevel::Critical,
            W::Alert => LogLevel::Alert,
            W::Emergency => LogLevel::Emergency,
        }
    }
}

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
