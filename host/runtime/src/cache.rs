//! The on-disk cache of compiled components.
//!
//! Compiling a large component takes seconds; deserializing it takes
//! milliseconds. Entries are keyed by the `.wasm` content hash and the
//! engine's compatibility hash, so a changed file or engine setting never
//! loads stale code.

use std::fs::{File, OpenOptions, TryLockError};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

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

/// One compile at a time in this process (see [`CompiledCache::load`]).
static COMPILING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// An entry's compile lock as [`CompiledCache::try_lock`] found it.
enum Held {
    /// Taken: this thread compiles.
    Ours(File),
    /// Held by another process (or thread): the open file, to wait on.
    Theirs(File),
    /// No lock can be had here.
    Unlockable,
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
    ///
    /// A component not in the cache is compiled under its entry's lock (a
    /// `.lock` file beside it), so processes sharing the directory (replicas
    /// started together) and loader threads given the same bytes compile it
    /// once: the others wait, then read what it wrote.
    ///
    /// A process compiles one component at a time (wasmtime compiles each
    /// one's functions on every core), and takes an entry's lock only when
    /// its turn to compile it comes. Every loader thread took its lock at
    /// once and compiled beside the others, so each lock was held until
    /// near the end of the whole batch: a process waiting for a 150 KB
    /// component waited ~313 s behind nine. Now it waits for that one
    /// component's compile, and the loader hands small ones over first.
    pub fn load(
        &self,
        engine: &Engine,
        path: &Path,
        bytes: &[u8],
    ) -> anyhow::Result<(Component, Origin)> {
        let entry = self.entry_for(bytes);
        if let Some(component) = cached(engine, &entry) {
            return Ok((component, Origin::Cache));
        }
        let turn = COMPILING.lock().unwrap_or_else(|e| e.into_inner());
        let (turn, lock) = match self.try_lock(&entry) {
            Held::Ours(lock) => (turn, Some(lock)),
            Held::Unlockable => (turn, None),
            Held::Theirs(file) => {
                // Another process compiles it: wait for that one compile
                // without holding this process's turn, then read it.
                drop(turn);
                tracing::info!(
                    path = %path.display(),
                    "another process or thread is compiling this component; waiting for it"
                );
                let lock = file
                    .lock()
                    .inspect_err(
                        |e| tracing::debug!(entry = %entry.display(), "no compile lock: {e}"),
                    )
                    .ok()
                    .map(|()| file);
                if let Some(component) = cached(engine, &entry) {
                    return Ok((component, Origin::Cache));
                }
                (COMPILING.lock().unwrap_or_else(|e| e.into_inner()), lock)
            }
        };
        if lock.is_some()
            && let Some(component) = cached(engine, &entry)
        {
            return Ok((component, Origin::Cache));
        }
        // Compiling a Python or JavaScript component takes seconds: say so
        // first, so a first start-up does not look hung.
        tracing::info!(path = %path.display(), bytes = bytes.len(), "compiling component");
        let component = Component::new(engine, bytes).map_err(|e| anyhow::anyhow!("{e:?}"))?;
        if let Err(e) = self.store(&entry, &component) {
            tracing::warn!(entry = %entry.display(), "cannot write compiled cache: {e}");
        }
        drop(lock);
        drop(turn);
        Ok((component, Origin::Compiled))
    }

    /// `entry`'s lock, if it is free now. Unlockable where the directory or
    /// the lock cannot be had (a read-only or network file system): then
    /// each compiles on its own. Lock files stay: removing one would race
    /// with a process opening it.
    fn try_lock(&self, entry: &Path) -> Held {
        let at = entry.with_extension("lock");
        let opened = std::fs::create_dir_all(&self.dir).and_then(|()| {
            OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&at)
        });
        let file = match opened {
            Ok(file) => file,
            Err(e) => {
                tracing::debug!(lock = %at.display(), "no compile lock: {e}");
                return Held::Unlockable;
            }
        };
        match file.try_lock() {
            Ok(()) => Held::Ours(file),
            Err(TryLockError::WouldBlock) => Held::Theirs(file),
            Err(TryLockError::Error(e)) => {
                tracing::debug!(lock = %at.display(), "no compile lock: {e}");
                Held::Unlockable
            }
        }
    }

    fn entry_for(&self, bytes: &[u8]) -> PathBuf {
        let digest = hex::encode(Sha256::digest(bytes));
        self.dir.join(format!("{digest}-{}.cwasm", self.engine_key))
    }

    fn store(&self, entry: &Path, component: &Component) -> anyhow::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let data = component.serialize().map_err(|e| anyhow::anyhow!("{e}"))?;
        // Write then rename, so a concurrent start never reads half a file.
        // The temporary name is this write's own: two components with the
        // same bytes (one file copied under two names, each configured its
        // own way) compile at once on the loader's threads, and with one
        // name per process the second write truncated the file the first
        // had just renamed into place, then failed to rename it.
        static WRITES: AtomicU64 = AtomicU64::new(0);
        let write = WRITES.fetch_add(1, Ordering::Relaxed);
        let tmp = entry.with_extension(format!("tmp{}-{write}", std::process::id()));
        std::fs::write(&tmp, data)?;
        std::fs::rename(&tmp, entry)?;
        Ok(())
    }
}

/// The component in `entry`, when there is one this engine can load.
fn cached(engine: &Engine, entry: &Path) -> Option<Component> {
    if !entry.exists() {
        return None;
    }
    // SAFETY: entries are written only by `CompiledCache::store` from a
    // `Component::serialize` of this engine configuration (the key includes
    // its compatibility hash); wasmtime also checks the header.
    match unsafe { Component::deserialize_file(engine, entry) } {
        Ok(c) => Some(c),
        Err(e) => {
            tracing::warn!(entry = %entry.display(), "stale cache entry, recompiling: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty component: the preamble alone (magic, version 0xd, layer 1).
    const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\x00\x01\x00";

    #[test]
    fn the_same_component_stored_at_once_from_two_threads_lands_whole() {
        let engine = Engine::default();
        let dir = std::env::temp_dir().join(format!("hangar-cache-{}", uuid::Uuid::new_v4()));
        let cache = CompiledCache::new(&dir, &engine);
        let component = Component::new(&engine, EMPTY_COMPONENT).unwrap();
        let entry = cache.entry_for(EMPTY_COMPONENT);
        for _ in 0..50 {
            let start = std::sync::Barrier::new(2);
            std::thread::scope(|s| {
                let writes: Vec<_> = (0..2)
                    .map(|_| {
                        s.spawn(|| {
                            start.wait();
                            cache.store(&entry, &component)
                        })
                    })
                    .collect();
                for write in writes {
                    write.join().unwrap().unwrap();
                }
            });
            let (_, origin) = cache
                .load(&engine, Path::new("empty.wasm"), EMPTY_COMPONENT)
                .unwrap();
            assert_eq!(origin, Origin::Cache);
        }
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(left.len(), 1, "temporary files left: {left:?}");
    }

    #[test]
    fn the_same_bytes_loaded_at_once_compile_once() {
        let engine = Engine::default();
        for _ in 0..50 {
            let dir = std::env::temp_dir().join(format!("hangar-cache-{}", uuid::Uuid::new_v4()));
            let cache = CompiledCache::new(&dir, &engine);
            let start = std::sync::Barrier::new(2);
            let mut origins: Vec<Origin> = std::thread::scope(|s| {
                let loads: Vec<_> = (0..2)
                    .map(|_| {
                        s.spawn(|| {
                            start.wait();
                            cache.load(&engine, Path::new("empty.wasm"), EMPTY_COMPONENT)
                        })
                    })
                    .collect();
                loads
                    .into_iter()
                    .map(|load| load.join().unwrap().unwrap().1)
                    .collect()
            });
            std::fs::remove_dir_all(&dir).unwrap();
            origins.sort_by_key(|o| *o == Origin::Compiled);
            assert_eq!(origins, [Origin::Cache, Origin::Compiled]);
        }
    }
}
