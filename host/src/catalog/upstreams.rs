//! Catalog entries for `[upstreams.NAME]`: each upstream is asked for its
//! tools at build time; they join the catalog prefixed, with their schemas
//! and annotations, and get stages (auth, mappers, `visible_to`, the input
//! check) from `[[tools]]` like any other tool.
//!
//! An upstream that cannot be reached at build time is a problem (`hangar
//! check` fails, `/healthz` is degraded) and brings no tools until the
//! catalog is built again. An upstream that goes down later keeps its
//! tools listed: calls fail fast with stage `upstream` while its breaker
//! is open, so a client's tool list does not flap with the network.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;

use super::stages::Plugins;
use super::{Backend, Catalog, CatalogTool, Limiter, RateLimits, ToolDef, tool_limiter};
use crate::config::Config;
use crate::upstream::Upstream;
use crate::wasm::LoadFailure;

impl Catalog {
    /// Connects to every configured upstream and adds its tools.
    pub(super) async fn add_upstreams(
        &mut self,
        config: &Config,
        plugins: &Plugins,
        server_limiter: &Option<Arc<Limiter>>,
        problems: &mut Vec<LoadFailure>,
    ) -> anyhow::Result<()> {
        let env = |var: &str| std::env::var(var).ok();
        let mut upstreams = Vec::new();
        for (name, cfg) in &config.upstreams {
            let path = PathBuf::from(format!("upstreams.{name}"));
            match cfg.resolve(name, &env) {
                Ok(resolved) => {
                    let changes = self.upstream_changes.clone();
                    upstreams.push((path, Upstream::new(resolved, changes)))
                }
                Err(error) => problems.push(LoadFailure { path, error }),
            }
        }
        let listed = futures::future::join_all(upstreams.iter().map(|(_, u)| u.refresh())).await;
        for ((path, upstream), listed) in upstreams.into_iter().zip(listed) {
            upstream.spawn_refresh();
            self.upstreams.push(upstream.clone());
            if let Err(error) = listed {
                problems.push(LoadFailure { path, error });
                continue;
            }
            for (remote, def) in upstream.tools().iter() {
                let stages = match plugins.stages_for(config, &def.name, &def.input_schema) {
                    Ok(stages) => stages,
                    Err(error) => {
                        problems.push(LoadFailure {
                            path: path.clone(),
                            error,
                        });
                        continue;
                    }
                };
                self.insert(CatalogTool {
                    def: def.clone(),
                    backend: Backend::Upstream {
                        upstream: upstream.clone(),
                        remote: remote.clone(),
                    },
                    limits: config.limits_for("", &def.name),
                    source: path.clone(),
                    stages,
                    rate: RateLimits::new([
                        tool_limiter(config, &def.name),
                        server_limiter.clone(),
                    ]),
                })?;
            }
        }
        Ok(())
    }

    /// Counts changes to upstreams' tool lists (by `list_changed` or the
    /// periodic refresh) while this catalog serves; a surface can watch it
    /// to tell clients `notifications/tools/list_changed`.
    pub fn upstream_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.upstream_changes.subscribe()
    }

    /// The upstream MCP servers, for `/healthz`.
    pub fn upstreams(&self) -> &[Arc<Upstream>] {
        &self.upstreams
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
}
