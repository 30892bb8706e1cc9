//! The pipeline every surface holds: swapped whole on reload.

use std::sync::Arc;

use arc_swap::ArcSwap;

use super::setup::Pipeline;
use crate::catalog::Catalog;

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
