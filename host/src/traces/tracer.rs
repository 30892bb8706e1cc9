//! The process's tracer: what starts spans and where finished ones go.
//! The struct and its global live apart from the code that uses them so
//! each worker's span buffer (`local`) reaches the queue without naming
//! the traces root.

use std::sync::{Arc, OnceLock};

use opentelemetry_sdk::trace::IdGenerator;

use super::encode::Envelope;
use super::export::Queue;
use super::sampling::Sampling;

pub(super) static TRACER: OnceLock<Tracer> = OnceLock::new();

/// The process's tracer, when traces are exported.
pub fn tracer() -> Option<&'static Tracer> {
    TRACER.get()
}

/// Starts spans (sampling them, giving them ids) and takes finished ones
/// to the exporter's queue. One per process, set by [`init`].
pub struct Tracer {
    pub(super) sampling: Sampling,
    pub(super) ids: Box<dyn IdGenerator>,
    pub(super) envelope: Arc<Envelope>,
    pub(super) queue: Arc<Queue>,
}
