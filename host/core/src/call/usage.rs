//! What a call's guests consumed (fuel), added up across the call's
//! stages for metrics.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Fuel a call's tool handler burned, added up by the wasm backend and
/// shared by every clone of the call's context.
#[derive(Debug, Clone, Default)]
pub struct CallUsage(Arc<AtomicU64>);

impl CallUsage {
    pub fn add_fuel(&self, fuel: u64) {
        self.0.fetch_add(fuel, Ordering::Relaxed);
    }

    pub fn fuel(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}
