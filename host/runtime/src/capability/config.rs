//! The `hangar:plugin/config` import: `config.get(key)` answers the
//! plugin's `[plugins.NAME] config` table, `{{ env.X }}` / `{{ file.X }}`
//! already filled in at load. A value whose placeholder cannot be filled is
//! a problem at its key, and the key is left unset.

use std::collections::BTreeMap;
use std::sync::Arc;

use wasmtime::component::{HasSelf, Linker};

use super::shape::{
    CallSetup, Capability, GuestStore, LoadSetup, PluginSetup, Problems, find_import,
};
use crate::bindings::tool::hangar::plugin::config as wit;
use hangar_config::PluginConfig;

const CONFIG_IMPORT: &str = "hangar:plugin/config";

/// The plugin-config capability (see the module doc).
pub struct PluginConfigValues;

/// One plugin's config values, by key.
pub type Values = Arc<BTreeMap<String, String>>;

/// What a call's `config.get` reads.
pub struct ConfigCall(Values);

impl Capability for PluginConfigValues {
    const IMPORTS: &'static [&'static str] = &[CONFIG_IMPORT];
    type Load = ();
    type Plugin = Values;
    type Call = ConfigCall;

    fn load(_: &LoadSetup<'_>, _: &mut Problems) {}

    fn configure(_: &(), plugin: &PluginSetup<'_>, problems: &mut Problems) -> Values {
        let mut values = BTreeMap::new();
        let table = plugin.config.map(|p| &p.config);
        for (key, value) in table.into_iter().flatten() {
            let text = match value {
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let env = |var: &str| std::env::var(var).ok();
            match hangar_config::substitute_env(&text, &env) {
                Ok(v) => {
                    values.insert(key.clone(), v);
                }
                Err(e) => problems.add(plugin.at(&format!("config.{key}")), e.to_string()),
            }
        }
        Arc::new(values)
    }

    fn per_call(values: &Values, _: &CallSetup<'_>) -> anyhow::Result<ConfigCall> {
        Ok(ConfigCall(values.clone()))
    }

    fn link<T: GuestStore>(
        linker: &mut Linker<T>,
        get: fn(&mut T) -> &mut ConfigCall,
    ) -> anyhow::Result<()> {
        wit::add_to_linker::<T, HasSelf<ConfigCall>>(linker, get)
            .map_err(|e| anyhow::anyhow!("{e:?}"))
    }

    /// The import with the keys it can read (never the values), or keys the
    /// component cannot read.
    fn check_lines(imports: &[String], plugin: Option<&PluginConfig>) -> Vec<String> {
        let keys = plugin
            .map(|p| p.config.keys().cloned().collect::<Vec<_>>().join(", "))
            .filter(|keys| !keys.is_empty());
        match (find_import(imports, CONFIG_IMPORT), keys) {
            (Some(name), keys) => vec![format!(
                "imports {name}; config keys: {}",
                keys.as_deref().unwrap_or("none")
            )],
            (None, Some(keys)) => vec![format!(
                "config keys: {keys} (the component imports no {CONFIG_IMPORT})"
            )],
            (None, None) => vec![],
        }
    }
}

impl wit::Host for ConfigCall {
    fn get(&mut self, key: String) -> Option<String> {
        self.0.get(&key).cloned()
    }
}
