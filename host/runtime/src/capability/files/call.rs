//! `CallWasi`: one call's WASI context and write cap, as the files
//! capability builds it and wasmtime-wasi and the shadowed writers use it.

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView};

use super::preopens::Preopens;
use super::write_cap::WriteCap;
use crate::capability::shape::CallSetup;
use crate::stderr::StderrCapture;

/// Largest `wasi:random` answer, in bytes (the host allocates it whole).
const MAX_RANDOM_BYTES: u64 = 1 << 20;

/// One call's WASI: its context once built, and its write cap.
pub struct CallWasi {
    ctx: Option<WasiCtx>,
    /// Where the context, when built on first use, sends stderr.
    stderr: StderrCapture,
    /// What the guest may still write into its writable folder; `None`
    /// when it has none (its writes then cost nothing extra).
    pub(super) write_cap: Option<Arc<WriteCap>>,
    /// Whose writes the cap refuses, for the log.
    pub(super) plugin: Arc<str>,
}

impl CallWasi {
    /// The call's WASI: its context built now when folders are mounted (so
    /// that one that cannot be opened fails the call up front), else on
    /// first use.
    pub fn new(call: &CallSetup<'_>) -> anyhow::Result<CallWasi> {
        let preopens = call.preopens;
        let ctx = if preopens.is_empty() {
            None
        } else {
            Some(wasi_ctx(call.stderr, preopens)?)
        };
        Ok(CallWasi {
            ctx,
            stderr: call.stderr.clone(),
            write_cap: preopens.write_cap.clone(),
            plugin: call.plugin.clone(),
        })
    }

    /// What wasmtime-wasi works with: the context (built now on the
    /// guest's first WASI call) and the store's resource table.
    pub fn view<'a>(&'a mut self, table: &'a mut ResourceTable) -> WasiCtxView<'a> {
        let stderr = &self.stderr;
        let ctx = self.ctx.get_or_insert_with(|| {
            wasi_ctx(stderr, &Preopens::default()).expect("a context without folders cannot fail")
        });
        WasiCtxView { ctx, table }
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
