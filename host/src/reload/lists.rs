//! Which lists a reload changed, and through which endpoints (the whole
//! catalog's, each toolset's), so sessions hear only of those.

use std::collections::BTreeSet;

use crate::catalog::{Catalog, Scope};
use hangar_core::call::{List, Reach, Toolset};

/// The lists whose entries (or who may see them) differ between two
/// catalogs, each with the endpoints where it differs.
pub fn changed(old: &Catalog, new: &Catalog) -> Vec<(List, Reach)> {
    // Every endpoint either catalog serves: a toolset a reload added or
    // removed changed at its endpoint (its routes decide whether it has one).
    let toolsets: BTreeSet<&str> = old
        .toolsets()
        .names()
        .chain(new.toolsets().names())
        .collect();
    let endpoints: Vec<Option<Toolset>> = std::iter::once(None)
        .chain(toolsets.into_iter().map(|name| Some(Toolset::new(name))))
        .collect();
    [List::Tools, List::Prompts, List::Resources]
        .into_iter()
        .filter_map(|list| {
            let reach = Reach::new(
                endpoints
                    .iter()
                    .filter(|t| {
                        let (was, now) = (old.scope(t.as_ref()), new.scope(t.as_ref()));
                        fingerprint(old, list, was) != fingerprint(new, list, now)
                    })
                    .cloned(),
            );
            (!reach.is_empty()).then_some((list, reach))
        })
        .collect()
}

/// A list as clients of one endpoint see it, with its visibility rules,
/// as one string.
fn fingerprint(catalog: &Catalog, list: List, scope: Scope<'_>) -> String {
    let offered = catalog.offered();
    let entries: Vec<String> = match list {
        List::Tools => catalog
            .tools()
            .iter()
            .filter(|t| scope.tool(&t.def.name))
            .map(|t| format!("{:?}{:?}", t.def, t.stages.visible_to))
            .collect(),
        List::Prompts => offered
            .prompts
            .iter()
            .filter(|p| scope.prompt(&p.def.name))
            .map(|p| format!("{:?}{:?}", p.def, p.access.visible_to))
            .collect(),
        List::Resources => offered
            .resources
            .iter()
            .filter(|r| scope.resource(&r.def.uri))
            .map(|r| format!("{:?}{:?}", r.def, r.access.visible_to))
            .chain(
                offered
                    .templates
                    .iter()
                    .filter(|t| scope.resource(&t.def.uri_template))
                    .map(|t| format!("{:?}{:?}", t.def, t.access.visible_to)),
            )
            .collect(),
    };
    match list {
        // The mode decides what `tools/list` shows (the meta-tools or not).
        List::Tools => format!("{:?}|{entries:?}", catalog.mode()),
        _ => format!("{entries:?}"),
    }
}

/// The name `/healthz` shows for a list.
pub fn name(list: List) -> &'static str {
    match list {
        List::Tools => "tools",
        List::Prompts => "prompts",
        List::Resources => "resources",
    }
}
