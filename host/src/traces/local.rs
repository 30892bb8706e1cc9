//! Each runtime worker's own span buffer. Spans are encoded where they
//! end, into a buffer of the worker's, and join the shared queue in bulk:
//! when [`LOCAL_MAX`] have gathered, when the worker next idles (tokio's
//! `on_thread_park`, which [`on_park`] is), or when the thread ends.
//! Measured against encoding every span straight into the shared queue,
//! this takes the queue's lock once per batch instead of twice per call,
//! and the two workers no longer write the same cache lines by turns.
//! A thread that is not a runtime worker (it never parks, so it is never
//! marked) hands each span over at once.

use std::cell::{Cell, RefCell};

use super::encode::LastCall;
use super::span::SpanRecord;
use super::tracer::{Tracer, tracer};

/// How many spans a busy worker gathers before it hands them over.
const LOCAL_MAX: usize = 32;

thread_local! {
    /// Whether this thread hands its spans over when it parks: set by the first [`on_park`].
    static PARKS: Cell<bool> = const { Cell::new(false) };
    static LOCAL: RefCell<Local> = RefCell::new(Local::default());
}

#[derive(Default)]
struct Local {
    entries: Vec<u8>,
    ends: Vec<usize>,
    calls: LastCall,
}

impl Local {
    fn flush(&mut self) {
        if self.ends.is_empty() {
            return;
        }
        if let Some(tracer) = tracer() {
            tracer.queue.push(&self.entries, &self.ends);
        }
        self.entries.clear();
        self.ends.clear();
    }
}

impl Drop for Local {
    /// A worker that ends hands over what it gathered.
    fn drop(&mut self) {
        self.flush();
    }
}

/// Encodes `span` and hands it to the queue, now or with the worker's next batch.
pub(super) fn record(tracer: &Tracer, span: &SpanRecord) {
    if !PARKS.with(Cell::get) {
        let mut entry = Vec::new();
        let mut calls = LastCall::default();
        tracer.envelope.put_entry(span, &mut calls, &mut entry);
        return tracer.queue.push(&entry, &[entry.len()]);
    }
    LOCAL.with(|local| {
        let local = &mut *local.borrow_mut();
        tracer
            .envelope
            .put_entry(span, &mut local.calls, &mut local.entries);
        let end = local.entries.len();
        local.ends.push(end);
        if local.ends.len() >= LOCAL_MAX {
            local.flush();
        }
    });
}

/// Hands over what this worker gathered, and marks it as a thread that
/// gathers: the runtime calls it on each worker before the worker parks.
pub fn on_park() {
    if tracer().is_none() {
        return;
    }
    PARKS.with(|p| p.set(true));
    LOCAL.with(|local| local.borrow_mut().flush());
}
