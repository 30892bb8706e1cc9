//! The `hangar:plugin/kv` import: a key-value store per plugin. The
//! smallest complete [`Capability`], and the one to copy.
//!
//! - **load**: the host-wide store (`[kv]`), opened once at start-up by the
//!   loader (`hangar_core::kv::open`) and kept across reloads; none when it could
//!   not be opened (that problem is reported then).
//! - **configure**: nothing to grant: every plugin gets the store, and its
//!   own namespace is its name.
//! - **per call**: a [`KvCall`], the namespace and the store.
//! - **link**: the WIT interface's host functions, served by the
//!   call's `KvCall` (`get` finds it in the store's data, and
//!   `HasSelf<KvCall>` hands it to the `Host` implementation below).
//!
//! The store, its backends and its bounds live in `hangar_core::kv`, which MCP
//! tasks use too; this module is only the guest's side: the namespace and
//! the WIT error type.

use std::sync::Arc;

use wasmtime::component::{HasSelf, Linker};

use super::shape::{
    CallSetup, Capability, GuestStore, LoadSetup, PluginSetup, Problems, find_import,
};
use crate::bindings::tool::hangar::plugin::kv as wit;
use hangar_config::PluginConfig;
use hangar_core::kv::KvStore;

const KV_IMPORT: &str = "hangar:plugin/kv";

/// The kv capability (see the module doc).
pub struct Kv;

impl Capability for Kv {
    const IMPORTS: &'static [&'static str] = &[KV_IMPORT];
    type Load = Option<Arc<KvStore>>;
    type Plugin = Option<Arc<KvStore>>;
    type Call = KvCall;

    fn load(setup: &LoadSetup<'_>, _: &mut Problems) -> Option<Arc<KvStore>> {
        setup.kv.cloned()
    }

    fn configure(
        store: &Option<Arc<KvStore>>,
        _: &PluginSetup<'_>,
        _: &mut Problems,
    ) -> Option<Arc<KvStore>> {
        store.clone()
    }

    fn per_call(store: &Option<Arc<KvStore>>, call: &CallSetup<'_>) -> anyhow::Result<KvCall> {
        Ok(KvCall::new(call.plugin.clone(), store.clone()))
    }

    fn link<T: GuestStore>(
        linker: &mut Linker<T>,
        get: fn(&mut T) -> &mut KvCall,
    ) -> anyhow::Result<()> {
        wit::add_to_linker::<T, HasSelf<KvCall>>(linker, get).map_err(|e| anyhow::anyhow!("{e:?}"))
    }

    fn check_lines(imports: &[String], _: Option<&PluginConfig>) -> Vec<String> {
        find_import(imports, KV_IMPORT)
            .map(|name| format!("imports {name} (its own namespace; no grant needed)"))
            .into_iter()
            .collect()
    }
}

type Result<T> = std::result::Result<T, wit::KvError>;

/// The store's error as the guest sees it: the same case and text.
fn to_wit(e: hangar_core::kv::KvError) -> wit::KvError {
    use hangar_core::kv::KvError as E;
    match e {
        E::TooLarge(m) => wit::KvError::TooLarge(m),
        E::Quota(m) => wit::KvError::Quota(m),
        E::Unavailable(m) => wit::KvError::Unavailable(m),
        E::Invalid(m) => wit::KvError::Invalid(m),
    }
}

/// The kv side of one call: whose namespace, and the store (none when
/// `[kv]` could not be opened).
pub struct KvCall {
    plugin: Arc<str>,
    store: Option<Arc<KvStore>>,
}

impl KvCall {
    pub fn new(plugin: Arc<str>, store: Option<Arc<KvStore>>) -> KvCall {
        KvCall { plugin, store }
    }

    fn store(&self) -> Result<Arc<KvStore>> {
        self.store.clone().ok_or_else(|| {
            wit::KvError::Unavailable(
                "kv is not available: see the server's startup problems".into(),
            )
        })
    }

    /// Logs a backend failure for the operator; the guest gets the error.
    fn logged<T>(
        &self,
        op: &str,
        r: std::result::Result<T, hangar_core::kv::KvError>,
    ) -> Result<T> {
        let r = r.map_err(to_wit);
        if let Err(wit::KvError::Unavailable(why)) = &r {
            tracing::warn!(plugin = %self.plugin, "kv: {op} failed: {why}");
        }
        r
    }
}

impl wit::Host for KvCall {
    async fn get(&mut self, key: String) -> Result<Option<Vec<u8>>> {
        let r = self.store()?.get(&self.plugin, &key).await;
        self.logged("get", r)
    }

    async fn set(&mut self, key: String, value: Vec<u8>, ttl_ms: Option<u64>) -> Result<()> {
        let r = self.store()?.set(&self.plugin, &key, value, ttl_ms).await;
        self.logged("set", r)
    }

    async fn delete(&mut self, key: String) -> Result<()> {
        let r = self.store()?.delete(&self.plugin, &key).await;
        self.logged("delete", r)
    }

    async fn increment(&mut self, key: String, delta: i64) -> Result<i64> {
        let r = self.store()?.increment(&self.plugin, &key, delta).await;
        self.logged("increment", r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_store_calls_are_unavailable() {
        let unavailable = KvCall::new("p".into(), None).store();
        assert!(matches!(unavailable, Err(wit::KvError::Unavailable(_))));
    }

    /// Host error texts print the store's error with `{:?}`; they read as
    /// they did when the store used the WIT type.
    #[test]
    fn the_store_error_prints_as_the_wit_one() {
        use hangar_core::kv::KvError as E;
        for e in [
            E::TooLarge("a".into()),
            E::Quota("b".into()),
            E::Unavailable("c".into()),
            E::Invalid("d".into()),
        ] {
            assert_eq!(format!("{e:?}"), format!("{:?}", to_wit(e.clone())));
        }
    }
}
