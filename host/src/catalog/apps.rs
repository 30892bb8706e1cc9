//! The catalog's MCP Apps: which tools link a view (`_meta.ui.resourceUri`),
//! whether an endpoint offers any (the server then advertises the
//! `io.modelcontextprotocol/ui` extension), and the links that lead
//! nowhere (`hangar check` warns of them).

use hangar_core::call::apps::view_of;
use hangar_core::call::{Meta, Toolset};

use super::Catalog;

impl Catalog {
    /// Whether an MCP App is offered through `toolset`: a tool in its
    /// scope whose `_meta.ui.resourceUri` is set, whatever its backend (an
    /// upstream's tool as it is now). What callers may see is not asked:
    /// capabilities are the server's, not a principal's.
    pub fn offers_apps(&self, toolset: Option<&Toolset>) -> bool {
        let scope = self.scope(toolset);
        (self.order.iter())
            .filter(|t| scope.tool(&t.def.name))
            .any(|t| view_of(t.current_def().meta.as_ref()).is_some())
    }

    /// `(tool name, view URI)` of every tool that links a view, in order.
    pub fn apps(&self) -> Vec<(String, String)> {
        (self.order.iter())
            .filter_map(|t| {
                let def = t.current_def();
                let view = view_of(def.meta.as_ref())?.to_string();
                Some((def.name.clone(), view))
            })
            .collect()
    }

    /// One line per tool whose view is no resource of the catalog: a
    /// client would find nothing to render.
    pub fn app_warnings(&self) -> Vec<String> {
        self.apps()
            .into_iter()
            .filter(|(_, view)| self.offered.resolve_resource(view).is_err())
            .map(|(tool, view)| {
                format!("tool {tool}: its view {view} (_meta.ui.resourceUri) is no resource the catalog offers")
            })
            .collect()
    }
}

/// What `hangar check` says of a tool's `_meta.ui`: its view and who sees it.
pub fn describe_app(meta: Option<&Meta>) -> Option<String> {
    let view = view_of(meta)?;
    let visibility = meta
        .and_then(|m| m.get("ui"))
        .and_then(|ui| ui.get("visibility"))
        .and_then(|v| v.as_array())
        .map(|v| {
            v.iter()
                .filter_map(|w| w.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_else(|| "model, app".into());
    Some(format!("app    view {view} (visible to {visibility})"))
}
