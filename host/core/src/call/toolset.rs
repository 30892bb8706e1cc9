//! `Toolset`: the toolset a request came through (`/mcp/NAME`,
//! `/toolsets/NAME/…`), by name. The surfaces put it on the request and in
//! the call context; the catalog says what is in it.

use std::sync::Arc;

/// A `[toolsets.NAME]` by name. Cheap to clone: one per request.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Toolset(pub Arc<str>);

impl Toolset {
    pub fn new(name: &str) -> Toolset {
        Toolset(Arc::from(name))
    }

    pub fn name(&self) -> &str {
        &self.0
    }
}
