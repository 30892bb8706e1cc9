//! The catalog: every tool by name, built once at startup, with what runs it.
//!
//! This file holds the catalog's types and the order it is built in; what
//! each backend adds is its own file's: `wasm_tools` (the components' tools,
//! resources and prompts), `db_tools` and `db_resources` (the SQL
//! statements of `[[tools]]` and `[[resources]]`), `upstreams` (the tools of
//! upstream MCP servers). `db_stats` counts what the statements serve.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

mod adapters;
pub mod apps;
pub mod code;
mod db_resources;
mod db_stats;
mod db_tools;
mod glob;
mod invalidate;
mod naming;
mod offers;
mod output;
mod rate;
pub mod search;
mod stages;
mod toolsets;
pub mod upload_url;
mod upstreams;
mod uri_template;
mod validate;
mod wasm_tools;

pub use glob::glob_match;
pub use offers::{
    CatalogPrompt, CatalogResource, CatalogTemplate, Offered, Provider, ResolvedResource,
};
pub use output::{Mismatch, OutputCheck};
pub use rate::{Limiter, RateLimits};
pub use stages::{AuthStage, MapperStage, Stages, Unconnected, claims_match};
pub use toolsets::{Scope, Toolsets};
pub use uri_template::UriTemplate;
pub use validate::ArgsValidator;

use crate::db::{Connectors, DbTool};
use hangar_config::{CatalogMode, Config, Limits};
use hangar_core::call::{CallError, Principal};
use hangar_runtime::sched::Gate;
use hangar_runtime::{Discovery, LoadFailure, ToolPlugin};
use stages::Plugins;

pub use hangar_core::call::{Annotations, ToolDef};
/// What built a plugin's component, as its catalog entries say it.
pub use hangar_runtime::Toolchain;

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
    /// An upstream's `NAME_get_upload_url` helper (`adapters`).
    UploadUrl(Arc<upload_url::UploadUrl>),
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
    pinning: hangar_config::Pinning,
    /// The auth and mapper plugins, and the server's rate limiter: what the
    /// entries of tools an upstream adds later are wired with.
    plugins: Arc<Plugins>,
    server_limiter: Option<Arc<Limiter>>,
    /// The replicas' shared Redis (`[cluster]`): rate limits count there.
    cluster: Option<Arc<hangar_core::cluster::Cluster>>,
    /// The tools that run as tasks (`[[tools]] task`), by name.
    tasks: Arc<HashMap<String, hangar_config::TaskSupport>>,
    /// `[toolsets]`: what each toolset's endpoints reach.
    toolsets: Arc<Toolsets>,
    /// [`Catalog::per_caller`], worked out when the catalog is indexed.
    per_caller: bool,
    /// `[server] hide_unconnected`, when some tool `requires` a provider.
    hides_unconnected: bool,
    /// Some tool `requires` a provider.
    requires_any: bool,
    /// Users' connections: what `hide_unconnected` asks whether a provider
    /// resolves for a caller.
    accounts: Option<Arc<hangar_core::accounts::Accounts>>,
    /// Code mode (`run`), when the catalog offers it.
    code: Option<Arc<code::CodeMode>>,
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
    /// `accounts` resolves the callers' credentials of upstreams with
    /// `auth = { credential = … }`.
    pub async fn build(
        config: &Config,
        discovery: Discovery,
        upstream_tls: &rustls::ClientConfig,
        cluster: Option<Arc<hangar_core::cluster::Cluster>>,
        accounts: &Arc<hangar_core::accounts::Accounts>,
        updates: &hangar_core::call::ResourceChanges,
    ) -> anyhow::Result<Built> {
        let loaded_names: HashSet<String> =
            discovery.loaded.iter().map(|l| l.name.clone()).collect();
        let mut problems = discovery.failures;
        let sandboxes = discovery.sandboxes;
        let (plugins, tool_plugins) = Plugins::sort(discovery.loaded);
        let mut catalog = Catalog {
            server_limiter: config
                .server
                .rate_limit
                .map(|limit| Limiter::new(limit, "the server".to_string(), cluster.as_ref())),
            cluster,
            plugins: Arc::new(plugins),
            tasks: Arc::new(
                (config.tools.iter())
                    .filter_map(|t| Some((t.name.clone(), t.task?)))
                    .collect(),
            ),
            ..Catalog::default()
        };
        catalog.code = code::CodeMode::new(config, sandboxes, &mut problems);
        let mut offered = Offered::default();
        catalog
            .add_wasm_tools(config, tool_plugins, &mut offered, &mut problems)
            .await?;
        let env = |var: &str| std::env::var(var).ok();
        let connectors = Connectors::open(config, &env)?.shared_by(catalog.cluster.clone());
        for (connector, error) in connectors.problems() {
            problems.push(LoadFailure {
                path: PathBuf::from(format!("connectors.{connector}")),
                error,
            });
        }
        catalog.add_db_tools(config, &connectors, &env, &mut problems)?;
        offered.add_db_resources(config, &catalog.plugins, &connectors, &env, &mut problems)?;
        catalog.offered = Arc::new(offered);
        catalog
            .add_upstreams(config, upstream_tls, accounts, updates, &mut problems)
            .await;
        catalog.pinning = config.server.pinning;
        problems.extend(catalog.config_problems(config, &loaded_names));
        catalog.default_auth = catalog
            .plugins
            .default_auth(config)
            .map_err(|e| anyhow::anyhow!(e))?;
        let plugins = &catalog.plugins;
        let toolsets = Toolsets::new(&config.toolsets, |what, a| plugins.auth_of(config, what, a));
        catalog.toolsets = Arc::new(toolsets.map_err(|e| anyhow::anyhow!(e))?);
        catalog.mode = config.server.catalog;
        catalog.hides_unconnected = config.server.hide_unconnected;
        catalog.accounts = Some(accounts.clone());
        catalog.index();
        Ok(Built { catalog, problems })
    }

    /// Builds the search index over the tools as they are now.
    /// What listings and lookups need worked out once: the search index,
    /// and whether answers depend on the caller.
    fn index(&mut self) {
        self.requires_any = self.order.iter().any(|t| !t.stages.requires.is_empty());
        self.hides_unconnected &= self.requires_any;
        self.per_caller = self.hides_unconnected
            || self.default_auth.is_some()
            || self.has_restricted()
            || (self.order.iter()).any(|t| hangar_core::call::apps::app_only(t.def.meta.as_ref()))
            || self.order.iter().any(|t| t.stages.auth.is_some())
            || self.offered.has_auth();
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
    pub fn task_support(&self, name: &str) -> Option<hangar_config::TaskSupport> {
        self.tasks.get(name).copied()
    }

    pub fn resolve(&self, name: &str) -> Result<Arc<CatalogTool>, CallError> {
        self.by_name
            .get(name)
            .cloned()
            .ok_or_else(|| CallError::not_found(name))
    }

    pub fn pinning(&self) -> hangar_config::Pinning {
        self.pinning
    }

    pub fn mode(&self) -> CatalogMode {
        self.mode
    }

    /// What a request through `toolset` lists: its own `catalog`, else
    /// the server's.
    pub fn mode_for(&self, toolset: Option<&hangar_core::call::Toolset>) -> CatalogMode {
        self.scope(toolset).mode().unwrap_or(self.mode)
    }

    /// Code mode (`run`), when this catalog offers it.
    pub fn code(&self) -> Option<&Arc<code::CodeMode>> {
        self.code.as_ref()
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
    /// `visible_to` (what is listed, and to whom, then follows the caller),
    /// or a tool only MCP Apps views see (listed only to clients that
    /// render apps). Worked out when the catalog is indexed: the 2026-07-28
    /// front asks it on every request.
    pub fn per_caller(&self) -> bool {
        self.per_caller
    }

    /// Whether a caller's listings leave out the tools of providers that
    /// resolve to nothing for them (`[server] hide_unconnected`, and some
    /// tool `requires` one).
    pub fn hides_unconnected(&self) -> bool {
        self.hides_unconnected
    }

    /// Whether some tool `requires` a provider (so what a listing says of a
    /// tool, `read_tool`'s `connected`, depends on the caller).
    pub fn requires_any(&self) -> bool {
        self.requires_any
    }

    /// Users' connections (none in a catalog built without them).
    pub fn accounts(&self) -> Option<&Arc<hangar_core::accounts::Accounts>> {
        self.accounts.as_ref()
    }

    /// The providers some tool requires, each once.
    pub fn required_providers(&self) -> std::collections::BTreeSet<&str> {
        (self.order.iter())
            .flat_map(|t| t.stages.requires.iter().map(String::as_str))
            .collect()
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

    /// Tools matching `query`, best first, that `principal` may see
    /// through `toolset`.
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        principal: Option<&Principal>,
        toolset: Option<&hangar_core::call::Toolset>,
        hidden: &Unconnected,
    ) -> Vec<(Arc<CatalogTool>, f32)> {
        let scope = self.scope(toolset);
        let Some(index) = &self.search else {
            return Vec::new();
        };
        if !scope.admits(principal) {
            return Vec::new();
        }
        index
            .search(query)
            .into_iter()
            .filter_map(|(i, score)| self.order.get(i).map(|t| (t.clone(), score)))
            .filter(|(t, _)| {
                t.stages.visible(principal) && scope.tool(&t.def.name) && !hidden.hides(&t.stages)
            })
            .take(limit)
            .collect()
    }

    /// Every tool, in listing order.
    pub fn tools(&self) -> &[Arc<CatalogTool>] {
        &self.order
    }

    /// The toolsets (`[toolsets]`).
    pub fn toolsets(&self) -> &Toolsets {
        &self.toolsets
    }

    /// What a request through `toolset` reaches (`None`: everything).
    pub fn scope(&self, toolset: Option<&hangar_core::call::Toolset>) -> Scope<'_> {
        self.toolsets.scope(toolset)
    }

    /// The tools a caller with `principal` sees through the toolset `name`.
    pub fn toolset_tools(&self, name: &str, principal: Option<&Principal>) -> usize {
        let toolset = hangar_core::call::Toolset::new(name);
        let scope = self.scope(Some(&toolset));
        if !scope.admits(principal) {
            return 0;
        }
        (self.visible(principal))
            .filter(|t| scope.tool(&t.def.name))
            .count()
    }

    /// The toolsets' globs that match nothing in the catalog as it is now.
    pub fn toolset_warnings(&self) -> Vec<String> {
        let tools: Vec<&str> = self.order.iter().map(|t| t.def.name.as_str()).collect();
        let offered = &self.offered;
        let resources: Vec<&str> = (offered.resources.iter().map(|r| r.def.uri.as_str()))
            .chain(
                offered
                    .templates
                    .iter()
                    .map(|t| t.def.uri_template.as_str()),
            )
            .collect();
        let prompts: Vec<&str> = offered
            .prompts
            .iter()
            .map(|p| p.def.name.as_str())
            .collect();
        self.toolsets.unmatched(&tools, &resources, &prompts)
    }
}

/// The `[[tools]]` rate limit of tool `name`, if it has one.
fn tool_limiter(
    config: &Config,
    name: &str,
    cluster: Option<&Arc<hangar_core::cluster::Cluster>>,
) -> Option<Arc<Limiter>> {
    let limit = config.tool(name).and_then(|t| t.rate_limit)?;
    Some(Limiter::new(limit, format!("tool {name}"), cluster))
}
