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

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::config::{ArtifactsConfig, Config, UploadsConfig};

pub const UPLOAD_SCHEME: &str = "upload://";
pub const ARTIFACT_SCHEME: &str = "artifact://";
/// Where a component sees the uploads of its call: `/uploads/<id>/<name>`.
pub const GUEST_UPLOADS: &str = "/uploads";
/// Where a component leaves its artifacts.
pub const GUEST_ARTIFACTS: &str = "/artifacts";
/// Longest file name kept.
const MAX_NAME_BYTES: usize = 255;
/// Per-call staging folders (hard links to uploads) under the uploads dir.
const STAGING: &str = ".calls";

/// Whose files: an MCP session's (its id), or, without a session, an
/// authenticated principal's (`p-` and a hash of the subject). A call
/// with neither gets an area of its own (`c-<call id>`): its artifacts
/// are reachable only by their download URLs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Area(String);

impl Area {
    /// The area of a caller; `None` for an anonymous one.
    pub fn of(session_id: Option<&str>, subject: Option<&str>) -> Option<Area> {
        if let Some(id) = session_id.filter(|s| safe_component(s)) {
            return Some(Area(id.to_string()));
        }
        let digest = hex::encode(Sha256::digest(subject?.as_bytes()));
        Some(Area(format!("p-{}", &digest[..32])))
    }

    fn of_call(call_id: &str) -> Area {
        Area(format!("c-{call_id}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Letters, digits, `-` and `_`: safe as one path component and in a URI.
fn safe_component(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Why a file name is refused, if it is: names are kept as they are, so
/// they must be one plain path component.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a file needs a name".into());
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(format!("file name over {MAX_NAME_BYTES} bytes"));
    }
    if name == "." || name == ".." || name.starts_with('.') {
        return Err(format!("file name {name:?} may not start with a dot"));
    }
    if name
        .chars()
        .any(|c| c == '/' || c == '\\' || c.is_control())
    {
        return Err(format!(
            "file name {name:?} may not hold slashes or control characters"
        ));
    }
    Ok(())
}

/// One stored file.
#[derive(Debug)]
pub struct Entry {
    pub area: Area,
    /// The upload's id, or the id of the call that produced the artifact.
    pub id: String,
    pub name: String,
    pub size: u64,
    pub mime_type: String,
    path: PathBuf,
    expires: Instant,
    /// Order of arrival, for listings.
    seq: u64,
}

impl Entry {
    pub fn upload_handle(&self) -> String {
        format!("{UPLOAD_SCHEME}{}/{}", self.id, self.name)
    }

    pub fn artifact_uri(&self) -> String {
        format!(
            "{ARTIFACT_SCHEME}{}/{}/{}",
            self.area.as_str(),
            self.id,
            self.name
        )
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn live(&self, now: Instant) -> bool {
        now < self.expires
    }

    /// Seconds until it expires.
    pub fn expires_in(&self) -> u64 {
        self.expires
            .saturating_duration_since(Instant::now())
            .as_secs()
    }

    /// Whether its bytes are text a resource can carry as `text`.
    pub fn is_text(&self) -> bool {
        self.mime_type.starts_with("text/")
            || self.mime_type == "application/json"
            || self.mime_type == "application/xml"
    }
}

/// The media type of a file, by its extension.
pub fn mime_type(name: &str) -> &'static str {
    let ext = name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "txt" | "log" => "text/plain",
        "md" => "text/markdown",
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "html" | "htm" => "text/html",
        "json" => "application/json",
        "xml" => "application/xml",
        "pdf" => "application/pdf",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "svg" => "image/svg+xml",
        "zip" => "application/zip",
        _ => "application/octet-stream",
    }
}

/// The bounds of one store.
#[derive(Debug, Clone, Copy)]
struct Quota {
    max_file_bytes: u64,
    max_session_bytes: u64,
    max_session_files: u32,
    max_total_bytes: u64,
    ttl: Duration,
}

/// Why files were not stored.
#[derive(Debug)]
pub enum StoreError {
    /// A part or file the caller sent (or the tool left) is not acceptable.
    Invalid(String),
    /// A quota would be exceeded; nothing was kept.
    Quota(String),
    /// The disk failed.
    Io(String),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Invalid(m) | StoreError::Quota(m) | StoreError::Io(m) => f.write_str(m),
        }
    }
}

/// Uploads or artifacts: files on disk under `dir/<area>/<id>/<name>`, and
/// their index.
struct Store {
    /// `[uploads]` or `[artifacts]`, for messages.
    section: &'static str,
    dir: PathBuf,
    quota: Quota,
    index: Mutex<HashMap<String, Vec<Arc<Entry>>>>,
    /// Held while a batch is checked against the quotas and written, so two
    /// batches cannot both pass a check that only one of them fits.
    writing: tokio::sync::Mutex<()>,
}

impl Store {
    fn new(section: &'static str, dir: PathBuf, quota: Quota) -> Store {
        Store {
            section,
            dir,
            quota,
            index: Mutex::new(HashMap::new()),
            writing: tokio::sync::Mutex::new(()),
        }
    }

    /// The live entries of `area`, oldest first.
    fn of_area(&self, area: &Area) -> Vec<Arc<Entry>> {
        let now = Instant::now();
        let index = self.index.lock().unwrap();
        let mut entries: Vec<_> = index
            .values()
            .flatten()
            .filter(|e| &e.area == area && e.live(now))
            .cloned()
            .collect();
        entries.sort_by_key(|e| e.seq);
        entries
    }

    fn get(&self, id: &str, name: &str) -> Option<Arc<Entry>> {
        let now = Instant::now();
        let index = self.index.lock().unwrap();
        index
            .get(id)?
            .iter()
            .find(|e| e.name == name && e.live(now))
            .cloned()
    }

    /// Refuses `files` (name, size) when one is too large or `area` (or
    /// the whole store) would hold too much with them.
    fn check_quota(&self, area: &Area, files: &[(String, u64)]) -> Result<(), StoreError> {
        let q = &self.quota;
        let section = self.section;
        for (name, size) in files {
            if *size > q.max_file_bytes {
                return Err(StoreError::Quota(format!(
                    "{name:?} is {size} bytes, over the {} bytes a file may have ({section} max_file_bytes)",
                    q.max_file_bytes
                )));
            }
        }
        let adding: u64 = files.iter().map(|(_, s)| s).sum();
        let now = Instant::now();
        let (mut bytes, mut count, mut total) = (0u64, 0u32, 0u64);
        for e in self.index.lock().unwrap().values().flatten() {
            if !e.live(now) {
                continue;
            }
            total += e.size;
            if &e.area == area {
                bytes += e.size;
                count += 1;
            }
        }
        if count as usize + files.len() > q.max_session_files as usize {
            return Err(StoreError::Quota(format!(
                "the session would hold {} files, over its quota of {} ({section} max_session_files; it holds {count})",
                count as usize + files.len(),
                q.max_session_files
            )));
        }
        if bytes + adding > q.max_session_bytes {
            return Err(StoreError::Quota(format!(
                "the session would hold {} bytes, over its quota of {} ({section} max_session_bytes; it holds {bytes})",
                bytes + adding,
                q.max_session_bytes
            )));
        }
        if total + adding > q.max_total_bytes {
            return Err(StoreError::Quota(format!(
                "the server holds too many files now ({section} max_total_bytes = {}); try again later",
                q.max_total_bytes
            )));
        }
        Ok(())
    }

    fn insert(&self, entries: &[Arc<Entry>]) {
        let mut index = self.index.lock().unwrap();
        for e in entries {
            index.entry(e.id.clone()).or_default().push(e.clone());
        }
    }

    fn entry(&self, area: &Area, id: &str, name: &str, size: u64, path: PathBuf) -> Arc<Entry> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        Arc::new(Entry {
            area: area.clone(),
            id: id.to_string(),
            name: name.to_string(),
            size,
            mime_type: mime_type(name).to_string(),
            path,
            expires: Instant::now() + self.quota.ttl,
            seq: SEQ.fetch_add(1, Ordering::Relaxed),
        })
    }

    /// Drops expired entries and their files; then removes folders no
    /// entry knows that are older than the TTL (left by an earlier process,
    /// or by a call that ended badly).
    fn sweep(&self) {
        let now = Instant::now();
        let expired: Vec<Arc<Entry>> = {
            let mut index = self.index.lock().unwrap();
            let mut gone = Vec::new();
            index.retain(|_, entries| {
                entries.retain(|e| {
                    let live = e.live(now);
                    if !live {
                        gone.push(e.clone());
                    }
                    live
                });
                !entries.is_empty()
            });
            gone
        };
        for e in &expired {
            let _ = std::fs::remove_file(&e.path);
            if let Some(parent) = e.path.parent() {
                // Only once empty: an artifact's call folder holds its siblings.
                let _ = std::fs::remove_dir(parent);
            }
        }
        let known: std::collections::HashSet<String> =
            self.index.lock().unwrap().keys().cloned().collect();
        let old = |path: &Path, age: Duration| {
            std::fs::metadata(path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|elapsed| elapsed > age)
        };
        let Ok(areas) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for area in areas.flatten() {
            let area_path = area.path();
            let staging = area.file_name() == STAGING;
            if let Ok(ids) = std::fs::read_dir(&area_path) {
                for id in ids.flatten() {
                    let name = id.file_name().to_string_lossy().into_owned();
                    // A staging folder lives as long as its call: an hour is ample.
                    let age = if staging {
                        Duration::from_secs(3600)
                    } else {
                        self.quota.ttl
                    };
                    if (staging || !known.contains(&name)) && old(&id.path(), age) {
                        let _ = std::fs::remove_dir_all(id.path());
                    }
                }
            }
            if !staging {
                let _ = std::fs::remove_dir(&area_path);
            }
        }
    }
}

/// The uploads and artifacts of a server, and the key its download URLs
/// are signed with.
pub struct Files {
    uploads: Store,
    artifacts: Store,
    key: Vec<u8>,
    url_ttl: Duration,
    public_url: Option<String>,
}

impl Files {
    /// From `[uploads]` and `[artifacts]`; nothing is created on disk until
    /// it is needed. A `signing_key` naming a missing env variable is an error.
    pub fn new(config: &Config) -> anyhow::Result<Files> {
        let up: &UploadsConfig = &config.uploads;
        let art: &ArtifactsConfig = &config.artifacts;
        let cache = &config.server.cache_dir;
        let key = match &art.signing_key {
            Some(text) => {
                let env = |var: &str| std::env::var(var).ok();
                let key = crate::db::template::substitute_env(text, &env)
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
                up.dir.clone().unwrap_or_else(|| cache.join("uploads")),
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
                art.dir.clone().unwrap_or_else(|| cache.join("artifacts")),
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
        let entry = self.uploads.get(id, name);
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
        self.artifacts.of_area(area)
    }

    /// The artifact at `uri`, when it is `area`'s and live.
    pub fn artifact(&self, area: Option<&Area>, uri: &str) -> Option<Arc<Entry>> {
        let rest = uri.strip_prefix(ARTIFACT_SCHEME)?;
        let mut parts = rest.splitn(3, '/');
        let (owner, id, name) = (parts.next()?, parts.next()?, parts.next()?);
        let entry = self.artifacts.get(id, name)?;
        (entry.area.as_str() == owner && Some(&entry.area) == area).then_some(entry)
    }

    /// The path and query of a download URL for `entry`, good for `url_ttl`.
    pub fn download_path(&self, entry: &Entry) -> String {
        let expires = unix_now() + self.url_ttl.as_secs().max(1);
        let sig = self.sign(entry.area.as_str(), &entry.id, &entry.name, expires);
        format!(
            "/artifacts/{}/{}/{}?expires={expires}&sig={sig}",
            entry.area.as_str(),
            entry.id,
            percent_encode(&entry.name)
        )
    }

    /// An absolute download URL: `public_url`, or `http://` and `host`.
    pub fn download_url(&self, entry: &Entry, host: Option<&str>) -> String {
        let path = self.download_path(entry);
        match (&self.public_url, host) {
            (Some(base), _) => format!("{base}{path}"),
            (None, Some(host)) => format!("http://{host}{path}"),
            (None, None) => path,
        }
    }

    fn sign(&self, area: &str, id: &str, name: &str, expires: u64) -> String {
        hex::encode(self.mac(area, id, name, expires).finalize().into_bytes())
    }

    fn mac(&self, area: &str, id: &str, name: &str, expires: u64) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key size");
        mac.update(format!("{area}/{id}/{name}\n{expires}").as_bytes());
        mac
    }

    /// The artifact a download URL names, when its signature is right and
    /// it has not expired.
    pub fn verify_download(
        &self,
        area: &str,
        id: &str,
        name: &str,
        expires: u64,
        sig: &str,
    ) -> Result<Arc<Entry>, DownloadRefusal> {
        let sig = hex::decode(sig).map_err(|_| DownloadRefusal::BadSignature)?;
        self.mac(area, id, name, expires)
            .verify_slice(&sig)
            .map_err(|_| DownloadRefusal::BadSignature)?;
        if unix_now() > expires {
            return Err(DownloadRefusal::Expired);
        }
        match self.artifacts.get(id, name) {
            Some(e) if e.area.as_str() == area => Ok(e),
            _ => Err(DownloadRefusal::Gone),
        }
    }
}

/// Why a download URL was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum DownloadRefusal {
    BadSignature,
    Expired,
    /// The artifact expired or was never there.
    Gone,
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

/// The regular files at the top of `dir`, by name and size. Folders and
/// links are left out (and removed with the folder when it is discarded).
fn scan(dir: &Path) -> Result<Vec<(String, u64)>, StoreError> {
    let mut found = Vec::new();
    let entries = std::fs::read_dir(dir)
        .map_err(|e| StoreError::Io(format!("cannot read the artifacts folder: {e}")))?;
    for entry in entries.flatten() {
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            return Err(StoreError::Invalid(
                "an artifact's file name is not UTF-8".into(),
            ));
        };
        check_name(name).map_err(|e| StoreError::Invalid(format!("artifact: {e}")))?;
        found.push((name.to_string(), meta.len()));
    }
    found.sort();
    Ok(found)
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
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
