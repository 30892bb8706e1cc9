//! The catalog: every tool by name, built once at startup, with what runs it.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

mod glob;
mod invalidate;
mod naming;
mod offered;
mod rate;
pub mod search;
mod stages;
mod upstreams;
mod uri_template;
mod validate;

pub use glob::glob_match;
pub use offered::{
    CatalogPrompt, CatalogResource, CatalogTemplate, Offered, Provider, ResolvedResource,
};
pub use rate::{Limiter, RateLimits};
pub use stages::{AuthStage, MapperStage, Stages, claims_match};
pub use uri_template::UriTemplate;
pub use validate::ArgsValidator;

use crate::call::{CallError, Principal};
use crate::config::{CatalogMode, Config, Limits, ToolConfig};
use crate::db::{Connectors, DbTool};
use crate::wasm::sched::Gate;
use crate::wasm::{Discovery, LoadFailure, ToolPlugin};
use stages::Plugins;

pub use crate::call::{Annotations, ToolDef};

/// What executes a tool.
pub enum Backend {
    /// A `tool` component; `guest_name` is the tool's name inside it (the
    /// catalog name may carry the plugin's prefix).
    Wasm {
        plugin: Arc<ToolPlugin>,
        guest_name: String,
        /// The `max_concurrent` cap this tool's calls count against: its
        /// own, or its plugin's (shared by the plugin's tools), if any.
        gate: Option<Arc<Gate>>,
    },
    Sql(Arc<DbTool>),
    /// A tool of an upstream MCP server; `remote` is its name there.
    Upstream {
        upstream: Arc<crate::upstream::Upstream>,
        remote: String,
    },
}

/// One entry of the catalog.
pub struct CatalogTool {
    pub def: ToolDef,
    pub backend: Backend,
    pub limits: Limits,
    /// The file the tool came from, for messages.
    pub source: PathBuf,
    /// Auth, mappers and the compiled input schema.
    pub stages: Stages,
    /// The rate limits its calls count against.
    pub rate: RateLimits,
}

/// Tools by name, in a stable listing order, with their search index.
#[derive(Default)]
pub struct Catalog {
    by_name: HashMap<String, Arc<CatalogTool>>,
    order: Vec<Arc<CatalogTool>>,
    search: Option<search::ToolSearch>,
    mode: CatalogMode,
    /// The server-wide auth check: who is asking, for per-principal listings.
    default_auth: Option<AuthStage>,
    /// Resources, templates and prompts (shared with the catalogs an
    /// upstream refresh derives from this one).
    offered: Arc<Offered>,
    /// Upstream MCP servers whose tools are in the catalog.
    upstreams: Vec<Arc<crate::upstream::Upstream>>,
    /// Bumped when an upstream's tool list changes.
    upstream_changes: Arc<crate::upstream::ToolChanges>,
    /// The value of `upstream_changes` the upstream entries were taken at.
    upstream_seen: std::sync::atomic::AtomicU64,
    /// What happens when a tool's definition changes under a live session.
    pinning: crate::config::Pinning,
    /// The auth and mapper plugins, and the server's rate limiter: what the
    /// entries of tools an upstream adds later are wired with.
    plugins: Arc<Plugins>,
    server_limiter: Option<Arc<Limiter>>,
    /// The replicas' shared Redis (`[cluster]`): rate limits count there.
    cluster: Option<Arc<crate::cluster::Cluster>>,
    /// The tools that run as tasks (`[[tools]] task`), by name.
    tasks: Arc<HashMap<String, crate::config::TaskSupport>>,
}

/// A catalog and the problems met while building it.
pub struct Built {
    pub catalog: Catalog,
    /// Plugins that did not load or could not list their tools, and config
    /// entries naming what is not there. The server runs degraded with these.
    pub problems: Vec<LoadFailure>,
}

impl Catalog {
    /// Asks every tool plugin and upstream for its tools. Two tools with one
    /// name is an error naming both files (an upstream's tool that takes a
    /// name already in use is a problem); other problems are returned for
    /// reporting. Upstreams are reached over `upstream_tls` for `https://`.
    pub async fn build(
        config: &Config,
        discovery: Discovery,
        upstream_tls: &rustls::ClientConfig,
        cluster: Option<Arc<crate::cluster::Cluster>>,
    ) -> anyhow::Result<Built> {
        let mut catalog = Catalog {
            cluster: cluster.clone(),
            tasks: Arc::new(
                (config.tools.iter())
                    .filter_map(|t| Some((t.name.clone(), t.task?)))
                    .collect(),
            ),
            ..Catalog::default()
        };
        let cluster = cluster.as_ref();
        let mut offered = Offered::default();
        let loaded_names: HashSet<String> =
            discovery.loaded.iter().map(|l| l.name.clone()).collect();
        let mut problems = discovery.failures;
        let (plugins, tool_plugins) = Plugins::sort(discovery.loaded);
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
        let server_limiter = config
            .server
            .rate_limit
            .map(|limit| Limiter::new(limit, "the server".to_string(), cluster));
        for (loaded_path, plugin, plugin_limits, defs, offers) in listings {
            let plugin = Arc::new(plugin);
            let plugin_limiter = config
                .plugins
                .get(plugin.name())
                .and_then(|p| p.rate_limit)
                .map(|limit| Limiter::new(limit, format!("plugin {}", plugin.name()), cluster));
            match offers {
                Ok(listing) => {
                    let errors = offered.add_listing(config, &plugins, &plugin, listing);
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
            let defs = match defs {
                Ok(defs) => defs,
                Err(e) => {
                    problems.push(LoadFailure {
                        path: loaded_path.clone(),
                        error: format!("list-tools failed: {e}"),
                    });
                    continue;
                }
            };
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
                let stages = match plugins.stages_for(config, &def.name, &def.input_schema) {
                    Ok(stages) => stages,
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
                        server_limiter.clone(),
                    ]),
                };
                catalog.insert(tool)?;
            }
        }
        let env = |var: &str| std::env::var(var).ok();
        let connectors = Connectors::open(config, &env)?.shared_by(cluster.cloned());
        for (connector, error) in connectors.problems() {
            problems.push(LoadFailure {
                path: PathBuf::from(format!("connectors.{connector}")),
                error,
            });
        }
        for cfg in config.tools.iter().filter(|t| t.db.statement.is_some()) {
            let db = DbTool::new(cfg, &connectors, &env)?;
            if let Some(error) = db.problem() {
                problems.push(LoadFailure {
                    path: PathBuf::from(format!("tools.{}", cfg.name)),
                    error,
                });
            }
            let tool = db_tool(cfg, db, config.limits);
            let stages = plugins
                .stages_for(config, &cfg.name, &tool.def.input_schema)
                .map_err(|e| anyhow::anyhow!(e))?;
            let rate = RateLimits::new([
                tool_limiter(config, &cfg.name, cluster),
                server_limiter.clone(),
            ]);
            catalog.insert(CatalogTool {
                stages,
                rate,
                ..tool
            })?;
        }
        for cfg in config.resources.iter().filter(|r| r.db.statement.is_some()) {
            let problem = offered.add_db_resource(config, &plugins, cfg, &connectors, &env)?;
            problems.extend(problem.map(|error| LoadFailure {
                path: PathBuf::from(format!("resources.{}", cfg.key())),
                error,
            }));
        }
        catalog.offered = Arc::new(offered);
        catalog.plugins = Arc::new(plugins);
        catalog.server_limiter = server_limiter;
        catalog
            .add_upstreams(config, upstream_tls, &mut problems)
            .await;
        catalog.pinning = config.server.pinning;
        problems.extend(catalog.config_problems(config, &loaded_names));
        catalog.default_auth = catalog
            .plugins
            .default_auth(config)
            .map_err(|e| anyhow::anyhow!(e))?;
        catalog.mode = config.server.catalog;
        catalog.index();
        Ok(Built { catalog, problems })
    }

    /// Builds the search index over the tools as they are now.
    fn index(&mut self) {
        self.search = Some(search::ToolSearch::new(self.order.iter().map(|t| {
            (
                t.def.name.as_str(),
                t.def.title.as_deref(),
                t.def.description.as_str(),
            )
        })));
    }

    fn insert(&mut self, tool: CatalogTool) -> anyhow::Result<()> {
        self.insert_shared(Arc::new(tool))
    }

    /// Adds an entry (perhaps one an earlier catalog holds too).
    fn insert_shared(&mut self, tool: Arc<CatalogTool>) -> anyhow::Result<()> {
        if let Some(existing) = self.by_name.get(&tool.def.name) {
            anyhow::bail!(
                "tool {:?} is defined twice: in {} and in {}",
                tool.def.name,
                existing.source.display(),
                tool.source.display()
            );
        }
        self.by_name.insert(tool.def.name.clone(), tool.clone());
        self.order.push(tool);
        Ok(())
    }

    /// Config entries that name plugins or tools that are not there.
    fn config_problems(&self, config: &Config, loaded: &HashSet<String>) -> Vec<LoadFailure> {
        let plugins_dir = &config.server.plugins;
        let missing_plugins = config
            .plugins
            .keys()
            .filter(|name| !loaded.contains(name.as_str()))
            .map(|name| LoadFailure {
                path: plugins_dir.join(format!("{name}.wasm")),
                error: format!("plugin {name:?} is configured but did not load"),
            });
        let missing_tools = config
            .tools
            .iter()
            .filter(|t| t.db.statement.is_none() && !self.by_name.contains_key(&t.name))
            .map(|t| LoadFailure {
                path: PathBuf::from("hangar.toml"),
                error: format!("tool {:?} is configured but no plugin offers it", t.name),
            });
        // Entries with a statement were checked when their resource was built.
        let bad_resources = config
            .resources
            .iter()
            .filter(|r| r.db.statement.is_none())
            .filter_map(|r| {
                let error = r.check().err()?;
                Some(LoadFailure {
                    path: PathBuf::from("hangar.toml"),
                    error: format!("resource {:?}: {error}", r.key()),
                })
            });
        missing_plugins
            .chain(missing_tools)
            .chain(bad_resources)
            .collect()
    }

    /// Resources, templates and prompts.
    pub fn offered(&self) -> &Offered {
        &self.offered
    }

    /// The tool called `name`, or the resolution error.
    /// Whether calls of the tool `name` become tasks (`[[tools]] task`).
    pub fn task_support(&self, name: &str) -> Option<crate::config::TaskSupport> {
        self.tasks.get(name).copied()
    }

    pub fn resolve(&self, name: &str) -> Result<Arc<CatalogTool>, CallError> {
        self.by_name
            .get(name)
            .cloned()
            .ok_or_else(|| CallError::not_found(name))
    }

    /// Result-cache counters of the DB tools and resources that cache and
    /// that a caller with `principal` may see, by tool name or resource URI
    /// (template).
    pub fn cache_stats<'a>(
        &'a self,
        principal: Option<&'a Principal>,
    ) -> Vec<(&'a str, crate::db::CacheStats)> {
        let tools = self.visible(principal).filter_map(|t| match &t.backend {
            Backend::Sql(db) => db.cache_stats().map(|s| (t.def.name.as_str(), s)),
            Backend::Wasm { .. } | Backend::Upstream { .. } => None,
        });
        let sql = |p: &Provider| match p {
            Provider::Sql(db) => db.cache_stats(),
            Provider::Wasm(_) => None,
        };
        let offered = &self.offered;
        let resources = offered
            .resources
            .iter()
            .filter(|r| r.access.visible(principal))
            .filter_map(|r| Some((r.def.uri.as_str(), sql(&r.provider)?)));
        let templates = offered
            .templates
            .iter()
            .filter(|t| t.access.visible(principal))
            .filter_map(|t| Some((t.def.uri_template.as_str(), sql(&t.provider)?)));
        tools.chain(resources).chain(templates).collect()
    }

    /// Result-cache counters and DB pool use over every statement the
    /// catalog serves, whoever may see it (for `/metrics`, which names none).
    pub fn db_live(&self, live: &mut crate::metrics::Live) {
        let tools = self.order.iter().filter_map(|t| match &t.backend {
            Backend::Sql(db) => Some(db),
            Backend::Wasm { .. } | Backend::Upstream { .. } => None,
        });
        let sql = |p: &Provider| match p {
            Provider::Sql(db) => Some(db.clone()),
            Provider::Wasm(_) => None,
        };
        let offered = &self.offered;
        let statements: Vec<_> = tools
            .cloned()
            .chain(offered.resources.iter().filter_map(|r| sql(&r.provider)))
            .chain(offered.templates.iter().filter_map(|t| sql(&t.provider)))
            .collect();
        let mut connectors: Vec<&Arc<crate::db::Connector>> = Vec::new();
        for db in &statements {
            if let Some(stats) = db.cache_stats() {
                live.cache_hits += stats.hits;
                live.cache_misses += stats.misses;
            }
            if let Some(c) = db.connector()
                && !connectors.iter().any(|seen| Arc::ptr_eq(seen, c))
            {
                connectors.push(c);
            }
        }
        for c in connectors {
            let (in_use, waiting) = c.pool_use();
            live.db_in_use += in_use;
            live.db_waiting += waiting;
        }
    }

    pub fn pinning(&self) -> crate::config::Pinning {
        self.pinning
    }

    pub fn mode(&self) -> CatalogMode {
        self.mode
    }

    pub fn default_auth(&self) -> Option<&AuthStage> {
        self.default_auth.as_ref()
    }

    /// Whether any tool leaves artifacts (then `resources/*` is offered).
    pub fn produces_artifacts(&self) -> bool {
        self.order.iter().any(|t| t.stages.produces_artifacts)
    }

    /// Whether any tool is shown only to some callers.
    pub fn has_restricted(&self) -> bool {
        self.order.iter().any(|t| t.stages.visible_to.is_some()) || self.offered.has_restricted()
    }

    /// Whether an answer may depend on who asks: a server-wide auth check,
    /// or any tool, resource, template or prompt with an auth stage or
    /// `visible_to` (what is listed, and to whom, then follows the caller).
    pub fn per_caller(&self) -> bool {
        self.default_auth.is_some()
            || self.has_restricted()
            || self.order.iter().any(|t| t.stages.auth.is_some())
            || self.offered.has_auth()
    }

    /// The tools a caller with `principal` may see, in listing order.
    pub fn visible<'a>(
        &'a self,
        principal: Option<&'a Principal>,
    ) -> impl Iterator<Item = &'a Arc<CatalogTool>> {
        self.order
            .iter()
            .filter(move |t| t.stages.visible(principal))
    }

    /// Tools matching `query`, best first, that `principal` may see.
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        principal: Option<&Principal>,
    ) -> Vec<(Arc<CatalogTool>, f32)> {
        let Some(index) = &self.search else {
            return Vec::new();
        };
        index
            .search(query)
            .into_iter()
            .filter_map(|(i, score)| self.order.get(i).map(|t| (t.clone(), score)))
            .filter(|(t, _)| t.stages.visible(principal))
            .take(limit)
            .collect()
    }

    /// Every tool, in listing order.
    pub fn tools(&self) -> &[Arc<CatalogTool>] {
        &self.order
    }
}

/// The `[[tools]]` rate limit of tool `name`, if it has one.
fn tool_limiter(
    config: &Config,
    name: &str,
    cluster: Option<&Arc<crate::cluster::Cluster>>,
) -> Option<Arc<Limiter>> {
    let limit = config.tool(name).and_then(|t| t.rate_limit)?;
    Some(Limiter::new(limit, format!("tool {name}"), cluster))
}

/// The catalog entry of a DB tool: its schema comes from its declared inputs.
fn db_tool(cfg: &ToolConfig, db: DbTool, limits: Limits) -> CatalogTool {
    let stages = Stages::default();
    let annotations = if cfg.db.read_only {
        Annotations {
            read_only_hint: Some(true),
            ..Annotations::default()
        }
    } else {
        Annotations {
            read_only_hint: Some(false),
            destructive_hint: Some(true),
            ..Annotations::default()
        }
    };
    CatalogTool {
        def: ToolDef {
            name: cfg.name.clone(),
            title: cfg.title.clone(),
            description: cfg
                .description
                .clone()
                .unwrap_or_else(|| format!("Runs the SQL statement of {}", cfg.name)),
            input_schema: db.input_schema(),
            output_schema: Some(DbTool::output_schema()),
            annotations: Some(annotations),
        },
        backend: Backend::Sql(Arc::new(db)),
        limits,
        source: PathBuf::from("hangar.toml"),
        stages,
        rate: RateLimits::default(),
    }
}
