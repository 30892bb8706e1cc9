//! The on-disk cache of compiled components.
//!
//! Compiling a large component takes seconds; deserializing it takes
//! milliseconds. Entries are keyed by the `.wasm` content hash and the
//! engine's compatibility hash, so a changed file or engine setting never
//! loads stale code.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Where a component came from at load time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Deserialized from the cache.
    Cache,
    /// Compiled now (and written to the cache).
    Compiled,
}

/// A directory of serialized components for one engine configuration.
#[derive(Debug, Clone)]
pub struct CompiledCache {
    dir: PathBuf,
    engine_key: String,
}

impl CompiledCache {
    pub fn new(dir: &Path, engine: &Engine) -> CompiledCache {
        let mut h = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        CompiledCache {
            dir: dir.to_path_buf(),
            engine_key: format!("{:016x}", h.finish()),
        }
    }

    /// Loads the component for `bytes` (read from `path`), from the cache when possible.
    pub fn load(
        &self,
        engine: &Engine,
        path: &Path,
        bytes: &[u8],
    ) -> anyhow::Result<(Component, Origin)> {
        let entry = self.entry_for(bytes);
        if entry.exists() {
            // SAFETY: entries are written only by `store` below from a
            // `Component::serialize` of this engine configuration (the key
            // includes its compatibility hash); wasmtime also checks the header.
            match unsafe { Component::deserialize_file(engine, &entry) } {
                Ok(c) => return Ok((c, Origin::Cache)),
                Err(e) => {
                    tracing::warn!(entry = %entry.display(), "stale cache entry, recompiling: {e}")
                }
            }
        }
        // Compiling a Python or JavaScript component takes seconds: say so
        // first, so a first start-up does not look hung.
        tracing::info!(path = %path.display(), bytes = bytes.len(), "compiling component");
        let component = Component::new(engine, bytes).map_err(|e| anyhow::anyhow!("{e:?}"))?;
        if let Err(e) = self.store(&entry, &component) {
            tracing::warn!(entry = %entry.display(), "cannot write compiled cache: {e}");
        }
        Ok((component, Origin::Compiled))
    }

    fn entry_for(&self, bytes: &[u8]) -> PathBuf {
        let digest = hex::encode(Sha256::digest(bytes));
        self.dir.join(format!("{digest}-{}.cwasm", self.engine_key))
    }

    fn store(&self, entry: &Path, component: &Component) -> anyhow::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let data = component.serialize().map_err(|e| anyhow::anyhow!("{e}"))?;
        // Write then rename, so a concurrent start never reads half a file.
        let tmp = entry.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, data)?;
        std::fs::rename(&tmp, entry)?;
        Ok(())
    }
}
