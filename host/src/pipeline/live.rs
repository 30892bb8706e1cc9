//! The pipeline every surface holds: swapped whole on reload.

use std::sync::Arc;

use arc_swap::ArcSwap;

use super::Pipeline;
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
    /// channel); returns the catalog it replaced.
    pub fn swap(&self, catalog: Arc<Catalog>) -> Arc<Catalog> {
        let changes = self.current.load().changes().clone();
        let old = self
            .current
            .swap(Arc::new(Pipeline::new(catalog).with_changes(changes)));
        old.catalog.clone()
    }
}
