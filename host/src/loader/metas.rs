//! The per-plugin settings a load starts from: each configured plugin's
//! `config` table (environment substituted), HTTP grants and credentials.
//! Read again on every build, so a reload picks up changed config.

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::Config;
use crate::db;
use crate::wasm::{self, LoadFailure};

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
