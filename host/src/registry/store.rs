//! The content-addressed cache of pulled components and manifests.

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

/// The cached component for `manifest_digest`, when its manifest and layer
/// are stored and intact.
pub(super) fn from_cache(store: &Store, manifest_digest: &str) -> Option<PathBuf> {
    let raw = store.read(manifest_digest)?;
    let layer = wasm_layer(&raw).ok()?;
    store.read(&layer.digest)?;
    Some(store.blob_path(&layer.digest))
}
