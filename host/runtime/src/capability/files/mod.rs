//! Files: WASI p2 for every guest (clocks, random, stderr; no network, no
//! environment, no stdin) and the folders one call mounts (`Preopens`: the
//! files a caller uploaded, the artifacts folder it may write to under a
//! [`WriteCap`]).
//!
//! Per plugin there is nothing to keep; per call, the WASI context, built on
//! the guest's first WASI call (most calls never make one, and the context
//! seeds a random generator from the OS) — or up front when folders are
//! mounted, so that a folder that cannot be opened fails the call before it
//! runs. `shadow.rs` puts the write cap in front of wasmtime-wasi's writers.

mod call;
mod preopens;
mod shadow;
mod write_cap;

use wasmtime::component::Linker;

pub use call::CallWasi;
pub use preopens::Preopens;
pub use write_cap::WriteCap;

use super::shape::{CallSetup, Capability, GuestStore, LoadSetup, PluginSetup, Problems};

/// The files capability (see the module doc).
pub struct Files;

impl Capability for Files {
    const IMPORTS: &'static [&'static str] = &[];
    type Load = ();
    type Plugin = ();
    type Call = CallWasi;

    fn load(_: &LoadSetup<'_>, _: &mut Problems) {}

    fn configure(_: &(), _: &PluginSetup<'_>, _: &mut Problems) {}

    fn per_call(_: &(), call: &CallSetup<'_>) -> anyhow::Result<CallWasi> {
        CallWasi::new(call)
    }

    /// wasmtime-wasi reaches the context through the store data's `WasiView`
    /// (which hands it [`CallWasi::view`]); the shadowed writers find the cap
    /// through `get`.
    fn link<T: GuestStore>(
        linker: &mut Linker<T>,
        get: fn(&mut T) -> &mut CallWasi,
    ) -> anyhow::Result<()> {
        wasmtime_wasi::p2::add_to_linker_async(linker).map_err(|e| anyhow::anyhow!("{e:?}"))?;
        // File writes under the call's cap (calls without a writable folder
        // pass straight through).
        shadow::shadow_writers(linker, get).map_err(|e| anyhow::anyhow!("{e:?}"))
    }
}
