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

    /// A component that imports `hangar:plugin/kv` and nothing else, and
    /// exports `bump: func(delta: s64) -> result<s64, string>`: it
    /// increments its key `visits` and answers the new count, or the kv
    /// error's text. Written by hand so that this capability is tested
    /// alone, with no guest toolchain.
    const COUNTER: &str = r#"
    (component
      (import "hangar:plugin/kv@0.1.0" (instance $kv
        (type $error (variant
          (case "too-large" string) (case "quota" string)
          (case "unavailable" string) (case "invalid" string)))
        (export "kv-error" (type $kv-error (eq $error)))
        (export "increment"
          (func (param "key" string) (param "delta" s64) (result (result s64 (error $kv-error)))))))
      (core module $libc
        (memory (export "memory") 1)
        (global $next (mut i32) (i32.const 1024))
        (func (export "realloc") (param i32 i32 i32 i32) (result i32)
          (local $at i32)
          (local.set $at (i32.and
            (i32.add (global.get $next) (i32.sub (local.get 2) (i32.const 1)))
            (i32.sub (i32.const 0) (local.get 2))))
          (global.set $next (i32.add (local.get $at) (local.get 3)))
          (local.get $at)))
      (core instance $libc (instantiate $libc))
      (alias export $kv "increment" (func $increment))
      (core func $increment (canon lower (func $increment)
        (memory (core memory $libc "memory")) (realloc (core func $libc "realloc"))))
      (core module $main
        (import "libc" "memory" (memory 1))
        (import "kv" "increment" (func $increment (param i32 i32 i64 i32)))
        (data (i32.const 0) "visits")
        ;; kv's answer lands at 64: its case at 64, the count at 72, or the
        ;; error's case at 72 and its text at 76 (pointer) and 80 (length).
        ;; bump's answer is at 32: its case, then the count or the text at 40.
        (func (export "bump") (param $delta i64) (result i32)
          (call $increment (i32.const 0) (i32.const 6) (local.get $delta) (i32.const 64))
          (if (i32.eqz (i32.load8_u (i32.const 64)))
            (then
              (i32.store8 (i32.const 32) (i32.const 0))
              (i64.store (i32.const 40) (i64.load (i32.const 72))))
            (else
              (i32.store8 (i32.const 32) (i32.const 1))
              (i32.store (i32.const 40) (i32.load (i32.const 76)))
              (i32.store (i32.const 44) (i32.load (i32.const 80)))))
          (i32.const 32)))
      (core instance $main (instantiate $main
        (with "libc" (instance $libc))
        (with "kv" (instance (export "increment" (func $increment))))))
      (func (export "bump") (param "delta" s64) (result (result s64 (error string)))
        (canon lift (core func $main "bump") (memory (core memory $libc "memory")))))
    "#;

    /// A store's data with the kv capability's per-call state and nothing of
    /// the others': WASI and `wasi:http` empty, as `GuestStore` asks.
    struct KvAlone {
        kv: KvCall,
        table: wasmtime::component::ResourceTable,
        wasi: wasmtime_wasi::WasiCtx,
        http: wasmtime_wasi_http::WasiHttpCtx,
    }

    impl wasmtime_wasi::WasiView for KvAlone {
        fn ctx(&mut self) -> wasmtime_wasi::WasiCtxView<'_> {
            wasmtime_wasi::WasiCtxView {
                ctx: &mut self.wasi,
                table: &mut self.table,
            }
        }
    }

    impl wasmtime_wasi_http::WasiHttpView for KvAlone {
        fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
            wasmtime_wasi_http::WasiHttpCtxView {
                ctx: &mut self.http,
                table: &mut self.table,
                hooks: wasmtime_wasi_http::default_hooks(),
            }
        }
    }

    impl GuestStore for KvAlone {}

    /// Links the kv capability alone (`Kv::link`, no other capability) into
    /// a store and calls it through a guest: the count lands in the
    /// plugin's namespace of a real embedded store, and a call with no
    /// store gets the `unavailable` error's text.
    #[tokio::test]
    async fn linked_alone_a_guest_counts_in_its_own_namespace() {
        let engine = wasmtime::Engine::default();
        let mut linker = Linker::<KvAlone>::new(&engine);
        Kv::link(&mut linker, |s: &mut KvAlone| &mut s.kv).unwrap();
        let component = wasmtime::component::Component::new(
            &engine,
            wat::parse_str(COUNTER).expect("the counter parses"),
        )
        .unwrap();
        let dir = std::env::temp_dir().join(format!("hangar-kv-alone-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let (store, problems) =
            hangar_core::kv::open(&hangar_config::KvConfig::default(), &dir, None).await;
        assert_eq!(problems, Vec::<String>::new());
        let store = store.expect("the embedded store opens");

        let bump = async |kv: Option<Arc<KvStore>>, delta: i64| {
            let data = KvAlone {
                kv: KvCall::new("counter".into(), kv),
                table: Default::default(),
                wasi: wasmtime_wasi::WasiCtx::builder().build(),
                http: wasmtime_wasi_http::WasiHttpCtx::new(),
            };
            let mut wasm = wasmtime::Store::new(&engine, data);
            let instance = linker
                .instantiate_async(&mut wasm, &component)
                .await
                .unwrap();
            let f = instance
                .get_typed_func::<(i64,), (std::result::Result<i64, String>,)>(&mut wasm, "bump")
                .unwrap();
            let (answer,) = f.call_async(&mut wasm, (delta,)).await.unwrap();
            answer
        };
        assert_eq!(bump(Some(store.clone()), 2).await, Ok(2));
        assert_eq!(bump(Some(store.clone()), 5).await, Ok(7));
        assert_eq!(
            store.get("counter", "visits").await.unwrap(),
            Some(b"7".to_vec())
        );
        assert_eq!(store.get("other", "visits").await.unwrap(), None);
        let refused = bump(None, 1).await.unwrap_err();
        assert!(refused.starts_with("kv is not available"), "{refused}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
