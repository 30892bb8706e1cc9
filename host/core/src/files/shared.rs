//! Files other replicas stored, found on disk (`[cluster]`).
//!
//! Replicas of a cluster keep uploads and artifacts in one directory they
//! all mount (`[uploads] dir`, `[artifacts] dir`: a shared volume; on one
//! machine, the same folder). Each replica indexes what it stored itself;
//! when a lookup misses, the file may be one another replica stored, so it
//! is looked for at `dir/<area>/<id>/<name>` and, when there and not past
//! its TTL (counted from the file's modification time, as the replica that
//! wrote it counts it), adopted into this replica's index. The sweep then
//! treats it like one of its own. The quotas stay per replica: each counts
//! what it stored and what it adopted.

use std::path::Path;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use super::names::{Area, check_name, safe_component};
use super::store::{Entry, STAGING, Store};

impl Store {
    /// The live file `area/id/name` in this store's directory, adopted into
    /// the index; `None` when it is not there, not a regular file, or
    /// expired. `id` and `name` come from callers: only plain path
    /// components are looked for.
    pub(super) fn adopt(&self, area: &Area, id: &str, name: &str) -> Option<Arc<Entry>> {
        if let Some(known) = self.get(id, name) {
            return (&known.area == area).then_some(known);
        }
        if !safe_component(area.as_str())
            || area.as_str() == STAGING
            || !safe_component(id)
            || check_name(name).is_err()
        {
            return None;
        }
        let path = self.dir.join(area.as_str()).join(id).join(name);
        let (size, expires) = self.live_file(&path)?;
        let entry = self.entry_until(area, id, name, size, path, expires);
        let mut index = self.index.lock().unwrap();
        let entries = index.entry(id.to_string()).or_default();
        // Another lookup may have adopted it meanwhile.
        if let Some(known) = entries.iter().find(|e| e.name == name) {
            return Some(known.clone());
        }
        entries.push(entry.clone());
        self.usage.add(area, entry.size);
        Some(entry)
    }

    /// Adopts every live file of `area` in the directory (before a listing).
    pub(super) fn adopt_area(&self, area: &Area) {
        if !safe_component(area.as_str()) || area.as_str() == STAGING {
            return;
        }
        let Ok(ids) = std::fs::read_dir(self.dir.join(area.as_str())) else {
            return;
        };
        for id in ids.flatten() {
            let Some(id_name) = id.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let Ok(files) = std::fs::read_dir(id.path()) else {
                continue;
            };
            for file in files.flatten() {
                if let Some(name) = file.file_name().to_str() {
                    self.adopt(area, &id_name, name);
                }
            }
        }
    }

    /// The size of the regular file at `path` and when it expires, if it
    /// has not.
    fn live_file(&self, path: &Path) -> Option<(u64, Instant)> {
        let meta = std::fs::symlink_metadata(path).ok()?;
        if !meta.is_file() {
            return None;
        }
        let age = SystemTime::now()
            .duration_since(meta.modified().ok()?)
            .unwrap_or_default();
        let left = self.quota.ttl.checked_sub(age)?;
        Some((meta.len(), Instant::now() + left))
    }
}
