//! Hangar: an MCP server whose tools are WebAssembly components.
//!
//! A call goes resolve → auth → input map → validate → execute → output map
//! ([`pipeline`]); tools come from components in the plugins directory
//! ([`wasm`]) and are listed in the [`catalog`]; [`mcp`] and [`rest`] are the
//! surfaces that carry calls in.

pub mod asks;
pub mod call;
pub mod catalog;
pub mod cluster;
pub mod config;
pub mod db;
pub mod files;
pub mod health;
pub mod kv;
pub mod loader;
pub mod mcp;
pub mod metrics;
pub mod oauth;
pub mod outbound;
pub mod pipeline;
pub mod registry;
pub mod reload;
pub mod rest;
pub mod scaffold;
pub mod server;
pub mod traces;
pub mod upstream;
pub mod wasm;

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use config::Config;
use loader::Loader;
use pipeline::{Live, Pipeline};
use wasm::LoadFailure;

/// A loaded server: configuration, runtime and catalog, ready to serve or
/// report. What it holds at start-up; a reload ([`reload::Reloader`])
/// swaps the catalog in `pipeline` and keeps the rest.
pub struct Hangar {
    pub config: Config,
    /// The pipeline in service, shared by every surface.
    pub pipeline: Live,
    /// What failed to load; the server runs degraded with these.
    pub problems: Vec<LoadFailure>,
    /// How the components loaded (`hangar check` prints this).
    pub report: LoadReport,
    /// The runtime and what else a reload reuses.
    pub loader: Arc<Loader>,
    /// The catalog in service's problems, for `/healthz`; a reload swaps them.
    pub facts: Arc<ArcSwap<health::Facts>>,
    /// Reload counters and the last attempt (`/healthz`, metrics).
    pub reload: Arc<reload::ReloadStatus>,
    /// Uploads and artifacts (`[uploads]`, `[artifacts]`; a reload keeps them).
    pub files: Arc<files::Files>,
}

/// One component as it loaded.
#[derive(Debug, Clone)]
pub struct LoadedEntry {
    pub path: std::path::PathBuf,
    pub name: String,
    pub world: wasm::World,
    pub origin: wasm::Origin,
    /// Its capability imports ([`wasm::CAPABILITY_IMPORTS`]), with versions.
    pub capability_imports: Vec<String>,
}

impl LoadedEntry {
    /// What `hangar check` prints under the component: one line per
    /// capability it imports or is granted. Outbound HTTP and credentials
    /// show their grants (an import without a grant still loads; its
    /// requests are refused); kv and config need no grant. Config values are
    /// never shown, only their keys.
    pub fn capability_lines(&self, plugin: Option<&config::PluginConfig>) -> Vec<String> {
        let imports = &self.capability_imports;
        let import = |interface| wasm::find_import(imports, interface);
        let listed = |items: &[String]| Some(items.join(", ")).filter(|s| !s.is_empty());
        let grants = plugin.map(|p| &p.grants);
        let mut lines = Vec::new();
        for (interface, what, granted) in [
            (
                wasm::HTTP_IMPORT,
                "http",
                grants.and_then(|g| listed(&g.http)),
            ),
            (
                wasm::CREDENTIALS_IMPORT,
                "credentials",
                grants.and_then(|g| listed(&g.credentials)),
            ),
        ] {
            match (import(interface), granted) {
                (Some(name), granted) => lines.push(format!(
                    "imports {name}; grants {what}: {}",
                    granted
                        .as_deref()
                        .unwrap_or("none (its requests will be refused)")
                )),
                (None, Some(granted)) => lines.push(format!(
                    "grants {what}: {granted} (the component imports no {interface})"
                )),
                (None, None) => {}
            }
        }
        if let Some(name) = import("hangar:plugin/kv") {
            lines.push(format!(
                "imports {name} (its own namespace; no grant needed)"
            ));
        }
        let keys = plugin.and_then(|p| listed(&p.config.keys().cloned().collect::<Vec<_>>()));
        match (import("hangar:plugin/config"), keys) {
            (Some(name), keys) => lines.push(format!(
                "imports {name}; config keys: {}",
                keys.as_deref().unwrap_or("none")
            )),
            (None, Some(keys)) => lines.push(format!(
                "config keys: {keys} (the component imports no hangar:plugin/config)"
            )),
            (None, None) => {}
        }
        lines
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

impl Hangar {
    /// Loads every plugin and builds the catalog. Fails only on what makes
    /// serving impossible (a duplicate tool name, an unreadable plugins directory).
    pub async fn load(config: Config) -> anyhow::Result<Hangar> {
        let loader = Arc::new(Loader::open(&config).await?);
        let generation = loader.build(&config).await?;
        let changes = loader.changes().clone();
        let facts = health::Facts::new(generation.problems.clone(), &config)
            .with_sources(generation.report.sources.clone());
        let files = Arc::new(files::Files::new(&config)?);
        Ok(Hangar {
            pipeline: Live::new(
                Pipeline::new(Arc::new(generation.catalog))
                    .with_changes(changes)
                    .with_files(files.clone())
                    .with_door(Arc::new(pipeline::Door::new(config.server.auth_failures)))
                    .with_metrics(Arc::new(if config.server.metrics {
                        metrics::Metrics::new()
                    } else {
                        metrics::Metrics::off()
                    })),
            ),
            facts: Arc::new(ArcSwap::from_pointee(facts)),
            reload: Arc::default(),
            files,
            problems: generation.problems,
            report: generation.report,
            config,
            loader,
        })
    }
}

impl Hangar {
    /// The wasm runtime the catalog's plugins run on.
    pub fn runtime(&self) -> &wasm::Runtime {
        self.loader.runtime()
    }
}

/// Each configured plugin's name and `config` table, `{{ env.VAR }}`
/// substituted; a missing variable is a problem and leaves the key unset.
pub(crate) fn plugin_metas(
    config: &Config,
    client: &Arc<wasm::http::HttpClient>,
) -> (HashMap<String, wasm::PluginMeta>, Vec<LoadFailure>) {
    let env = |var: &str| std::env::var(var).ok();
    let mut problems = Vec::new();
    let substitute =
        |text: &str| db::template::substitute_env(text, &env).map_err(|e| e.to_string());
    let (providers, broken) =
        wasm::credentials::Providers::build(&config.credentials, client, &substitute);
    for (name, error) in broken {
        problems.push(LoadFailure {
            path: std::path::PathBuf::from(format!("credentials.{name}")),
            error,
        });
    }
    let mut metas = HashMap::new();
    for (name, plugin) in &config.plugins {
        let mut values = std::collections::BTreeMap::new();
        for (key, value) in &plugin.config {
            let text = match value {
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            match db::template::substitute_env(&text, &env) {
                Ok(v) => {
                    values.insert(key.clone(), v);
                }
                Err(e) => problems.push(LoadFailure {
                    path: std::path::PathBuf::from(format!("plugins.{name}.config.{key}")),
                    error: e.to_string(),
                }),
            }
        }
        let grants = wasm::http::HttpGrants::parse(&plugin.grants.http).unwrap_or_else(|error| {
            problems.push(LoadFailure {
                path: std::path::PathBuf::from(format!("plugins.{name}.grants")),
                error,
            });
            Default::default()
        });
        let credentials = providers
            .granted(&plugin.grants.credentials)
            .unwrap_or_else(|error| {
                problems.push(LoadFailure {
                    path: std::path::PathBuf::from(format!("plugins.{name}.grants")),
                    error,
                });
                Default::default()
            });
        let meta = wasm::PluginMeta {
            credentials: Arc::new(credentials),
            name: name.as_str().into(),
            config: Arc::new(values),
            reuse: plugin.instances.reuse.then(|| plugin.instances.clone()),
            log: Default::default(),
            http: Arc::new(wasm::http::HttpAccess {
                grants,
                client: client.clone(),
            }),
            kv: None,
            changes: Default::default(),
        };
        metas.insert(name.clone(), meta);
    }
    (metas, problems)
}

#[cfg(test)]
mod layers;

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(imports: &[&str]) -> LoadedEntry {
        LoadedEntry {
            path: "plugins/p.wasm".into(),
            name: "p".into(),
            world: wasm::World::Tool,
            origin: wasm::Origin::Compiled,
            capability_imports: imports.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn plugin(toml: &str) -> config::PluginConfig {
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
