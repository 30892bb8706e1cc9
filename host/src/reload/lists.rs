//! Which lists a reload changed, so sessions hear only of those.

use crate::catalog::Catalog;
use crate::pipeline::List;

/// The lists whose entries (or who may see them) differ between two catalogs.
pub fn changed(old: &Catalog, new: &Catalog) -> Vec<List> {
    [List::Tools, List::Prompts, List::Resources]
        .into_iter()
        .filter(|list| fingerprint(old, *list) != fingerprint(new, *list))
        .collect()
}

/// A list as clients see it, with its visibility rules, as one string.
fn fingerprint(catalog: &Catalog, list: List) -> String {
    let offered = catalog.offered();
    let entries: Vec<String> = match list {
        List::Tools => catalog
            .tools()
            .iter()
            .map(|t| format!("{:?}{:?}", t.def, t.stages.visible_to))
            .collect(),
        List::Prompts => offered
            .prompts
            .iter()
            .map(|p| format!("{:?}{:?}", p.def, p.access.visible_to))
            .collect(),
        List::Resources => offered
            .resources
            .iter()
            .map(|r| format!("{:?}{:?}", r.def, r.access.visible_to))
            .chain(
                offered
                    .templates
                    .iter()
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
