//! `[plugins.X] tools = [...]`: which of a plugin's tools the catalog takes,
//! and under which names. Written for plain components, whose every exported
//! function would otherwise be a tool; it works for any tool plugin.

use schemars::JsonSchema;
use serde::Deserialize;

/// One entry: the tool's name inside the plugin (`"fetch"`, or
/// `"iface.fetch"` for a function of an exported interface), or a table that
/// also renames it: `{ export = "iface.fetch", name = "web.fetch" }` (the
/// whole catalog name, no prefix added).
#[derive(Debug, Clone, Deserialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum ToolSelection {
    /// The tool's name inside the plugin, kept (with the plugin's prefix).
    Keep(String),
    /// The tool and the whole catalog name it gets.
    Rename(Rename),
}

/// `{ export = "iface.fetch", name = "web.fetch" }`.
#[derive(Debug, Clone, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Rename {
    /// The tool's name inside the plugin.
    pub export: String,
    /// Its whole name in the catalog (no prefix is added).
    pub name: String,
}

impl ToolSelection {
    /// The tool's name inside the plugin.
    pub fn export(&self) -> &str {
        match self {
            ToolSelection::Keep(export) | ToolSelection::Rename(Rename { export, .. }) => export,
        }
    }

    /// The catalog name it asks for, when it renames.
    pub fn rename(&self) -> Option<&str> {
        match self {
            ToolSelection::Keep(_) => None,
            ToolSelection::Rename(Rename { name, .. }) => Some(name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_tables() {
        #[derive(Deserialize)]
        struct P {
            tools: Vec<ToolSelection>,
        }
        let p: P =
            toml::from_str(r#"tools = ["fetch", { export = "math.add", name = "add" }]"#).unwrap();
        assert_eq!(p.tools[0].export(), "fetch");
        assert_eq!(p.tools[0].rename(), None);
        assert_eq!(p.tools[1].export(), "math.add");
        assert_eq!(p.tools[1].rename(), Some("add"));
        assert!(toml::from_str::<P>(r#"tools = [{ export = "a", nme = "b" }]"#).is_err());
    }
}
