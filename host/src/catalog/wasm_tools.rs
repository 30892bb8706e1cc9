//! Catalog entries for the `tool` components: every plugin is asked for its
//! tools, resources and prompts at once; its tools join the catalog named
//! (prefixed, selected) per `[plugins.NAME]`, each with its limits, its
//! `max_concurrent` gate, its stages and its rate limits, and what else it
//! offers goes to the catalog's resources and prompts.

use std::path::PathBuf;
use std::sync::Arc;

use super::{Backend, Catalog, CatalogTool, Limiter, Offered, RateLimits, naming, tool_limiter};
use hangar_config::Config;
use hangar_runtime::sched::Gate;
use hangar_runtime::{LoadFailure, ToolPlugin};

impl Catalog {
    /// Lists every tool plugin (`tool_plugins`, with the file each came
    /// from) and adds its tools; its resources and prompts go to `offered`.
    /// A plugin that cannot list is a problem; two tools with one name is
    /// an error.
    pub(super) async fn add_wasm_tools(
        &mut self,
        config: &Config,
        tool_plugins: Vec<(PathBuf, ToolPlugin)>,
        offered: &mut Offered,
        problems: &mut Vec<LoadFailure>,
    ) -> anyhow::Result<()> {
        let plugins = self.plugins.clone();
        let cluster = self.cluster.clone();
        let cluster = cluster.as_ref();
        // Every plugin is asked at once: one whose `list-tools` hangs costs
        // start-up its deadline, not the sum of everyone's.
        let listings = futures::future::join_all(tool_plugins.into_iter().map(|(path, plugin)| {
            let limits = config.limits_for(plugin.name(), "");
            async move {
                let defs = plugin.list_tools(&limits).await;
                let offers = plugin.list_offers(&limits).await;
                (path, plugin, limits, defs, offers)
            }
        }))
        .await;
        for (loaded_path, plugin, plugin_limits, defs, offers) in listings {
            let plugin = Arc::new(plugin);
            let plugin_limiter = config
                .plugins
                .get(plugin.name())
                .and_then(|p| p.rate_limit)
                .map(|limit| Limiter::new(limit, format!("plugin {}", plugin.name()), cluster));
            let mut tool_meta = std::collections::HashMap::new();
            match offers {
                Ok(mut listing) => {
                    tool_meta = std::mem::take(&mut listing.tool_meta);
                    let refused = std::mem::take(&mut listing.meta_problems);
                    let mut errors = offered.add_listing(config, &plugins, &plugin, listing);
                    errors.extend(refused);
                    problems.extend(errors.into_iter().map(|error| LoadFailure {
                        path: loaded_path.clone(),
                        error,
                    }));
                }
                Err(e) => problems.push(LoadFailure {
                    path: loaded_path.clone(),
                    error: format!("listing resources and prompts failed: {e}"),
                }),
            }
            let plugin_gate = (plugin_limits.max_concurrent > 0).then(|| {
                Arc::new(Gate::new(
                    plugin_limits.max_concurrent,
                    format!("plugin {}", plugin.name()),
                ))
            });
            let mut defs = match defs {
                Ok(defs) => defs,
                Err(e) => {
                    problems.push(LoadFailure {
                        path: loaded_path.clone(),
                        error: format!("list-tools failed: {e}"),
                    });
                    continue;
                }
            };
            // A tool's `_meta` from the `meta` export, by the guest's name
            // (before any prefix).
            for def in &mut defs {
                if let Some(meta) = tool_meta.remove(&def.name) {
                    def.meta = Some(meta);
                }
            }
            problems.extend(tool_meta.into_keys().map(|name| LoadFailure {
                path: loaded_path.clone(),
                error: format!("tool {name:?}: _meta for a tool the component does not list"),
            }));
            let plugin_config = config.plugins.get(plugin.name());
            // A plain component's functions are named under the plugin's.
            let prefix = plugin_config
                .and_then(|p| p.prefix.clone())
                .or_else(|| plugin.is_typed().then(|| format!("{}.", plugin.name())));
            let selection = plugin_config.and_then(|p| p.tools.as_deref());
            let (named, naming_problems) = naming::name_tools(defs, prefix.as_deref(), selection);
            let export_problems = plugin.export_problems().iter().cloned();
            problems.extend(
                export_problems
                    .chain(naming_problems)
                    .map(|error| LoadFailure {
                        path: loaded_path.clone(),
                        error,
                    }),
            );
            for naming::Named { guest_name, def } in named {
                let def_name = def.name.clone();
                let limits = config.limits_for(plugin.name(), &def.name);
                let gate = match config.tool(&def.name).and_then(|t| t.limits.max_concurrent) {
                    Some(0) => None,
                    Some(max) => Some(Arc::new(Gate::new(max, format!("tool {}", def.name)))),
                    None => plugin_gate.clone(),
                };
                let stages = match plugins.stages_for(config, &def) {
                    Ok(mut stages) => {
                        stages.require(plugin_config.iter().flat_map(|p| &p.requires));
                        stages
                    }
                    Err(error) => {
                        problems.push(LoadFailure {
                            path: loaded_path.clone(),
                            error,
                        });
                        continue;
                    }
                };
                let tool = CatalogTool {
                    def,
                    backend: Backend::Wasm {
                        plugin: plugin.clone(),
                        guest_name,
                        gate,
                    },
                    limits,
                    source: loaded_path.clone(),
                    stages,
                    rate: RateLimits::new([
                        tool_limiter(config, &def_name, cluster),
                        plugin_limiter.clone(),
                        self.server_limiter.clone(),
                    ]),
                };
                self.insert(tool)?;
            }
        }
        Ok(())
    }
}
