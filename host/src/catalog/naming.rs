//! The catalog names of a plugin's tools: its prefix (`<plugin>.` for a
//! plain component unless `prefix` says otherwise) and `[plugins.X] tools`,
//! which selects and renames.

use hangar_config::ToolSelection;
use hangar_core::call::ToolDef;

/// A tool as the catalog names it, with its name inside the plugin.
pub struct Named {
    pub guest_name: String,
    pub def: ToolDef,
}

/// Names `defs` (named as the plugin knows them): every one, prefixed, when
/// `selection` is absent; else only those it lists, renamed where it says.
/// A selection naming no tool of the plugin is returned as a problem.
pub fn name_tools(
    defs: Vec<ToolDef>,
    prefix: Option<&str>,
    selection: Option<&[ToolSelection]>,
) -> (Vec<Named>, Vec<String>) {
    let prefixed = |name: &str| format!("{}{name}", prefix.unwrap_or(""));
    let Some(selection) = selection else {
        let named = defs
            .into_iter()
            .map(|mut def| {
                let name = prefixed(&def.name);
                let guest_name = std::mem::replace(&mut def.name, name);
                Named { guest_name, def }
            })
            .collect();
        return (named, Vec::new());
    };
    let mut problems = Vec::new();
    let mut named = Vec::new();
    for entry in selection {
        let Some(def) = defs.iter().find(|d| d.name == entry.export()) else {
            let known: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
            problems.push(format!(
                "tools: {:?} is no tool of this plugin (it has: {})",
                entry.export(),
                known.join(", ")
            ));
            continue;
        };
        let mut def = def.clone();
        def.name = entry
            .rename()
            .map_or_else(|| prefixed(&def.name), str::to_string);
        named.push(Named {
            guest_name: entry.export().to_string(),
            def,
        });
    }
    (named, problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(name: &str) -> ToolDef {
        ToolDef {
            name: name.into(),
            title: None,
            description: String::new(),
            input_schema: serde_json::json!({"type": "object"}),
            output_schema: None,
            annotations: None,
            meta: None,
        }
    }

    #[test]
    fn all_prefixed_without_a_selection() {
        let (named, problems) = name_tools(vec![def("a"), def("m.b")], Some("p."), None);
        let names: Vec<_> = named
            .iter()
            .map(|n| (n.guest_name.as_str(), n.def.name.as_str()))
            .collect();
        assert_eq!(names, [("a", "p.a"), ("m.b", "p.m.b")]);
        assert!(problems.is_empty());
    }

    #[test]
    fn a_selection_keeps_renames_and_names_what_is_missing() {
        let selection = [
            ToolSelection::Keep("m.b".into()),
            ToolSelection::Rename(hangar_config::Rename {
                export: "a".into(),
                name: "alpha".into(),
            }),
            ToolSelection::Keep("zz".into()),
        ];
        let (named, problems) = name_tools(
            vec![def("a"), def("m.b"), def("c")],
            Some("p."),
            Some(&selection),
        );
        let names: Vec<_> = named
            .iter()
            .map(|n| (n.guest_name.as_str(), n.def.name.as_str()))
            .collect();
        assert_eq!(names, [("m.b", "p.m.b"), ("a", "alpha")]);
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("\"zz\""), "{problems:?}");
    }
}
