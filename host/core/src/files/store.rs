//! `Store`: one kind of file (uploads or artifacts) on disk under
//! `dir/<area>/<id>/<name>`, its in-memory index, its quotas and its sweep.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::names::{ARTIFACT_SCHEME, Area, UPLOAD_SCHEME, check_name, mime_type};
use super::usage::Usage;

/// Per-call staging folders (hard links to uploads) under the uploads dir.
pub(super) const STAGING: &str = ".calls";

/// One stored file.
#[derive(Debug)]
pub struct Entry {
    pub area: Area,
    /// The upload's id, or the id of the call that produced the artifact.
    pub id: String,
    pub name: String,
    pub size: u64,
    pub mime_type: String,
    pub(super) path: PathBuf,
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

    pub(super) fn live(&self, now: Instant) -> bool {
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

/// The bounds of one store.
#[derive(Debug, Clone, Copy)]
pub(super) struct Quota {
    pub(super) max_file_bytes: u64,
    pub(super) max_session_bytes: u64,
    pub(super) max_session_files: u32,
    pub(super) max_total_bytes: u64,
    pub(super) ttl: Duration,
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
pub(super) struct Store {
    /// `[uploads]` or `[artifacts]`, for messages.
    pub(super) section: &'static str,
    pub(super) dir: PathBuf,
    pub(super) quota: Quota,
    pub(super) index: Mutex<HashMap<String, Vec<Arc<Entry>>>>,
    /// Held while a batch is checked against the quotas and written, so two
    /// batches cannot both pass a check that only one of them fits.
    pub(super) writing: tokio::sync::Mutex<()>,
    /// What each area holds or is being written, live.
    pub(super) usage: Usage,
}

impl Store {
    pub(super) fn new(section: &'static str, dir: PathBuf, quota: Quota) -> Store {
        Store {
            section,
            dir,
            quota,
            index: Mutex::new(HashMap::new()),
            writing: tokio::sync::Mutex::new(()),
            usage: Usage::default(),
        }
    }

    /// The live entries of `area`, oldest first.
    pub(super) fn of_area(&self, area: &Area) -> Vec<Arc<Entry>> {
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

    pub(super) fn get(&self, id: &str, name: &str) -> Option<Arc<Entry>> {
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
    pub(super) fn check_quota(
        &self,
        area: &Area,
        files: &[(String, u64)],
    ) -> Result<(), StoreError> {
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

    pub(super) fn insert(&self, entries: &[Arc<Entry>]) {
        let mut index = self.index.lock().unwrap();
        for e in entries {
            index.entry(e.id.clone()).or_default().push(e.clone());
            self.usage.add(&e.area, e.size);
        }
    }

    pub(super) fn entry(
        &self,
        area: &Area,
        id: &str,
        name: &str,
        size: u64,
        path: PathBuf,
    ) -> Arc<Entry> {
        self.entry_until(area, id, name, size, path, Instant::now() + self.quota.ttl)
    }

    /// [`Store::entry`], expiring at `expires` (a file another replica
    /// stored keeps the expiry it was given there).
    pub(super) fn entry_until(
        &self,
        area: &Area,
        id: &str,
        name: &str,
        size: u64,
        path: PathBuf,
        expires: Instant,
    ) -> Arc<Entry> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        Arc::new(Entry {
            area: area.clone(),
            id: id.to_string(),
            name: name.to_string(),
            size,
            mime_type: mime_type(name).to_string(),
            path,
            expires,
            seq: SEQ.fetch_add(1, Ordering::Relaxed),
        })
    }

    /// Drops expired entries and their files; then removes folders no
    /// entry knows that are older than the TTL (left by an earlier process,
    /// or by a call that ended badly).
    pub(super) fn sweep(&self) {
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
            self.usage.remove(&e.area, e.size);
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

/// The regular files at the top of `dir`, by name and size. Folders and
/// links are left out (and removed with the folder when it is discarded).
pub(super) fn scan(dir: &Path) -> Result<Vec<(String, u64)>, StoreError> {
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
