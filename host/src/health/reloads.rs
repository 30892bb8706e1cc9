//! What `/healthz` shows of reloads, and the counters and hook other
//! parts of the server (metrics) read. Health owns it (the reloader
//! records into it through `reload`'s re-export) so health names nothing
//! of the reloader.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde::Serialize;

/// What started a reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    /// The plugins directory or the config file changed.
    Files,
    /// SIGHUP.
    Signal,
    /// An upstream MCP server's tool list changed (its `list_changed`, or
    /// the periodic refresh): only the upstreams' tools are taken again,
    /// and the attempt is not recorded as a reload.
    Upstream,
    /// A guest said one of its lists changed
    /// (`client.announce-list-changed`): the catalog is rebuilt as on
    /// SIGHUP, so the guests are listed again.
    Guest,
}

/// How a reload attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// A new catalog is in service.
    Applied,
    /// Nothing on disk changed since the catalog in service was built.
    Unchanged,
    /// The catalog in service stays; `error` says why.
    Failed,
}

/// One reload attempt, as `/healthz` shows the last one.
#[derive(Debug, Clone, Serialize)]
pub struct Attempt {
    /// When it ended (RFC 3339, UTC).
    pub at: String,
    pub trigger: Trigger,
    pub outcome: Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Which lists changed: `tools`, `prompts`, `resources`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<&'static str>,
    /// Settings that changed in the file but apply only after a restart.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub needs_restart: Vec<String>,
    /// How long the attempt took, in milliseconds.
    pub ms: u64,
}

/// A function told of every reload attempt (e.g. to count it in metrics).
pub type Hook = Box<dyn Fn(&Attempt) + Send + Sync>;

/// The reload counters and the last attempt. One per server, shared by the
/// reloader (which records) and `/healthz` (which reports).
#[derive(Default)]
pub struct ReloadStatus {
    /// A catalog is being rebuilt now (`/readyz` answers 503 meanwhile).
    rebuilding: AtomicBool,
    applied: AtomicU64,
    failed: AtomicU64,
    last: Mutex<Option<Attempt>>,
    hooks: Mutex<Vec<Hook>>,
}

/// What `/healthz` shows under `reload`.
#[derive(Debug, Clone, Serialize)]
pub struct ReloadReport {
    /// Reloads that put a new catalog in service.
    pub reloads: u64,
    /// Reloads that failed (the catalog in service stayed).
    pub failed: u64,
    pub last: Option<Attempt>,
}

impl ReloadStatus {
    /// Reloads that put a new catalog in service since start-up.
    pub fn reloads(&self) -> u64 {
        self.applied.load(Ordering::Relaxed)
    }

    /// Reload attempts that failed since start-up.
    pub fn failures(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// Whether the last recorded attempt failed.
    pub fn last_failed(&self) -> bool {
        lock(&self.last)
            .as_ref()
            .is_some_and(|a| a.outcome == Outcome::Failed)
    }

    /// Whether a catalog is being rebuilt now.
    pub fn rebuilding(&self) -> bool {
        self.rebuilding.load(Ordering::Relaxed)
    }

    /// Marks a rebuild as running until the returned guard drops.
    pub fn rebuild_started(&self) -> Rebuilding<'_> {
        self.rebuilding.store(true, Ordering::Relaxed);
        Rebuilding(self)
    }

    /// Calls `hook` after every later reload attempt.
    pub fn on_attempt(&self, hook: Hook) {
        lock(&self.hooks).push(hook);
    }

    pub fn record(&self, attempt: Attempt) {
        match attempt.outcome {
            Outcome::Applied => self.applied.fetch_add(1, Ordering::Relaxed),
            Outcome::Failed => self.failed.fetch_add(1, Ordering::Relaxed),
            Outcome::Unchanged => 0,
        };
        for hook in lock(&self.hooks).iter() {
            hook(&attempt);
        }
        *lock(&self.last) = Some(attempt);
    }

    pub fn report(&self) -> ReloadReport {
        ReloadReport {
            reloads: self.reloads(),
            failed: self.failures(),
            last: lock(&self.last).clone(),
        }
    }
}

/// A rebuild in progress; dropping it (however the rebuild ends) clears it.
pub struct Rebuilding<'a>(&'a ReloadStatus);

impl Drop for Rebuilding<'_> {
    fn drop(&mut self) {
        self.0.rebuilding.store(false, Ordering::Relaxed);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rebuild_is_running_until_its_guard_drops_however_it_ends() {
        let status = ReloadStatus::default();
        assert!(!status.rebuilding());
        {
            let _running = status.rebuild_started();
            assert!(status.rebuilding());
        }
        assert!(!status.rebuilding());
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _running = status.rebuild_started();
            panic!("a rebuild that fails hard");
        }));
        assert!(caught.is_err());
        assert!(!status.rebuilding());
    }
}
