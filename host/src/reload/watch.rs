//! What triggers a reload: changes in the plugins directory or to the
//! config file (seen with `notify`, debounced), SIGHUP, an upstream MCP
//! server's tool list changing (only the upstreams' tools are taken again),
//! and a guest announcing that one of its lists changed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::mpsc;

use super::{Reloader, Trigger};

/// How long the files must stay quiet before a reload: a copy or an
/// editor's save is a burst of events, and one reload follows it.
pub const DEBOUNCE: Duration = Duration::from_millis(250);

/// How long after an upstream's list changed the catalog is updated, so
/// that several upstreams refreshed together make one update.
const UPSTREAM_SETTLE: Duration = Duration::from_millis(50);

/// How long after a guest announced a list change the guests are listed
/// again, so that a burst of announcements makes one rebuild.
const GUEST_SETTLE: Duration = Duration::from_millis(50);

/// The running watch: reloads until dropped (it holds the file watcher).
pub struct Watch {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts watching. SIGHUP is caught from this call on; a directory that
/// cannot be watched is logged, and SIGHUP still reloads.
pub fn start(reloader: Arc<Reloader>, plugins: &Path) -> Watch {
    let (tx, rx) = mpsc::unbounded_channel();
    let config = absolute(&reloader.source().path);
    let watcher = watch_files(absolute(plugins), config, tx)
        .map_err(|e| tracing::warn!("hot reload: cannot watch files ({e}); SIGHUP still reloads"))
        .ok();
    let hangup = hangup();
    Watch {
        task: tokio::spawn(run(reloader, rx, hangup, watcher)),
    }
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// A watcher sending one message per relevant event: a `.wasm` created,
/// written, renamed or removed in the plugins directory (or `mappers/`), or
/// the config file replaced or written. The config file's folder is watched,
/// not the file, so an editor that saves by renaming is still seen.
///
/// A config file that is a symlink is also seen when a link on its way
/// changes: a Kubernetes ConfigMap volume updates `hangar.toml ->
/// ..data/hangar.toml` by renaming a new `..data` link over the old one, an
/// event on `..data`, never on `hangar.toml`. So any other event in the
/// config's folder resolves the file again and counts when the target moved.
fn watch_files(
    plugins: PathBuf,
    config: PathBuf,
    tx: mpsc::UnboundedSender<()>,
) -> notify::Result<notify::RecommendedWatcher> {
    let (plugins_dir, config_file) = (plugins.clone(), config.clone());
    let config_dir = config.parent().map(Path::to_path_buf);
    let resolved = std::sync::Mutex::new(std::fs::canonicalize(&config).ok());
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        let content = matches!(
            event.kind,
            EventKind::Create(_) | EventKind::Remove(_) | EventKind::Any
        ) || matches!(event.kind, EventKind::Modify(m) if !matches!(m, notify::event::ModifyKind::Metadata(_)));
        if !content {
            return;
        }
        let relevant = event.paths.iter().any(|p| {
            *p == config_file
                || (p.starts_with(&plugins_dir) && p.extension().is_some_and(|x| x == "wasm"))
        });
        let in_config_dir = || {
            event
                .paths
                .iter()
                .any(|p| p.parent() == config_dir.as_deref())
        };
        let target_moved = || {
            let now = std::fs::canonicalize(&config_file).ok();
            let mut last = resolved.lock().unwrap_or_else(|e| e.into_inner());
            let moved = now.is_some() && *last != now;
            *last = now;
            moved
        };
        if relevant || (in_config_dir() && target_moved()) {
            let _ = tx.send(());
        }
    })?;
    watcher.watch(&plugins, RecursiveMode::Recursive)?;
    if let Some(folder) = config.parent().filter(|f| f.is_dir()) {
        watcher.watch(folder, RecursiveMode::NonRecursive)?;
    }
    Ok(watcher)
}

#[cfg(unix)]
type Hangup = tokio::signal::unix::Signal;
#[cfg(not(unix))]
type Hangup = ();

fn hangup() -> Option<Hangup> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        signal(SignalKind::hangup())
            .map_err(|e| tracing::warn!("hot reload: cannot catch SIGHUP: {e}"))
            .ok()
    }
    #[cfg(not(unix))]
    None
}

async fn next_hangup(hangup: &mut Option<Hangup>) {
    #[cfg(unix)]
    if let Some(signal) = hangup {
        signal.recv().await;
        return;
    }
    let _ = hangup;
    std::future::pending::<()>().await
}

async fn run(
    reloader: Arc<Reloader>,
    mut rx: mpsc::UnboundedReceiver<()>,
    mut hangup: Option<Hangup>,
    _watcher: Option<notify::RecommendedWatcher>,
) {
    // One channel for the server's life (the loader's), unlike the upstreams'.
    let mut guests = reloader.guest_changes();
    guests.mark_unchanged();
    loop {
        // The catalog in service now: a reload may have replaced it.
        let (seen, upstreams) = reloader.upstream_changes();
        let trigger = tokio::select! {
            Some(()) = rx.recv() => {
                // Wait for the burst to end.
                while let Ok(Some(())) = tokio::time::timeout(DEBOUNCE, rx.recv()).await {}
                Trigger::Files
            }
            () = next_hangup(&mut hangup) => Trigger::Signal,
            () = upstream_changed(upstreams, seen) => {
                tokio::time::sleep(UPSTREAM_SETTLE).await;
                Trigger::Upstream
            }
            Ok(()) = guests.changed() => {
                tokio::time::sleep(GUEST_SETTLE).await;
                guests.mark_unchanged();
                Trigger::Guest
            }
        };
        reloader.reload(trigger).await;
    }
}

/// Resolves once the upstreams' change count is past `seen`.
async fn upstream_changed(mut count: tokio::sync::watch::Receiver<u64>, seen: u64) {
    loop {
        if *count.borrow_and_update() != seen {
            return;
        }
        if count.changed().await.is_err() {
            // The catalog is gone: the loop takes the one in service next.
            return std::future::pending().await;
        }
    }
}
