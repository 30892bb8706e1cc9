//! The per-plugin settings a load starts from: what each capability keeps
//! for each plugin (`wasm::capability`: config values, HTTP grants,
//! credentials…), built from the config. Read again on every build, so a
//! reload picks up changed config.

use std::collections::HashMap;

use hangar_runtime::capability::{Loads, PluginSetup, Problems};
use hangar_runtime::{self, LoadFailure};

/// Every capability's part of each configured plugin, and the problems met
/// (a bad grant, a missing variable); plus the capabilities' load-wide part,
/// from which a plugin the config does not name is configured.
pub(crate) fn plugin_metas(
    config: &hangar_config::Config,
    loads: &Loads,
    mut problems: Problems,
) -> (
    HashMap<String, hangar_runtime::PluginMeta>,
    Vec<LoadFailure>,
) {
    let mut metas = HashMap::new();
    for (name, plugin) in &config.plugins {
        let setup = PluginSetup {
            name,
            config: Some(plugin),
        };
        let meta = hangar_runtime::PluginMeta {
            name: name.as_str().into(),
            reuse: plugin.instances.reuse.then(|| plugin.instances.clone()),
            caps: loads.configure(&setup, &mut problems),
        };
        metas.insert(name.clone(), meta);
    }
    let problems = problems
        .0
        .into_iter()
        .map(|(path, error)| LoadFailure {
            path: path.into(),
            error,
        })
        .collect();
    (metas, problems)
}

/// A plugin the config does not name: nothing granted, no config values.
pub(crate) fn unconfigured(name: &str, loads: &Loads) -> hangar_runtime::PluginMeta {
    let setup = PluginSetup { name, config: None };
    hangar_runtime::PluginMeta {
        name: name.into(),
        reuse: None,
        // Without a table there is nothing that can be wrong.
        caps: loads.configure(&setup, &mut Problems::default()),
    }
}
