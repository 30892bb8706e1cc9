//! The pipeline every surface holds: swapped whole on reload.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use super::setup::Pipeline;
use crate::catalog::Catalog;

/// How long a listing that started an upstream waits for the catalog
/// holding its tools.
const TAKE_WAIT: Duration = Duration::from_secs(2);

/// The current [`Pipeline`], shared by MCP, REST and health. A request takes
/// [`Live::current`] once and runs wholly against that catalog, so a call in
/// flight during a reload finishes on the catalog it started with; the old
/// catalog is dropped when its last call ends. Cloning shares the slot.
#[derive(Clone)]
pub struct Live {
    current: Arc<ArcSwap<Pipeline>>,
}

impl Live {
    pub fn new(pipeline: Pipeline) -> Live {
        Live {
            current: Arc::new(ArcSwap::from_pointee(pipeline)),
        }
    }

    /// The pipeline over the catalog in service now.
    pub fn current(&self) -> Arc<Pipeline> {
        self.current.load_full()
    }

    /// The pipeline a listing takes: the one in service, once each
    /// upstream started on first use (`start = "first-use"`) has been
    /// started and has listed — a listing is that use — and the catalog in
    /// service holds its lists (the reloader puts them in within
    /// milliseconds; [`TAKE_WAIT`] at most).
    pub async fn for_listing(&self) -> Arc<Pipeline> {
        let now = self.current();
        let Some(count) = now.catalog().start_first_use().await else {
            return now;
        };
        let deadline = tokio::time::Instant::now() + TAKE_WAIT;
        loop {
            let now = self.current();
            if now.catalog().upstream_seen() >= count || tokio::time::Instant::now() >= deadline {
                return now;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Puts `catalog` in service for every later request (same changes
    /// channel, same metrics, which count the reload); returns the catalog
    /// it replaced.
    pub fn swap(&self, catalog: Arc<Catalog>) -> Arc<Catalog> {
        let now = self.current.load();
        let next = Pipeline::new(catalog)
            .with_changes(now.changes().clone())
            .with_metrics(now.metrics().clone())
            .with_door(now.door().clone());
        let next = match now.files() {
            Some(files) => next.with_files(files.clone()),
            None => next,
        };
        drop(now);
        let old = self.current.swap(Arc::new(next));
        old.metrics().reloaded();
        old.catalog.clone()
    }
}
