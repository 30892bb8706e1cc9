//! The WIT doc comments a component may carry: a top-level custom section
//! `package-docs`, one version byte (0 or 1) then JSON in the shape of
//! wit-parser's `PackageMetadata`, as cargo-component and docs injectors
//! write it. A plain wit-bindgen build carries none.

use serde_json::Value;

const SECTION: &str = "package-docs";

/// Function docs by world-level name (`f`) and by `interface.f`.
#[derive(Debug, Default)]
pub struct PackageDocs {
    funcs: std::collections::HashMap<String, String>,
}

impl PackageDocs {
    /// The docs in `bytes` (a component); none when it has no section or
    /// the section is not understood (docs are a courtesy, never an error).
    pub fn read(bytes: &[u8]) -> PackageDocs {
        top_level_section(bytes, SECTION)
            .and_then(|data| {
                let (version, json) = data.split_first()?;
                (*version <= 1).then_some(())?;
                serde_json::from_slice::<Value>(json).ok()
            })
            .map(|json| PackageDocs::from_json(&json))
            .unwrap_or_default()
    }

    fn from_json(json: &Value) -> PackageDocs {
        let mut funcs = std::collections::HashMap::new();
        let mut take = |prefix: &str, table: Option<&Value>| {
            for (name, meta) in table.and_then(Value::as_object).into_iter().flatten() {
                // Version 0 maps a function to its docs; version 1 to its docs
                // or to `{ docs, stability }`.
                let doc = match meta {
                    Value::String(s) => Some(s.as_str()),
                    Value::Object(m) => m.get("docs").and_then(Value::as_str),
                    _ => None,
                };
                if let Some(doc) = doc.map(str::trim).filter(|d| !d.is_empty()) {
                    funcs.insert(format!("{prefix}{name}"), doc.to_string());
                }
            }
        };
        // Named interfaces of the package first; a world's own (inline)
        // interfaces and functions after, so they win over a package
        // interface of the same name.
        for (iface, meta) in json
            .get("interfaces")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            take(&format!("{iface}."), meta.get("funcs"));
        }
        for (_, world) in json
            .get("worlds")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            // Each table has an export half (`func_exports`,
            // `interface_exports`) that holds an export sharing its name
            // with an import; the import half holds the rest. Hangar calls
            // exports, so the export half is read last and wins.
            take("", world.get("funcs"));
            take("", world.get("func_exports"));
            for table in ["interfaces", "interface_exports"] {
                for (iface, meta) in world
                    .get(table)
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                {
                    take(&format!("{iface}."), meta.get("funcs"));
                }
            }
        }
        PackageDocs { funcs }
    }

    /// The docs of `f` or `interface.f`.
    pub fn func(&self, path: &str) -> Option<&str> {
        self.funcs.get(path).map(String::as_str)
    }
}

/// The data of the first custom section named `name` at the top level of a
/// component (not inside one of its modules or nested components).
fn top_level_section<'a>(bytes: &'a [u8], name: &str) -> Option<&'a [u8]> {
    let mut depth = 0usize;
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        match payload.ok()? {
            wasmparser::Payload::ModuleSection { .. }
            | wasmparser::Payload::ComponentSection { .. } => depth += 1,
            wasmparser::Payload::End(_) => depth = depth.saturating_sub(1),
            wasmparser::Payload::CustomSection(section) if depth == 0 && section.name() == name => {
                return Some(section.data());
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_versions_of_function_docs() {
        let docs = PackageDocs::from_json(&serde_json::json!({
            "worlds": {"w": {"funcs": {"fetch": "Fetches a URL.", "blank": "  "}}},
            "interfaces": {"math": {"funcs": {"add": {"docs": "Adds two numbers.", "stability": {}}}}},
        }));
        assert_eq!(docs.func("fetch"), Some("Fetches a URL."));
        assert_eq!(docs.func("math.add"), Some("Adds two numbers."));
        assert_eq!(docs.func("blank"), None);
        assert_eq!(docs.func("add"), None);
    }

    #[test]
    fn the_export_half_wins_over_the_import_of_the_same_name() {
        let docs = PackageDocs::from_json(&serde_json::json!({
            "interfaces": {"math": {"funcs": {"add": "The package interface's add."}}},
            "worlds": {"w": {
                "funcs": {"log": "The imported log.", "only-import": "Imported."},
                "func_exports": {"log": "The exported log."},
                "interfaces": {"math": {"funcs": {"add": "The imported add.", "sub": "Subtracts."}}},
                "interface_exports": {"math": {"funcs": {"add": {"docs": "The exported add."}}}},
            }},
        }));
        assert_eq!(docs.func("log"), Some("The exported log."));
        assert_eq!(docs.func("only-import"), Some("Imported."));
        assert_eq!(docs.func("math.add"), Some("The exported add."));
        assert_eq!(docs.func("math.sub"), Some("Subtracts."));
    }

    #[test]
    fn no_section_no_docs() {
        assert_eq!(PackageDocs::read(b"not wasm").func("x"), None);
    }
}
