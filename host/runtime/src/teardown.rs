//! Tearing spent instances down off the answer's path.
//!
//! Dropping an instance's store is the last of a call's wasm work: wasmtime
//! resets the pages the guest dirtied (a `PAGEMAP_SCAN` ioctl over its
//! memory, then a copy or a clear of each dirty page) and frees its pooling
//! slots. For `echo` that is about an eighth of the host's time per call,
//! and for a Python component, whose memory is tens of MiB, far more. The
//! answer needs none of it. So an instance that is not kept for reuse is
//! handed to [`later`], and the runtime worker that ran the call drops it
//! when it next idles (tokio's `on_thread_park`, which [`on_park`] is): by
//! then the answer has been written. A worker that stays busy drops its
//! spent instances once [`MAX_SPENT`] have gathered, so at most that many
//! per worker wait. A thread that is not a runtime worker (it never parks,
//! so it is never marked) drops them at once.
//!
//! A spent instance keeps its instance slot until it is dropped, so the
//! slot count stays what the pooling allocator holds; a call on the same
//! worker that finds no free slot drops them at once (`Scheduler::slot`).

use std::cell::{Cell, RefCell};

/// How many spent instances a busy worker holds before it drops them.
const MAX_SPENT: usize = 4;

thread_local! {
    /// Whether this thread drops its spent instances when it parks: set by the first [`on_park`].
    static PARKS: Cell<bool> = const { Cell::new(false) };
    static SPENT: RefCell<Vec<Box<dyn Send>>> = const { RefCell::new(Vec::new()) };
}

/// Drops `instance` when this worker next idles, or now on a thread that does not park.
pub(super) fn later<T: Send + 'static>(instance: T) {
    if !PARKS.with(Cell::get) {
        return drop(instance);
    }
    let full = SPENT.with(|spent| {
        let mut spent = spent.borrow_mut();
        spent.push(Box::new(instance));
        spent.len() >= MAX_SPENT
    });
    if full {
        drop_spent();
    }
}

/// Drops this thread's spent instances, and marks it as a thread that
/// parks: the runtime calls it on each worker before the worker parks.
pub fn on_park() {
    PARKS.with(|p| p.set(true));
    drop_spent();
}

/// Drops what this thread gathered, outside the borrow (a store's drop
/// must not find the list borrowed); whether there was any.
pub(super) fn drop_spent() -> bool {
    let spent = SPENT.with(|spent| std::mem::take(&mut *spent.borrow_mut()));
    let any = !spent.is_empty();
    drop(spent);
    any
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts its drops.
    struct Counted(Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_thread_that_never_parks_drops_at_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        later(Counted(drops.clone()));
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_worker_drops_when_it_parks_or_when_enough_have_gathered() {
        let drops = Arc::new(AtomicUsize::new(0));
        on_park(); // marks this thread as one that parks
        later(Counted(drops.clone()));
        later(Counted(drops.clone()));
        assert_eq!(
            drops.load(Ordering::SeqCst),
            0,
            "kept until the worker idles"
        );
        on_park();
        assert_eq!(drops.load(Ordering::SeqCst), 2);
        for _ in 0..MAX_SPENT {
            later(Counted(drops.clone()));
        }
        assert_eq!(
            drops.load(Ordering::SeqCst),
            2 + MAX_SPENT,
            "a busy worker drops them once MAX_SPENT have gathered"
        );
    }
}
