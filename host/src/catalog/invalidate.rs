//! State sync: a write tool's `invalidates` globs drop the cached results
//! of the read tools and DB resources they match.

use super::glob::glob_match;
use super::{Backend, Catalog, Provider};

impl Catalog {
    /// Clears the result caches of every DB tool whose name, and every DB
    /// resource or template whose URI, matches one of `globs`; answers
    /// the names and URIs cleared, in catalog order. Entries that cache
    /// nothing are not listed: there was nothing to make stale.
    pub fn invalidate(&self, globs: &[String]) -> Vec<String> {
        if globs.is_empty() {
            return Vec::new();
        }
        let matches = |name: &str| globs.iter().any(|g| glob_match(g, name));
        let mut cleared = Vec::new();
        for tool in &self.order {
            if let Backend::Sql(db) = &tool.backend
                && matches(&tool.def.name)
                && db.clear_cache()
            {
                cleared.push(tool.def.name.clone());
            }
        }
        let offered = &self.offered;
        let resources = offered
            .resources
            .iter()
            .map(|r| (r.def.uri.as_str(), &r.provider));
        let templates = offered
            .templates
            .iter()
            .map(|t| (t.def.uri_template.as_str(), &t.provider));
        for (uri, provider) in resources.chain(templates) {
            if let Provider::Sql(db) = provider
                && matches(uri)
                && db.clear_cache()
            {
                cleared.push(uri.to_string());
            }
        }
        cleared
    }
}
