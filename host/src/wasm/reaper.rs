//! Dropping used instances off the answer's path. A call's fresh instance
//! is dropped when the call ends, and the drop is not free: wasmtime resets
//! the slot's dirty memory and tables (a `PAGEMAP_SCAN` ioctl, zeroing,
//! `madvise`) and releases the slot. Dropped inline, the caller waits for
//! that before its answer is written.
//!
//! So a runtime worker keeps the last few instances its calls used and
//! drops them when it next has nothing to do (tokio's `on_thread_park`,
//! which [`on_park`] is). A worker that never idles keeps at most
//! [`MAX_KEPT`]: past that it drops each at once, as before; and a call about to wait for a free slot first drops what its
//! worker holds. A thread that is not a runtime worker (it never parks, so
//! it is never marked) drops at once.

use std::any::Any;
use std::cell::{Cell, RefCell};

/// How many used instances a busy worker may hold back. Each holds a slot
/// of the instance pool until it is dropped.
const MAX_KEPT: usize = 2;

thread_local! {
    /// Whether this thread drops what it held back before it parks: set by the first [`on_park`].
    static REAPS: Cell<bool> = const { Cell::new(false) };
    static KEPT: RefCell<Vec<Box<dyn Any>>> = const { RefCell::new(Vec::new()) };
}

/// Drops `instance` now, or, on a runtime worker, when the worker next idles.
pub(super) fn bury<T: 'static>(instance: T) {
    if !REAPS.with(Cell::get) {
        return drop(instance);
    }
    // A full hand drops the new one at once, unboxed: a worker that never
    // idles pays nothing more than before.
    let full = KEPT.with(|kept| kept.borrow().len() >= MAX_KEPT);
    if full {
        return drop(instance);
    }
    KEPT.with(|kept| kept.borrow_mut().push(Box::new(instance)));
}

/// Drops what this thread held back, and marks it as a thread that holds
/// back: the runtime calls it on each worker before the worker parks.
pub fn on_park() {
    REAPS.with(|r| r.set(true));
    reap();
}

/// Drops what this thread held back: before a call waits for a slot, so
/// that the instances its own worker holds are not what it waits for.
pub(super) fn reap() {
    while let Some(instance) = KEPT.with(|kept| kept.borrow_mut().pop()) {
        drop(instance);
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use super::*;

    #[test]
    fn a_thread_that_never_parked_drops_at_once_and_a_worker_holds_back_a_few() {
        let dropped = Rc::new(());
        bury(dropped.clone());
        assert_eq!(
            Rc::strong_count(&dropped),
            1,
            "not a worker: dropped at once"
        );

        on_park(); // as a worker's first park does
        bury(dropped.clone());
        bury(dropped.clone());
        assert_eq!(
            Rc::strong_count(&dropped),
            3,
            "held back until the worker idles"
        );
        bury(dropped.clone());
        assert_eq!(Rc::strong_count(&dropped), 3, "at most MAX_KEPT held back");
        on_park();
        assert_eq!(
            Rc::strong_count(&dropped),
            1,
            "all dropped when the worker idles"
        );
    }
}
