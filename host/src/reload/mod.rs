//! Hot reload: when the plugins directory or the config file changes, or
//! on SIGHUP, build a new catalog off the request path and swap it in
//! whole. Calls in flight finish on the catalog they started with. A reload
//! that would newly break anything (a component that does not load, a
//! config that does not parse or names what is not there) leaves the
//! catalog in service and says why in `/healthz` and the log.

mod lists;
mod source;
pub mod watch;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;

pub use crate::health::{Attempt, Hook, Outcome, ReloadReport, ReloadStatus, Trigger};
pub use source::ConfigSource;

use crate::Hangar;
use crate::health::Facts;
use crate::loader::Loader;
use crate::pipeline::Live;
use hangar_config::Config;
use hangar_runtime::LoadFailure;

/// Rebuilds and swaps the catalog. Owns the config in service (the lock
/// also makes reloads run one at a time) and the fingerprint of what it
/// was built from.
pub struct Reloader {
    source: ConfigSource,
    loader: Arc<Loader>,
    live: Live,
    facts: Arc<ArcSwap<Facts>>,
    status: Arc<ReloadStatus>,
    running: tokio::sync::Mutex<Running>,
}

/// The config in service and the fingerprint of the files it came from.
struct Running {
    config: Arc<Config>,
    fingerprint: u64,
}

impl Reloader {
    /// A reloader for a loaded server whose config is read from `source`.
    pub fn new(hangar: &Hangar, source: ConfigSource) -> Reloader {
        let fingerprint = source.fingerprint(&hangar.config.server.plugins);
        Reloader {
            loader: hangar.loader.clone(),
            live: hangar.pipeline.clone(),
            facts: hangar.facts.clone(),
            status: hangar.reload.clone(),
            running: tokio::sync::Mutex::new(Running {
                config: Arc::new(hangar.config.clone()),
                fingerprint,
            }),
            source,
        }
    }

    pub fn source(&self) -> &ConfigSource {
        &self.source
    }

    /// The upstreams' change count the catalog in service has taken, and
    /// the channel that counts them (see `Catalog::upstream_changes`).
    pub fn upstream_changes(&self) -> (u64, tokio::sync::watch::Receiver<u64>) {
        self.live.current().catalog().upstream_changes()
    }

    /// The channel counting the list changes guests announced.
    pub fn guest_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.live.current().changes().relists()
    }

    /// Reloads now. A change of files that leaves them as the catalog in
    /// service was built from does nothing (and is recorded only to clear
    /// a failure shown before); SIGHUP and a guest's announcement always
    /// rebuild; an upstream's change takes only the upstreams' tools again.
    pub async fn reload(&self, trigger: Trigger) -> Outcome {
        let started = Instant::now();
        let mut running = self.running.lock().await;
        if trigger == Trigger::Upstream {
            // Not an attempt `/healthz` reports: the files' last one stays shown.
            return match self.take_upstream_tools(&running) {
                None => Outcome::Unchanged,
                Some(changed) => {
                    let ms = started.elapsed().as_millis() as u64;
                    tracing::info!(ms, ?changed, "upstream tool lists changed; catalog updated");
                    Outcome::Applied
                }
            };
        }
        let fingerprint = self.source.fingerprint(&running.config.server.plugins);
        let result = if trigger == Trigger::Files && fingerprint == running.fingerprint {
            tracing::debug!("reload: the files are as the catalog in service was built from");
            if !self.status.last_failed() {
                return Outcome::Unchanged;
            }
            None
        } else {
            let _rebuilding = self.status.rebuild_started();
            Some(self.rebuild(&mut running, fingerprint).await)
        };
        let ms = started.elapsed().as_millis() as u64;
        let (outcome, error, changed, needs_restart) = match result {
            None => (Outcome::Unchanged, None, Vec::new(), Vec::new()),
            Some(Ok((changed, needs_restart))) => {
                tracing::info!(?trigger, ms, ?changed, "reloaded");
                (Outcome::Applied, None, changed, needs_restart)
            }
            Some(Err(error)) => {
                tracing::error!(
                    ?trigger,
                    ms,
                    "reload failed; the catalog in service stays: {error}"
                );
                (Outcome::Failed, Some(error), Vec::new(), Vec::new())
            }
        };
        for setting in &needs_restart {
            tracing::warn!("reload: {setting} changed; it applies after a restart");
        }
        self.status.record(Attempt {
            at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            trigger,
            outcome,
            error,
            changed,
            needs_restart,
            ms,
        });
        outcome
    }

    /// Builds a catalog from the files as they are now and puts it in
    /// service; returns the lists that changed and the settings that need
    /// a restart, or why the catalog in service stays.
    async fn rebuild(
        &self,
        running: &mut Running,
        fingerprint: u64,
    ) -> Result<(Vec<&'static str>, Vec<String>), String> {
        let read = self.source.read().map_err(|e| format!("{e:#}"))?;
        let (config, needs_restart) = hangar_config::reloadable::keep_fixed(&running.config, read);
        let config = Arc::new(config);
        let generation = self
            .loader
            .build_off_path(config.clone())
            .await
            .map_err(|e| format!("{e:#}"))?;
        let new_problems = newly_broken(self.facts.load().problems(), &generation.problems);
        if !new_problems.is_empty() {
            return Err(new_problems.join("; "));
        }
        let catalog = Arc::new(generation.catalog);
        let old = self.live.swap(catalog.clone());
        self.facts.store(Arc::new(
            Facts::new(generation.problems, &config)
                .with_sources(generation.report.sources.clone()),
        ));
        running.config = config;
        running.fingerprint = fingerprint;
        let changed = lists::changed(&old, &catalog);
        let names = changed.iter().map(|(list, _)| lists::name(*list)).collect();
        let changes = self.live.current().changes().clone();
        for (list, reach) in changed {
            changes.list_changed(list, reach);
        }
        Ok((names, needs_restart))
    }
}

impl Reloader {
    /// Puts in service a catalog like the one in service with each
    /// upstream's tools as it lists them now (the config, plugins and
    /// offers stay), and tells sessions of the lists that changed. The
    /// upstreams' problems in `/healthz` are replaced by theirs now (one
    /// that lists at last is no longer one). `None` when nothing a client
    /// sees changed (nothing is swapped then).
    fn take_upstream_tools(&self, running: &Running) -> Option<Vec<&'static str>> {
        let current = self.live.current();
        let old = current.catalog();
        let (catalog, upstream_problems) = old.with_upstream_tools(&running.config);
        let facts = self.facts.load();
        let ours: Vec<PathBuf> = (old.upstreams().iter())
            .map(|u| PathBuf::from(format!("upstreams.{}", u.name)))
            .collect();
        let mut problems: Vec<LoadFailure> = (facts.problems().iter())
            .filter(|p| !ours.contains(&p.path))
            .cloned()
            .collect();
        problems.extend(upstream_problems);
        let changed = lists::changed(old, &catalog);
        let same_problems = problems.len() == facts.problems().len()
            && problems.iter().all(|p| facts.problems().contains(p));
        if changed.is_empty() && same_problems {
            old.upstream_changes_seen(catalog.upstream_changes().0);
            return None;
        }
        self.live.swap(Arc::new(catalog));
        self.facts.store(Arc::new(
            Facts::new(problems, &running.config).with_sources(facts.sources().to_vec()),
        ));
        let names = changed.iter().map(|(list, _)| lists::name(*list)).collect();
        let changes = self.live.current().changes().clone();
        for (list, reach) in changed {
            changes.list_changed(list, reach);
        }
        Some(names)
    }
}

/// The problems of a new build that the catalog in service does not have,
/// as `path: error` lines.
fn newly_broken(running: &[LoadFailure], built: &[LoadFailure]) -> Vec<String> {
    built
        .iter()
        .filter(|p| {
            !running
                .iter()
                .any(|r| r.path == p.path && r.error == p.error)
        })
        .map(|p| format!("{}: {}", p.path.display(), p.error))
        .collect()
}
