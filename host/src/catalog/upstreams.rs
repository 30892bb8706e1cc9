//! Catalog entries for `[upstreams.NAME]`: each upstream is asked for its
//! tools at build time; they join the catalog prefixed, with their schemas
//! and annotations, and get stages (auth, mappers, `visible_to`, the input
//! check) from `[[tools]]` like any other tool. Its resources and templates
//! join the offered ones under the URIs it gives them (an MCP App's tool
//! names its view by that URI), with auth and `visible_to` from
//! `[[resources]]` like any resource; a URI another source offers already
//! stays that source's (components and statements first, then upstreams in
//! name order), and the upstream's is a problem.
//!
//! When an upstream's lists change later (its tools or resources
//! `list_changed`, or the periodic `refresh`), the reloader puts in service
//! a catalog derived from this one ([`Catalog::with_upstream_tools`]): the
//! same plugins, offers and upstreams, each upstream's tools and resources
//! as it lists them now. Sessions hear the `list_changed` of the lists that
//! changed, as after a reload.
//!
//! An upstream that cannot be reached at build time is a problem (`hangar
//! check` fails, `/healthz` is degraded) and brings no tools until it
//! answers (it is asked again every few seconds). An upstream that goes
//! down later keeps its tools listed: calls fail fast with stage `upstream`
//! while its breaker is open, so a client's tool list does not flap with
//! the network.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::stages::Plugins;
use super::{Backend, Catalog, CatalogTool, Offered, Provider, RateLimits, ToolDef, tool_limiter};
use crate::upstream::Upstream;
use hangar_config::Config;
use hangar_core::call::PromptDef;
use hangar_runtime::LoadFailure;

impl Catalog {
    /// Connects to every configured upstream and adds its tools.
    pub(super) async fn add_upstreams(
        &mut self,
        config: &Config,
        tls: &rustls::ClientConfig,
        accounts: &Arc<hangar_core::accounts::Accounts>,
        updates: &hangar_core::call::ResourceChanges,
        problems: &mut Vec<LoadFailure>,
    ) {
        let env = |var: &str| std::env::var(var).ok();
        let mut upstreams = Vec::new();
        for (name, cfg) in &config.upstreams {
            match cfg.resolve(name, &env) {
                Ok(resolved) => {
                    let changes = self.upstream_changes.clone();
                    upstreams.push(Upstream::new(
                        resolved,
                        changes,
                        tls.clone(),
                        accounts,
                        updates.clone(),
                    ))
                }
                Err(error) => problems.push(LoadFailure {
                    path: PathBuf::from(format!("upstreams.{name}")),
                    error,
                }),
            }
        }
        // Failures are kept by each upstream (see `Upstream::listing_error`).
        // A stdio upstream started on first use is listed in the background.
        let at_load = upstreams.iter().filter(|u| u.starts_at_load());
        futures::future::join_all(at_load.map(|u| u.refresh())).await;
        self.upstream_seen
            .store(*self.upstream_changes.borrow(), Ordering::Release);
        let mut offered = self.offered.local();
        for upstream in upstreams {
            upstream.spawn_refresh();
            self.add_upstream_tools(config, &upstream, None, problems);
            offered.add_upstream_offers(config, &self.plugins, &upstream, problems);
            self.upstreams.push(upstream);
        }
        self.offered = Arc::new(offered);
    }

    /// A catalog like this one, with each upstream's tools, resources and
    /// templates as it lists them now, and the problems of its upstreams (listing failures, entries
    /// that could not be made) to report instead of theirs before. Entries
    /// whose definition did not change are kept as they are (their rate
    /// limits' state with them).
    pub fn with_upstream_tools(&self, config: &Config) -> (Catalog, Vec<LoadFailure>) {
        let mut next = Catalog {
            by_name: HashMap::new(),
            order: Vec::new(),
            search: None,
            mode: self.mode,
            default_auth: self.default_auth.clone(),
            offered: self.offered.clone(),
            upstreams: self.upstreams.clone(),
            upstream_changes: self.upstream_changes.clone(),
            // Read before the lists are: a change meanwhile is taken again.
            upstream_seen: (*self.upstream_changes.borrow()).into(),
            pinning: self.pinning,
            plugins: self.plugins.clone(),
            server_limiter: self.server_limiter.clone(),
            cluster: self.cluster.clone(),
            tasks: self.tasks.clone(),
            toolsets: self.toolsets.clone(),
            per_caller: false,
            hides_unconnected: config.server.hide_unconnected,
            requires_any: false,
            accounts: self.accounts.clone(),
            code: self.code.clone(),
        };
        for tool in &self.order {
            if !matches!(
                tool.backend,
                Backend::Upstream { .. } | Backend::UploadUrl(_)
            ) {
                next.insert_shared(tool.clone())
                    .expect("names were unique in the catalog it comes from");
            }
        }
        let mut problems = Vec::new();
        let mut offered = self.offered.local();
        for upstream in &self.upstreams {
            next.add_upstream_tools(config, upstream, Some(self), &mut problems);
            offered.add_upstream_offers(config, &self.plugins, upstream, &mut problems);
        }
        next.offered = Arc::new(offered);
        next.index();
        (next, problems)
    }

    /// Adds `upstream`'s tools as it lists them now; an entry of `previous`
    /// with the same definition is reused.
    fn add_upstream_tools(
        &mut self,
        config: &Config,
        upstream: &Arc<Upstream>,
        previous: Option<&Catalog>,
        problems: &mut Vec<LoadFailure>,
    ) {
        let path = PathBuf::from(format!("upstreams.{}", upstream.name));
        if upstream.awaits_first_use() {
            // Nothing to list (and nothing wrong) until a client lists.
            return;
        }
        if let Some(error) = upstream.listing_error() {
            problems.push(LoadFailure { path, error });
            return;
        }
        for (remote, def) in upstream.tools().iter() {
            let kept = previous
                .and_then(|c| c.by_name.get(&def.name))
                .filter(|t| t.def == *def && t.is_upstream_tool(upstream, remote));
            let entry = match kept {
                Some(tool) => tool.clone(),
                None => match self.upstream_entry(config, upstream, remote, def, &path) {
                    Ok(tool) => Arc::new(tool),
                    Err(error) => {
                        problems.push(LoadFailure {
                            path: path.clone(),
                            error,
                        });
                        continue;
                    }
                },
            };
            // A name another tool has: the first one keeps it.
            if let Err(e) = self.insert_shared(entry) {
                problems.push(LoadFailure {
                    path: path.clone(),
                    error: e.to_string(),
                });
            }
        }
        self.add_adapter_entries(config, upstream, &path, problems);
    }

    /// A new entry for an upstream's tool, with its `[[tools]]` stages.
    fn upstream_entry(
        &self,
        config: &Config,
        upstream: &Arc<Upstream>,
        remote: &str,
        def: &ToolDef,
        path: &std::path::Path,
    ) -> Result<CatalogTool, String> {
        let mut stages = self.plugins.stages_for(config, def)?;
        if let Some(cfg) = config.upstreams.get(&upstream.name) {
            stages.require(&cfg.requires);
            stages.require(cfg.auth.iter().flat_map(|a| &a.credential));
        }
        // An upload_consumer's arguments take handles, handed on as paths.
        if let Some(adapter) = upstream.adapter(remote)
            && adapter.kind == hangar_config::AdapterKind::UploadConsumer
        {
            for argument in &adapter.arguments {
                if !stages.consumes_uploads.contains(argument) {
                    stages.consumes_uploads.push(argument.clone());
                }
            }
        }
        Ok(CatalogTool {
            def: def.clone(),
            backend: Backend::Upstream {
                upstream: upstream.clone(),
                remote: remote.to_string(),
            },
            limits: config.limits_for("", &def.name),
            source: path.to_path_buf(),
            stages,
            rate: RateLimits::new([
                tool_limiter(config, &def.name, self.cluster.as_ref()),
                self.server_limiter.clone(),
            ]),
        })
    }

    /// Counts changes to upstreams' tool lists (by `list_changed` or the
    /// periodic refresh), and the count this catalog's entries were taken
    /// at: while they differ, a catalog derived with
    /// [`Catalog::with_upstream_tools`] is due.
    pub fn upstream_changes(&self) -> (u64, tokio::sync::watch::Receiver<u64>) {
        (
            self.upstream_seen.load(Ordering::Acquire),
            self.upstream_changes.subscribe(),
        )
    }

    /// The first use of each upstream started on first use that no listing
    /// has started yet: starts them and waits for their lists (each within
    /// its `timeout`). The upstreams' change count to wait for in the
    /// catalog in service, when there was one to start.
    pub async fn start_first_use(&self) -> Option<u64> {
        let waiting: Vec<_> = (self.upstreams.iter())
            .filter(|u| u.awaits_first_use())
            .collect();
        if waiting.is_empty() {
            return None;
        }
        let started = futures::future::join_all(waiting.iter().map(|u| u.first_use())).await;
        started
            .contains(&true)
            .then(|| *self.upstream_changes.borrow())
    }

    /// For an upstream's tool `name`: the upstream's name and the tool's
    /// name there (before the prefix).
    pub fn upstream_origin(&self, name: &str) -> Option<(String, String)> {
        match &self.by_name.get(name)?.backend {
            Backend::Upstream { upstream, remote } => Some((upstream.name.clone(), remote.clone())),
            _ => None,
        }
    }

    /// The upstreams' change count whose lists this catalog holds.
    pub fn upstream_seen(&self) -> u64 {
        self.upstream_seen.load(Ordering::Acquire)
    }

    /// Notes that the upstreams' lists as of change `seen` are what this
    /// catalog lists already (a refresh that changed nothing it shows).
    pub fn upstream_changes_seen(&self, seen: u64) {
        self.upstream_seen.store(seen, Ordering::Release);
    }

    /// The upstream MCP servers, for `/healthz`.
    pub fn upstreams(&self) -> &[Arc<Upstream>] {
        &self.upstreams
    }
}

impl Offered {
    /// Adds the resources and templates `upstream` lists now, each with its
    /// `[[resources]]` auth, `visible_to` and limits. One whose URI (or URI
    /// template) is offered already, or whose template cannot be parsed,
    /// is a problem and left out.
    fn add_upstream_offers(
        &mut self,
        config: &Config,
        plugins: &Plugins,
        upstream: &Arc<Upstream>,
        problems: &mut Vec<LoadFailure>,
    ) {
        let path = PathBuf::from(format!("upstreams.{}", upstream.name));
        let offers = upstream.offers();
        let errors = self.add_resources_of(
            config,
            plugins,
            &Provider::Upstream(upstream.clone()),
            config.limits,
            offers.resources.iter().cloned(),
            offers.templates.iter().cloned(),
        );
        // Its prompts, named with its prefix like its tools.
        let prompts = offers.prompts.iter().map(|p| PromptDef {
            name: upstream.listed_prompt(&p.name),
            ..p.clone()
        });
        let errors = errors.into_iter().chain(self.add_prompts_of(
            config,
            plugins,
            &Provider::Upstream(upstream.clone()),
            config.limits,
            prompts,
        ));
        for error in errors {
            problems.push(LoadFailure {
                path: path.clone(),
                error,
            });
        }
    }
}

impl CatalogTool {
    /// The definition as its backend gives it now: an upstream's tool may
    /// have changed since the catalog was built (what pinning watches).
    pub fn current_def(&self) -> Cow<'_, ToolDef> {
        match &self.backend {
            Backend::Upstream { upstream, remote } => upstream
                .current_def(remote)
                .map_or(Cow::Borrowed(&self.def), Cow::Owned),
            _ => Cow::Borrowed(&self.def),
        }
    }

    fn is_upstream_tool(&self, upstream: &Arc<Upstream>, name: &str) -> bool {
        matches!(&self.backend, Backend::Upstream { upstream: u, remote } if Arc::ptr_eq(u, upstream) && remote == name)
    }
}
