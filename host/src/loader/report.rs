//! What `hangar check` reports of a load: each component as it loaded, with
//! its capability imports paired with their grants. The loader fills it in;
//! it lives here so the crate root only re-exports it.

use crate::registry;

/// One component as it loaded.
#[derive(Debug, Clone)]
pub struct LoadedEntry {
    pub path: std::path::PathBuf,
    pub name: String,
    pub world: hangar_runtime::World,
    pub origin: hangar_runtime::Origin,
    /// Its capability imports (`hangar_runtime::capability::imports`), with versions.
    pub capability_imports: Vec<String>,
}

impl LoadedEntry {
    /// What `hangar check` prints under the component: one line per
    /// capability it imports or is granted. Outbound HTTP and credentials
    /// show their grants (an import without a grant still loads; its
    /// requests are refused); kv and config need no grant. Config values are
    /// never shown, only their keys.
    pub fn capability_lines(&self, plugin: Option<&hangar_config::PluginConfig>) -> Vec<String> {
        hangar_runtime::capability::check_lines(&self.capability_imports, plugin)
    }
}

#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    pub loaded: Vec<LoadedEntry>,
    pub from_cache: usize,
    pub compiled: usize,
    /// The plugins pulled from a registry (or its cache), by plugin name.
    pub sources: Vec<registry::Resolved>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(imports: &[&str]) -> LoadedEntry {
        LoadedEntry {
            path: "plugins/p.wasm".into(),
            name: "p".into(),
            world: hangar_runtime::World::Tool,
            origin: hangar_runtime::Origin::Compiled,
            capability_imports: imports.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn plugin(toml: &str) -> hangar_config::PluginConfig {
        toml::from_str(toml).unwrap()
    }

    #[test]
    fn capability_lines_pair_each_import_with_its_grants() {
        let all = entry(&[
            "wasi:http/outgoing-handler@0.2.12",
            "hangar:plugin/credentials@0.1.0",
            "hangar:plugin/kv@0.1.0",
            "hangar:plugin/config@0.1.0",
        ]);
        assert_eq!(
            all.capability_lines(None),
            [
                "imports wasi:http/outgoing-handler@0.2.12; grants http: none (its requests will be refused)",
                "imports hangar:plugin/credentials@0.1.0; grants credentials: none (its requests will be refused)",
                "imports hangar:plugin/kv@0.1.0 (its own namespace; no grant needed)",
                "imports hangar:plugin/config@0.1.0; config keys: none",
            ]
        );
        let granted = plugin(
            r#"config = { base_url = "x", api_key = "{{ env.SECRET }}" }
               grants = { http = ["api.example.org", "127.0.0.1:9000"], credentials = ["github"] }"#,
        );
        assert_eq!(
            all.capability_lines(Some(&granted)),
            [
                "imports wasi:http/outgoing-handler@0.2.12; grants http: api.example.org, 127.0.0.1:9000",
                "imports hangar:plugin/credentials@0.1.0; grants credentials: github",
                "imports hangar:plugin/kv@0.1.0 (its own namespace; no grant needed)",
                "imports hangar:plugin/config@0.1.0; config keys: api_key, base_url",
            ]
        );
        // Grants and config the component cannot use are said so; nothing
        // imported and nothing granted prints nothing.
        assert_eq!(
            entry(&[]).capability_lines(Some(&granted)),
            [
                "grants http: api.example.org, 127.0.0.1:9000 (the component imports no wasi:http/outgoing-handler)",
                "grants credentials: github (the component imports no hangar:plugin/credentials)",
                "config keys: api_key, base_url (the component imports no hangar:plugin/config)",
            ]
        );
        assert!(entry(&[]).capability_lines(None).is_empty());
        assert!(entry(&[]).capability_lines(Some(&plugin(""))).is_empty());
    }
}
