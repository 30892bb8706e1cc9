//! `Usage`: the bytes each area, and the whole store, hold or are being
//! written into it right now — kept live, so that calls writing at the
//! same time see each other's bytes.
//!
//! Stored files count from their insertion until the sweep drops them; a
//! running call's writes count from the write until the call's cap is
//! dropped (after its files were stored or removed, so for a moment they
//! count twice: on the safe side).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::names::Area;

/// A counter of bytes, shared with the caps of the calls writing into it.
pub type Counter = Arc<AtomicU64>;

#[derive(Debug, Default)]
pub(super) struct Usage {
    total: Counter,
    areas: Mutex<HashMap<Area, Counter>>,
}

impl Usage {
    /// The counters of `area` and of the whole store.
    pub(super) fn counters(&self, area: &Area) -> (Counter, Counter) {
        let mut areas = self.areas.lock().unwrap();
        let of_area = areas.entry(area.clone()).or_default().clone();
        (of_area, self.total.clone())
    }

    pub(super) fn add(&self, area: &Area, bytes: u64) {
        let (of_area, total) = self.counters(area);
        of_area.fetch_add(bytes, Ordering::Relaxed);
        total.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Takes `bytes` off; an area left at 0 that no call holds is forgotten.
    pub(super) fn remove(&self, area: &Area, bytes: u64) {
        let mut areas = self.areas.lock().unwrap();
        if let Some(of_area) = areas.get(area) {
            let _ = of_area.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                Some(n.saturating_sub(bytes))
            });
            if of_area.load(Ordering::Relaxed) == 0 && Arc::strong_count(of_area) == 1 {
                areas.remove(area);
            }
        }
        let _ = self
            .total
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                Some(n.saturating_sub(bytes))
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn areas_and_the_total_move_together() {
        let u = Usage::default();
        let a = Area::of(Some("s1"), None).unwrap();
        u.add(&a, 10);
        let (of_a, total) = u.counters(&a);
        assert_eq!(
            (of_a.load(Ordering::Relaxed), total.load(Ordering::Relaxed)),
            (10, 10)
        );
        drop(of_a);
        u.remove(&a, 10);
        assert!(u.areas.lock().unwrap().is_empty());
        assert_eq!(total.load(Ordering::Relaxed), 0);
    }
}
