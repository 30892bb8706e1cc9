//! What the catalog's SQL statements count, over its DB tools, resources
//! and templates: their result caches' hits and misses, and the use of the
//! connectors' pools (for `/metrics` and the cache statistics a caller may see).

use std::sync::Arc;

use super::{Backend, Catalog, Provider};
use crate::db::{CacheStats, Connector};
use crate::metrics::Snapshot;
use hangar_core::call::Principal;

impl Catalog {
    /// Result-cache counters of the DB tools and resources that cache and
    /// that a caller with `principal` may see, by tool name or resource URI
    /// (template).
    pub fn cache_stats<'a>(
        &'a self,
        principal: Option<&'a Principal>,
    ) -> Vec<(&'a str, CacheStats)> {
        let tools = self.visible(principal).filter_map(|t| match &t.backend {
            Backend::Sql(db) => db.cache_stats().map(|s| (t.def.name.as_str(), s)),
            Backend::Wasm { .. } | Backend::Upstream { .. } | Backend::UploadUrl(_) => None,
        });
        let sql = |p: &Provider| match p {
            Provider::Sql(db) => db.cache_stats(),
            Provider::Wasm(_) | Provider::Upstream(_) => None,
        };
        let offered = &self.offered;
        let resources = offered
            .resources
            .iter()
            .filter(|r| r.access.visible(principal))
            .filter_map(|r| Some((r.def.uri.as_str(), sql(&r.provider)?)));
        let templates = offered
            .templates
            .iter()
            .filter(|t| t.access.visible(principal))
            .filter_map(|t| Some((t.def.uri_template.as_str(), sql(&t.provider)?)));
        tools.chain(resources).chain(templates).collect()
    }

    /// Result-cache counters and DB pool use over every statement the
    /// catalog serves, whoever may see it (for `/metrics`, which names none).
    pub fn db_live(&self, live: &mut Snapshot) {
        let tools = self.order.iter().filter_map(|t| match &t.backend {
            Backend::Sql(db) => Some(db),
            Backend::Wasm { .. } | Backend::Upstream { .. } | Backend::UploadUrl(_) => None,
        });
        let sql = |p: &Provider| match p {
            Provider::Sql(db) => Some(db.clone()),
            Provider::Wasm(_) | Provider::Upstream(_) => None,
        };
        let offered = &self.offered;
        let statements: Vec<_> = tools
            .cloned()
            .chain(offered.resources.iter().filter_map(|r| sql(&r.provider)))
            .chain(offered.templates.iter().filter_map(|t| sql(&t.provider)))
            .collect();
        let mut connectors: Vec<&Arc<Connector>> = Vec::new();
        for db in &statements {
            if let Some(stats) = db.cache_stats() {
                live.cache_hits += stats.hits;
                live.cache_misses += stats.misses;
            }
            if let Some(c) = db.connector()
                && !connectors.iter().any(|seen| Arc::ptr_eq(seen, c))
            {
                connectors.push(c);
            }
        }
        for c in connectors {
            let (in_use, waiting) = c.pool_use();
            live.db_in_use += in_use;
            live.db_waiting += waiting;
        }
    }
}
