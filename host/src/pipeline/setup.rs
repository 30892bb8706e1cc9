//! The [`Pipeline`] itself: the catalog it runs calls against and the
//! parts kept across reloads (changes channel, metrics, files, door), with
//! the builders that set them. Apart from the stages (`mod.rs`, `files`,
//! `meta`) and the live slot so each of them names this file, not the
//! pipeline root.

use std::sync::Arc;

use super::door::Door;
use crate::catalog::Catalog;
use crate::metrics::Metrics;
use hangar_core::call::ResourceChanges;

/// Runs calls against one catalog (one generation of it: [`Live`] holds
/// the one in service and swaps it on reload).
#[derive(Clone)]
pub struct Pipeline {
    pub(super) catalog: Arc<Catalog>,
    /// Resources guests announced as changed, for subscribed clients.
    pub(super) changes: ResourceChanges,
    /// Where calls are counted and timed (one registry for the process).
    pub(super) metrics: Arc<Metrics>,
    /// Uploads and artifacts (kept across reloads); none in a bare pipeline.
    pub(super) files: Option<Arc<hangar_core::files::Files>>,
    /// What stands before every auth check (kept across reloads).
    pub(super) door: Arc<Door>,
}

impl Pipeline {
    pub fn new(catalog: Arc<Catalog>) -> Pipeline {
        Pipeline {
            catalog,
            changes: ResourceChanges::default(),
            metrics: Arc::default(),
            files: None,
            door: Arc::default(),
        }
    }

    /// This pipeline, checking callers through `door` (a reloaded pipeline
    /// keeps the old one's, with its counts).
    pub fn with_door(mut self, door: Arc<Door>) -> Pipeline {
        self.door = door;
        self
    }

    pub fn door(&self) -> &Arc<Door> {
        &self.door
    }

    /// This pipeline, keeping uploads and artifacts in `files`.
    pub fn with_files(mut self, files: Arc<hangar_core::files::Files>) -> Pipeline {
        self.files = Some(files);
        self
    }

    /// This pipeline, counting calls in `metrics` (a reloaded pipeline keeps
    /// the old one's).
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Pipeline {
        self.metrics = metrics;
        self
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// This pipeline, announcing changes on `changes` (the guests' channel).
    pub fn with_changes(mut self, changes: ResourceChanges) -> Pipeline {
        self.changes = changes;
        self
    }

    pub fn changes(&self) -> &ResourceChanges {
        &self.changes
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }
}
