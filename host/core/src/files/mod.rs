//! Files in and out of tools.
//!
//! - **Uploads**: a client stages files with `POST /uploads` ([`http`]);
//!   each becomes `upload://<id>/<name>`, usable only by the session (or
//!   principal) that uploaded it. A tool that consumes uploads gets them as
//!   a read-only `/uploads` directory (a component) or as bytes (a DB tool).
//! - **Artifacts**: a tool that produces artifacts gets a writable
//!   `/artifacts` directory for its call; what it leaves there becomes
//!   `artifact://<session>/<id>/<name>`, listed and read as MCP resources by
//!   that session and downloadable at a signed, expiring URL.
//!
//! Both are kept under their own directory, one folder per session (its
//! *area*) and one per upload or call, within quotas, and swept after their
//! TTL. What is on disk is indexed in memory: a restarted server starts with
//! none (its sessions are gone too) and sweeps what an earlier one left
//! once it is past the TTL.
//!
//! Here: [`Files`], the server's two stores and the folders of one call.
//! `names` holds areas, file names and media types; `store` one store's
//! files, index, quotas and sweep; `signed` the download URLs; `handoff`
//! the files an upstream server's tool leaves in `[files] shared_dir`.

mod handoff;
mod names;
mod refusal;
mod shared;
mod signed;
mod store;
mod untaken;
mod usage;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use hangar_config::{ArtifactsConfig, Config, UploadsConfig};

pub use names::{
    ARTIFACT_SCHEME, Area, GUEST_ARTIFACTS, GUEST_UPLOADS, UPLOAD_SCHEME, attachment, check_name,
    mime_type, percent_encode,
};
pub use refusal::DownloadRefusal;
pub use store::{Entry, StoreError};
use store::{Quota, STAGING, Store, scan};
pub use untaken::Untaken;
pub use usage::Counter;

/// The uploads and artifacts of a server, and the key its download URLs
/// are signed with.
pub struct Files {
    uploads: Store,
    artifacts: Store,
    key: Vec<u8>,
    url_ttl: Duration,
    public_url: Option<String>,
    /// Whether other replicas store files in the same directories
    /// (`[cluster]`): a lookup that misses looks on disk ([`shared`]).
    shared: bool,
    /// `[files] shared_dir`, by its real path: upstreams see the files too.
    shared_dir: Option<PathBuf>,
}

impl Files {
    /// From `[uploads]` and `[artifacts]`; nothing is created on disk until
    /// it is needed. A `signing_key` naming a missing env variable is an error.
    pub fn new(config: &Config) -> anyhow::Result<Files> {
        let up: &UploadsConfig = &config.uploads;
        let art: &ArtifactsConfig = &config.artifacts;
        let cache = &config.server.cache_dir;
        let shared_dir = match &config.files.shared_dir {
            Some(dir) => {
                // Made now and named by its real path: it is what upstreams
                // are handed, and what a path they return is checked against.
                std::fs::create_dir_all(dir)
                    .and_then(|()| dir.canonicalize())
                    .map(Some)
                    .map_err(|e| anyhow::anyhow!("[files] shared_dir {}: {e}", dir.display()))?
            }
            None => None,
        };
        let dir_of = |own: &Option<PathBuf>, kind: &str| match (&shared_dir, own) {
            (Some(shared), _) => shared.join(kind),
            (None, Some(dir)) => dir.clone(),
            (None, None) => cache.join(kind),
        };
        let key = match &art.signing_key {
            Some(text) => {
                let env = |var: &str| std::env::var(var).ok();
                let key = hangar_config::placeholders::substitute_env(text, &env)
                    .map_err(|e| anyhow::anyhow!("[artifacts] signing_key: {e}"))?;
                if key.len() < 16 {
                    anyhow::bail!("[artifacts] signing_key: use at least 16 bytes");
                }
                key.into_bytes()
            }
            None => {
                let mut key = uuid::Uuid::new_v4().into_bytes().to_vec();
                key.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
                key
            }
        };
        Ok(Files {
            uploads: Store::new(
                "[uploads]",
                dir_of(&up.dir, "uploads"),
                Quota {
                    max_file_bytes: up.max_file_bytes,
                    max_session_bytes: up.max_session_bytes,
                    max_session_files: up.max_session_files,
                    max_total_bytes: up.max_total_bytes,
                    ttl: up.ttl,
                },
            ),
            artifacts: Store::new(
                "[artifacts]",
                dir_of(&art.dir, "artifacts"),
                Quota {
                    max_file_bytes: art.max_file_bytes,
                    max_session_bytes: art.max_session_bytes,
                    max_session_files: art.max_session_files,
                    max_total_bytes: art.max_total_bytes,
                    ttl: art.ttl,
                },
            ),
            key,
            url_ttl: art.url_ttl,
            public_url: art
                .public_url
                .as_ref()
                .map(|u| u.trim_end_matches('/').to_string()),
            shared: config.cluster.is_some(),
            shared_dir,
        })
    }

    /// The largest upload request worth reading: a session's whole quota,
    /// and room for the multipart framing.
    pub fn max_upload_request(&self) -> usize {
        (self.uploads.quota.max_session_bytes + (1 << 20)) as usize
    }

    /// Sweeps both stores now and then, for as long as the process runs.
    pub fn start_sweeper(self: &Arc<Self>) {
        let every = self
            .uploads
            .quota
            .ttl
            .min(self.artifacts.quota.ttl)
            .div_f64(4.0)
            .clamp(Duration::from_secs(1), Duration::from_secs(60));
        let files = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                let Some(files) = files.upgrade() else { return };
                let _ = tokio::task::spawn_blocking(move || files.sweep()).await;
            }
        });
    }

    pub fn sweep(&self) {
        self.uploads.sweep();
        self.artifacts.sweep();
    }

    /// Stores a batch of uploads for `area`: every part, or (when one is
    /// refused, a quota would be exceeded or the disk fails) none.
    pub async fn store_uploads(
        &self,
        area: &Area,
        parts: Vec<(String, bytes::Bytes)>,
    ) -> Result<Vec<Arc<Entry>>, StoreError> {
        if parts.is_empty() {
            return Err(StoreError::Invalid("the request holds no file".into()));
        }
        for (name, _) in &parts {
            check_name(name).map_err(StoreError::Invalid)?;
        }
        let store = &self.uploads;
        let _writing = store.writing.lock().await;
        let sizes: Vec<(String, u64)> = parts
            .iter()
            .map(|(n, b)| (n.clone(), b.len() as u64))
            .collect();
        store.check_quota(area, &sizes)?;
        let mut written: Vec<PathBuf> = Vec::new();
        let mut entries = Vec::new();
        for (name, bytes) in &parts {
            let id = uuid::Uuid::new_v4().simple().to_string();
            let folder = store.dir.join(area.as_str()).join(&id);
            let path = folder.join(name);
            written.push(folder.clone());
            let (f, p, b) = (folder.clone(), path.clone(), bytes.clone());
            let wrote = blocking(move || {
                std::fs::create_dir_all(&f)?;
                std::fs::write(&p, &b)
            })
            .await;
            if let Err(e) = wrote {
                for folder in &written {
                    let _ = std::fs::remove_dir_all(folder);
                }
                tracing::error!(path = %path.display(), "cannot store an upload: {e}");
                return Err(StoreError::Io(
                    "the upload could not be stored; nothing was kept".into(),
                ));
            }
            entries.push(store.entry(area, &id, name, bytes.len() as u64, path));
        }
        store.insert(&entries);
        Ok(entries)
    }

    /// The live uploads of `area`, oldest first.
    pub fn uploads_of(&self, area: &Area) -> Vec<Arc<Entry>> {
        if self.shared {
            self.uploads.adopt_area(area);
        }
        self.uploads.of_area(area)
    }

    /// The upload a handle names, for a caller in `area`. A handle of
    /// another area is refused, whether or not it exists.
    pub fn resolve_upload(&self, area: Option<&Area>, handle: &str) -> Result<Arc<Entry>, String> {
        let Some((id, name)) = handle
            .strip_prefix(UPLOAD_SCHEME)
            .and_then(|rest| rest.split_once('/'))
        else {
            return Err(format!(
                "{handle:?} is not an upload handle (upload://<id>/<name>, from POST /uploads)"
            ));
        };
        let entry = match (self.uploads.get(id, name), area) {
            (None, Some(area)) if self.shared => self.uploads.adopt(area, id, name),
            (found, _) => found,
        };
        match (entry, area) {
            (Some(e), Some(area)) if &e.area == area => Ok(e),
            (Some(_), _) => Err(format!(
                "{handle} is not an upload of this session: a handle works only in the session (or for the principal) that uploaded it"
            )),
            (None, _) => Err(format!(
                "{handle}: no such upload (it expired, or was never uploaded)"
            )),
        }
    }

    /// Readies the folders of one call: `uploads` linked into a staging
    /// folder of their own (the component sees them and nothing else), and,
    /// when `artifacts`, an empty folder for what it produces.
    pub fn prepare_call(
        &self,
        area: Option<Area>,
        uploads: &[Arc<Entry>],
        artifacts: bool,
    ) -> Result<CallFiles, String> {
        let call_id = uuid::Uuid::new_v4().simple().to_string();
        let area = area.unwrap_or_else(|| Area::of_call(&call_id));
        let io = |what: &str, e: std::io::Error| {
            tracing::error!("cannot prepare the files of a call: {what}: {e}");
            format!("the files of the call could not be prepared ({what})")
        };
        let mut call = CallFiles {
            call_id: call_id.clone(),
            area: area.clone(),
            uploads_dir: None,
            artifacts_dir: None,
            artifacts_quota: Vec::new(),
            max_artifact_bytes: self.artifacts.quota.max_file_bytes,
            kept: std::sync::atomic::AtomicBool::new(false),
        };
        if !uploads.is_empty() {
            let staged = self.uploads.dir.join(STAGING).join(&call_id);
            // Set first: dropping `call` removes what was made.
            call.uploads_dir = Some(staged.clone());
            for e in uploads {
                let folder = staged.join(&e.id);
                std::fs::create_dir_all(&folder).map_err(|err| io("uploads", err))?;
                let link = folder.join(&e.name);
                if std::fs::hard_link(&e.path, &link).is_err() {
                    std::fs::copy(&e.path, &link).map_err(|err| io("uploads", err))?;
                }
            }
        }
        if artifacts {
            let folder = self.artifacts.dir.join(area.as_str()).join(&call_id);
            std::fs::create_dir_all(&folder).map_err(|e| io("artifacts", e))?;
            call.artifacts_dir = Some(folder);
            let (of_area, total) = self.artifacts.usage.counters(&call.area);
            let q = &self.artifacts.quota;
            call.artifacts_quota = vec![(of_area, q.max_session_bytes), (total, q.max_total_bytes)];
        }
        Ok(call)
    }

    /// Takes what a call left in its artifacts folder: each regular file at
    /// its top becomes an artifact. A file with a name that cannot be kept,
    /// or one over a quota, discards them all.
    pub async fn collect_artifacts(&self, call: &CallFiles) -> Result<Vec<Arc<Entry>>, StoreError> {
        let Some(dir) = &call.artifacts_dir else {
            return Ok(Vec::new());
        };
        let store = &self.artifacts;
        let _writing = store.writing.lock().await;
        let scanned = dir.clone();
        let files = blocking(move || Ok(scan(&scanned)))
            .await
            .unwrap_or_else(|e| Err(StoreError::Io(e.to_string())))?;
        // Nothing kept: the folder goes when the call's files drop.
        if files.is_empty() {
            return Ok(Vec::new());
        }
        store.check_quota(&call.area, &files)?;
        let entries: Vec<_> = files
            .iter()
            .map(|(name, size)| store.entry(&call.area, &call.call_id, name, *size, dir.join(name)))
            .collect();
        store.insert(&entries);
        call.kept.store(true, Ordering::Relaxed);
        Ok(entries)
    }

    /// The live artifacts of `area`, oldest first.
    pub fn artifacts_of(&self, area: &Area) -> Vec<Arc<Entry>> {
        if self.shared {
            self.artifacts.adopt_area(area);
        }
        self.artifacts.of_area(area)
    }

    /// The artifact at `uri`, when it is `area`'s and live.
    pub fn artifact(&self, area: Option<&Area>, uri: &str) -> Option<Arc<Entry>> {
        let rest = uri.strip_prefix(ARTIFACT_SCHEME)?;
        let mut parts = rest.splitn(3, '/');
        let (owner, id, name) = (parts.next()?, parts.next()?, parts.next()?);
        let area = area?;
        if area.as_str() != owner {
            return None;
        }
        let entry = match self.artifacts.get(id, name) {
            None if self.shared => self.artifacts.adopt(area, id, name)?,
            found => found?,
        };
        (&entry.area == area).then_some(entry)
    }
}

/// The folders of one call. When it drops, the staged uploads are removed,
/// and so is the artifacts folder unless its files were kept as artifacts
/// (the call failed, was cancelled, or left nothing).
#[derive(Debug)]
pub struct CallFiles {
    pub call_id: String,
    pub area: Area,
    /// Mounted read-only at [`GUEST_UPLOADS`].
    pub uploads_dir: Option<PathBuf>,
    /// Mounted writable at [`GUEST_ARTIFACTS`].
    pub artifacts_dir: Option<PathBuf>,
    /// The live counters its writes there count against while it runs, each
    /// with its quota: its session's (`max_session_bytes`) and the whole
    /// store's (`max_total_bytes`). They hold the stored files and what
    /// every running call has written, so calls at the same time share them.
    pub artifacts_quota: Vec<(Counter, u64)>,
    /// The most one file there may hold (`[artifacts] max_file_bytes`).
    pub max_artifact_bytes: u64,
    /// Set once the artifacts folder's files are artifacts.
    kept: std::sync::atomic::AtomicBool,
}

impl Drop for CallFiles {
    fn drop(&mut self) {
        if let Some(dir) = &self.uploads_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
        if let Some(dir) = &self.artifacts_dir
            && !self.kept.load(Ordering::Relaxed)
        {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Runs blocking file work off the async threads.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)))
}

/// A file's bytes, read off the async threads.
pub async fn read(path: &Path) -> std::io::Result<Vec<u8>> {
    let path = path.to_path_buf();
    blocking(move || std::fs::read(path)).await
}

#[cfg(test)]
mod tests {
    use super::signed::unix_now;
    use super::*;

    fn files(dir: &Path) -> Files {
        let mut config = Config::default();
        config.server.cache_dir = dir.to_path_buf();
        config.uploads.max_file_bytes = 10;
        config.uploads.max_session_files = 3;
        config.uploads.max_session_bytes = 25;
        Files::new(&config).unwrap()
    }

    fn tmp() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("hangar-files-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn part(name: &str, bytes: &[u8]) -> (String, bytes::Bytes) {
        (name.to_string(), bytes::Bytes::copy_from_slice(bytes))
    }

    #[tokio::test]
    async fn a_batch_is_stored_whole_or_not_at_all() {
        let dir = tmp();
        let f = files(&dir);
        let a = Area::of(Some("s1"), None).unwrap();
        let err = f
            .store_uploads(
                &a,
                vec![part("ok.txt", b"hello"), part("big.txt", &[0; 11])],
            )
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Quota(m) if m.contains("max_file_bytes")));
        assert!(f.uploads_of(&a).is_empty());
        let bad = f
            .store_uploads(&a, vec![part("ok.txt", b"hi"), part("../x", b"no")])
            .await;
        assert!(matches!(bad, Err(StoreError::Invalid(_))));
        assert!(!dir.join("uploads").join("s1").exists());
        let stored = f
            .store_uploads(&a, vec![part("a.txt", b"one"), part("b.txt", b"two")])
            .await
            .unwrap();
        assert_eq!(stored.len(), 2);
        let handle = stored[0].upload_handle();
        assert!(handle.starts_with("upload://") && handle.ends_with("/a.txt"));
        assert_eq!(f.resolve_upload(Some(&a), &handle).unwrap().size, 3);
        let other = Area::of(Some("s2"), None).unwrap();
        let refused = f.resolve_upload(Some(&other), &handle).unwrap_err();
        assert!(
            refused.contains("not an upload of this session"),
            "{refused}"
        );
        assert!(f.resolve_upload(None, &handle).is_err());
        // Two files held, a quota of three: two more are refused whole.
        let over = f
            .store_uploads(&a, vec![part("c", b"1"), part("d", b"2")])
            .await
            .unwrap_err();
        assert!(matches!(over, StoreError::Quota(m) if m.contains("max_session_files")));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn download_urls_are_signed_and_expire() {
        let dir = tmp();
        let f = files(&dir);
        let a = Area::of(None, Some("alice")).unwrap();
        assert!(a.as_str().starts_with("p-"));
        let call = f.prepare_call(Some(a.clone()), &[], true).unwrap();
        let out = call.artifacts_dir.clone().unwrap();
        std::fs::write(out.join("report.csv"), "a,b\n1,2\n").unwrap();
        std::fs::create_dir(out.join("sub")).unwrap();
        let got = f.collect_artifacts(&call).await.unwrap();
        assert_eq!(got.len(), 1);
        let e = &got[0];
        assert_eq!(e.mime_type, "text/csv");
        let uri = e.artifact_uri();
        assert!(f.artifact(Some(&a), &uri).is_some());
        assert!(
            f.artifact(Area::of(Some("x"), None).as_ref(), &uri)
                .is_none()
        );
        let path = f.download_path(e);
        let query = path.split_once('?').unwrap().1;
        let mut expires = 0;
        let mut sig = String::new();
        for kv in query.split('&') {
            match kv.split_once('=').unwrap() {
                ("expires", v) => expires = v.parse().unwrap(),
                ("sig", v) => sig = v.to_string(),
                _ => {}
            }
        }
        let id = e.id.clone();
        assert!(
            f.verify_download(a.as_str(), &id, "report.csv", expires, &sig)
                .is_ok()
        );
        assert_eq!(
            f.verify_download(a.as_str(), &id, "report.csv", expires + 1, &sig)
                .unwrap_err(),
            DownloadRefusal::BadSignature
        );
        let past = unix_now() - 10;
        let old_sig = f.sign(a.as_str(), &id, "report.csv", past);
        assert_eq!(
            f.verify_download(a.as_str(), &id, "report.csv", past, &old_sig)
                .unwrap_err(),
            DownloadRefusal::Expired
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn names_must_be_one_plain_component() {
        for bad in ["", ".", "..", ".hidden", "a/b", "a\\b", "a\nb"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_name("report 2024.csv").is_ok());
        assert_eq!(percent_encode("a b/ü.csv"), "a%20b%2F%C3%BC.csv");
    }
}
