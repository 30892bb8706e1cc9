//! The content-addressed cache of pulled components and manifests.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::atomic::{AtomicU64, Ordering};

use super::*;

/// The content-addressed store: `oci/sha256/<hex>` (layers and manifests,
/// by their own digest) and `oci/refs.json` (reference → manifest digest).
pub(super) struct Store {
    pub(super) dir: PathBuf,
}

impl Store {
    pub(super) fn new(cache_dir: &Path) -> Store {
        Store {
            dir: cache_dir.join("oci"),
        }
    }

    pub(super) fn blob_path(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
        self.dir.join("sha256").join(hex)
    }

    /// The blob, when stored and still hashing to `digest`.
    pub(super) fn read(&self, digest: &str) -> Option<Vec<u8>> {
        let bytes = std::fs::read(self.blob_path(digest)).ok()?;
        (sha256(&bytes) == digest).then_some(bytes)
    }

    pub(super) fn write(&self, digest: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
        let path = self.blob_path(digest);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, &path)?;
        Ok(path)
    }

    /// A blob to be written as it arrives, stored under `digest` by
    /// [`Pending::keep`] once checked.
    pub(super) fn pending(&self, digest: &str) -> std::io::Result<Pending> {
        static WRITES: AtomicU64 = AtomicU64::new(0);
        let path = self.blob_path(digest);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let write = WRITES.fetch_add(1, Ordering::Relaxed);
        let tmp = path.with_extension(format!("tmp{}-{write}", std::process::id()));
        Ok(Pending {
            file: BufWriter::new(File::create(&tmp)?),
            tmp,
            path,
            kept: false,
        })
    }

    pub(super) fn refs_path(&self) -> PathBuf {
        self.dir.join("refs.json")
    }

    pub(super) fn refs(&self) -> BTreeMap<String, String> {
        std::fs::read(self.refs_path())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    pub(super) fn remember(&self, reference: &str, digest: &str) -> std::io::Result<()> {
        let mut refs = self.refs();
        if refs.get(reference).map(String::as_str) == Some(digest) {
            return Ok(());
        }
        refs.insert(reference.to_string(), digest.to_string());
        std::fs::create_dir_all(&self.dir)?;
        let tmp = self
            .refs_path()
            .with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, serde_json::to_vec_pretty(&refs)?)?;
        std::fs::rename(&tmp, self.refs_path())
    }
}

/// A blob being written to a temporary file: renamed into place by
/// [`Pending::keep`], removed when dropped unkept (a refused pull leaves
/// nothing in the store).
pub(super) struct Pending {
    file: BufWriter<File>,
    tmp: PathBuf,
    path: PathBuf,
    kept: bool,
}

impl Pending {
    pub(super) fn writer(&mut self) -> &mut (dyn Write + Send) {
        &mut self.file
    }

    /// Stores what was written under its digest; returns its path.
    pub(super) fn keep(mut self) -> std::io::Result<PathBuf> {
        self.file.flush()?;
        std::fs::rename(&self.tmp, &self.path)?;
        self.kept = true;
        Ok(self.path.clone())
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.kept {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// The cached component for `manifest_digest`, when its manifest and layer
/// are stored and intact.
pub(super) fn from_cache(store: &Store, manifest_digest: &str) -> Option<PathBuf> {
    let raw = store.read(manifest_digest)?;
    let layer = wasm_layer(&raw).ok()?;
    store.read(&layer.digest)?;
    Some(store.blob_path(&layer.digest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_blob_is_stored_when_kept_and_gone_when_dropped() {
        let dir = std::env::temp_dir().join(format!("hangar-store-{}", uuid::Uuid::new_v4()));
        let store = Store::new(&dir);
        let digest = sha256(b"kept");
        let mut kept = store.pending(&digest).unwrap();
        kept.writer().write_all(b"kept").unwrap();
        let mut refused = store.pending(&sha256(b"refused")).unwrap();
        refused.writer().write_all(b"refu").unwrap();
        drop(refused);
        assert_eq!(kept.keep().unwrap(), store.blob_path(&digest));
        assert_eq!(store.read(&digest).as_deref(), Some(&b"kept"[..]));
        let left: Vec<_> = std::fs::read_dir(dir.join("oci/sha256"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(left.len(), 1, "{left:?}");
    }
}
