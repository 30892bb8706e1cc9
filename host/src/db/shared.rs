//! The result cache's second tier (`[cluster]`): results in the replicas'
//! shared Redis (`hangar_core::cluster::cache`), so what one replica fetched
//! serves the others. A Redis that fails is skipped: the call goes on to
//! the database.

use std::sync::Arc;
use std::time::Duration;

use super::cache;
use super::outcome::Rows;
use super::tool::{DbTool, Served};

impl DbTool {
    /// A result another replica fetched, from the shared tier: one byte
    /// (`1` when truncated) and the rows' JSON text.
    pub(super) async fn shared_get(&self, key: &cache::Key) -> Option<Arc<Served>> {
        let cluster = self.shared.as_ref()?;
        let bytes = match cluster.cache_get(key).await {
            Ok(found) => found?,
            Err(e) => {
                tracing::debug!("{}: shared cache skipped: {e}", self.label);
                return None;
            }
        };
        let (flag, text) = bytes.split_first()?;
        let text = std::str::from_utf8(text).ok()?.to_string();
        let rows = serde_json::from_str(&text).ok()?;
        Some(Arc::new(Served {
            rows: Rows {
                rows,
                truncated: *flag == b'1',
            },
            text,
        }))
    }

    pub(super) async fn shared_put(&self, key: &cache::Key, served: &Served, ttl: Duration) {
        let Some(cluster) = &self.shared else {
            return;
        };
        let mut bytes = Vec::with_capacity(served.text.len() + 1);
        bytes.push(if served.rows.truncated { b'1' } else { b'0' });
        bytes.extend_from_slice(served.text.as_bytes());
        if let Err(e) = cluster.cache_put(key, &bytes, ttl).await {
            tracing::debug!("{}: shared cache not written: {e}", self.label);
        }
    }
}
