//! The routes of `[toolsets.NAME]`: `/mcp/NAME` and `/toolsets/NAME/…`,
//! each behind the toolset's own resource server when it names its own
//! `resource` (whose metadata is served at its RFC 9728 path), else behind
//! `[oauth]`'s. The handlers find the toolset as a request extension.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use axum::Router;

use crate::oauth::{self, ResourceServer};
use hangar_config::ToolsetConfig;
use hangar_core::call::Toolset;

use super::tokens::PersonalDoor;

/// What the toolsets add to the app.
pub(super) struct ToolsetRoutes {
    /// `/mcp/NAME`, behind their doors.
    pub(super) mcp: Router,
    /// `/toolsets/NAME/…`, behind their doors (when REST is protected).
    pub(super) rest: Router,
    /// The metadata of the toolsets with a resource of their own.
    pub(super) metadata: Router,
}

/// `mcp_at(path, toolset)` makes the MCP routes at `path`, `rest_for` the
/// REST router; both serve `toolset` through [`in_toolset`].
pub(super) fn routes(
    toolsets: &BTreeMap<String, ToolsetConfig>,
    oauth: Option<&Arc<ResourceServer>>,
    personal: &Arc<PersonalDoor>,
    rest_closed: bool,
    mcp_at: impl Fn(&str) -> Router,
    rest_for: impl Fn() -> Router,
) -> ToolsetRoutes {
    let mut out = ToolsetRoutes {
        mcp: Router::new(),
        rest: Router::new(),
        metadata: Router::new(),
    };
    // The metadata paths `[oauth]` serves already.
    let mut taken: HashSet<String> = oauth.iter().flat_map(|rs| oauth::paths(rs)).collect();
    for (name, config) in toolsets {
        let toolset = Some(Toolset::new(name));
        let own = match (oauth, &config.resource) {
            (Some(rs), Some(resource)) => {
                let rs = rs.for_resource(resource);
                out.metadata = out.metadata.merge(oauth::own_routes(&rs, &mut taken));
                Some(rs)
            }
            _ => None,
        };
        let door = |router: Router, closed: bool| match own.as_ref().or(oauth) {
            Some(rs) if closed => oauth::protect(router, rs),
            _ => super::tokens::accept(router, personal),
        };
        let mcp = in_toolset(mcp_at(&format!("/mcp/{name}")), &toolset);
        out.mcp = out.mcp.merge(door(mcp, true));
        let rest = door(in_toolset(rest_for(), &toolset), rest_closed);
        out.rest = out.rest.nest(&format!("/toolsets/{name}"), rest);
    }
    out
}

/// `router` serving `toolset` (`None`: the whole catalog).
pub(super) fn in_toolset(router: Router, toolset: &Option<Toolset>) -> Router {
    match toolset {
        Some(t) => router.layer(axum::Extension(t.clone())),
        None => router,
    }
}
