//! What `/healthz` answers: the server's status for everyone, and the
//! detail (tool count, problems, reloads, result-cache counters) built for the
//! caller the way `GET /tools` is, so nothing shown only to some callers is
//! named or counted for anyone else.

mod reloads;

use std::collections::BTreeMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use serde_json::{Map, Value, json};

use crate::catalog::claims_match;
use crate::pipeline::Live;
use hangar_config::Config;
use hangar_core::call::Principal;
use hangar_runtime::LoadFailure;
pub use reloads::{Attempt, Hook, Outcome, ReloadReport, ReloadStatus, Trigger};

/// A `visible_to` table.
type Rules = BTreeMap<String, Vec<String>>;

pub struct Health {
    pipeline: Live,
    /// The problems and restrictions of the catalog in service; a reload
    /// swaps them with the catalog.
    facts: Arc<ArcSwap<Facts>>,
    reload: Arc<ReloadStatus>,
}

/// What the catalog in service was judged by when it was built.
pub struct Facts {
    problems: Vec<LoadFailure>,
    /// The names of the tools, resources and prompts configured with
    /// `visible_to`, with their rules: a problem naming one is shown only to
    /// callers who may see it (whether or not the entry loaded).
    restricted: Vec<(String, Rules)>,
    /// The plugins pulled from registries: source, digest, signature.
    sources: Vec<crate::registry::Resolved>,
}

impl Facts {
    pub fn new(problems: Vec<LoadFailure>, config: &Config) -> Facts {
        let mut restricted = Vec::new();
        let mut add = |name: &str, rules: &Option<Rules>| {
            if let Some(rules) = rules
                && !name.is_empty()
            {
                restricted.push((name.to_string(), rules.clone()));
            }
        };
        for t in &config.tools {
            add(&t.name, &t.visible_to);
        }
        for r in &config.resources {
            add(r.key(), &r.visible_to);
            add(r.name.as_deref().unwrap_or_default(), &r.visible_to);
        }
        for p in &config.prompts {
            add(&p.name, &p.visible_to);
        }
        Facts {
            problems,
            restricted,
            sources: Vec::new(),
        }
    }

    /// With the plugins pulled from registries, for `/healthz` `plugins`.
    pub fn with_sources(mut self, sources: Vec<crate::registry::Resolved>) -> Facts {
        self.sources = sources;
        self
    }

    pub fn problems(&self) -> &[LoadFailure] {
        &self.problems
    }

    pub fn sources(&self) -> &[crate::registry::Resolved] {
        &self.sources
    }
}

impl Health {
    pub fn new(pipeline: Live, problems: Vec<LoadFailure>, config: &Config) -> Health {
        let facts = Arc::new(ArcSwap::from_pointee(Facts::new(problems, config)));
        Health::live(pipeline, facts, Arc::default())
    }

    /// A health report over facts and a reload status a reloader updates.
    pub fn live(pipeline: Live, facts: Arc<ArcSwap<Facts>>, reload: Arc<ReloadStatus>) -> Health {
        Health {
            pipeline,
            facts,
            reload,
        }
    }

    pub fn pipeline(&self) -> &Live {
        &self.pipeline
    }

    /// `{"status", "tools", "problems", "reload", "result_cache"?}` for a
    /// caller with `principal`. `status` is the whole server's: `degraded`
    /// when anything failed to load, even what this caller may not see.
    /// `reload` counts reloads and tells how the last attempt ended (a
    /// failed one left the catalog in service, and says why).
    pub fn report(&self, principal: Option<&Principal>) -> Value {
        let facts = self.facts.load();
        let pipeline = self.pipeline.current();
        let catalog = pipeline.catalog();
        let upstreams = upstream_states(catalog);
        let open = upstreams.values().any(|u| u["breaker"] == "open");
        let status = if facts.problems.is_empty() && !open {
            "ok"
        } else {
            "degraded"
        };
        let hidden: Vec<&str> = facts
            .restricted
            .iter()
            .filter(|(_, rules)| !claims_match(rules, principal))
            .map(|(name, _)| name.as_str())
            .collect();
        let problems: Vec<&LoadFailure> = facts
            .problems
            .iter()
            .filter(|p| !names_any(p, &hidden))
            .collect();
        let caches: Map<String, Value> = catalog
            .cache_stats(principal)
            .into_iter()
            .map(|(name, stats)| (name.to_string(), json!(stats)))
            .collect();
        let mut body = json!({
            "status": status,
            "tools": catalog.visible(principal).count(),
            "problems": problems,
            "reload": self.reload_report(&hidden),
        });
        if !caches.is_empty() {
            body["result_cache"] = Value::Object(caches);
        }
        if !upstreams.is_empty() {
            body["upstreams"] = Value::Object(upstreams);
        }
        let toolsets = toolset_states(catalog, principal);
        if !toolsets.is_empty() {
            body["toolsets"] = Value::Object(toolsets);
        }
        let plugins = source_states(&facts.sources, catalog, principal);
        if !plugins.is_empty() {
            body["plugins"] = Value::Object(plugins);
        }
        body
    }
}

/// Each toolset: the tools this caller sees through it, and its globs that
/// match nothing in the catalog.
fn toolset_states(
    catalog: &crate::catalog::Catalog,
    principal: Option<&Principal>,
) -> Map<String, Value> {
    let warnings = catalog.toolset_warnings();
    catalog
        .toolsets()
        .names()
        .map(|name| {
            let prefix = format!("[toolsets.{name}] ");
            let own: Vec<&String> = warnings.iter().filter(|w| w.starts_with(&prefix)).collect();
            let state = json!({
                "tools": catalog.toolset_tools(name, principal),
                "path": format!("/mcp/{name}"),
                "warnings": own,
            });
            (name.to_string(), state)
        })
        .collect()
}

/// Each plugin pulled from a registry: its source, the digest it resolved
/// to, where the bytes came from and its signature status. A plugin with a
/// tool this caller may not see is left out, name and all.
fn source_states(
    sources: &[crate::registry::Resolved],
    catalog: &crate::catalog::Catalog,
    principal: Option<&Principal>,
) -> Map<String, Value> {
    use crate::catalog::Backend;
    let hidden = |name: &str| {
        catalog.tools().iter().any(|t| {
            matches!(&t.backend, Backend::Wasm { plugin, .. } if plugin.name() == name)
                && !t.stages.visible(principal)
        })
    };
    sources
        .iter()
        .filter(|s| !hidden(&s.name))
        .map(|s| {
            let state = json!({
                "source": s.source,
                "digest": s.digest,
                "from": s.fetched.as_str(),
                "signature": s.signature.describe(),
                "key": s.signature.key(),
            });
            (s.name.clone(), state)
        })
        .collect()
}

impl Health {
    /// The reload report; a failure naming an entry hidden from this caller
    /// is told without its message.
    fn reload_report(&self, hidden: &[&str]) -> Value {
        let mut report = self.reload.report();
        if let Some(last) = &mut report.last
            && let Some(error) = &mut last.error
            && hidden.iter().any(|name| error.contains(name))
        {
            *error = "the reload failed on an entry this caller may not see".into();
        }
        json!(report)
    }
}

/// Each upstream MCP server's breaker: `open` (failing fast, or trying
/// again after its cool-down) makes the server degraded.
fn upstream_states(catalog: &crate::catalog::Catalog) -> Map<String, Value> {
    use crate::upstream::BreakerState;
    catalog
        .upstreams()
        .iter()
        .map(|u| {
            let (state, failures) = u.breaker_state();
            let breaker = match state {
                BreakerState::Open => "open",
                BreakerState::Closed => "closed",
            };
            let mut state = json!({ "breaker": breaker, "failures": failures });
            // A command upstream: whether its process runs (`start =
            // "first-use"`: not until a client lists).
            if let Some(started) = u.started() {
                state["started"] = json!(started);
            }
            // Adapters whose tool it does not list do nothing.
            let unwired = u.unwired_adapters();
            if !unwired.is_empty() {
                state["adapter_wiring_incomplete"] = json!(unwired);
            }
            (u.name.clone(), state)
        })
        .collect()
}

/// Whether a problem's path or message mentions any of `names`. Leaving out
/// a problem that only happens to contain a hidden name errs on the safe side.
fn names_any(problem: &LoadFailure, names: &[&str]) -> bool {
    let path = problem.path.to_string_lossy();
    names
        .iter()
        .any(|name| path.contains(name) || problem.error.contains(name))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::catalog::Catalog;
    use crate::pipeline::Pipeline;

    fn problem(path: &str, error: &str) -> LoadFailure {
        LoadFailure {
            path: PathBuf::from(path),
            error: error.into(),
        }
    }

    fn principal(role: &str) -> Principal {
        Principal::new("someone", json!({ "role": role }))
    }

    #[test]
    fn problems_naming_hidden_entries_are_shown_only_to_who_may_see_them() {
        let config = Config::parse(
            r#"
            [[tools]]
            name = "admin.audit"
            visible_to = { role = ["admin"] }
            [[resources]]
            uri = "secret://plans"
            name = "plans"
            visible_to = { role = ["admin"] }
            [[prompts]]
            name = "open.prompt"
            "#,
        )
        .unwrap();
        let problems = vec![
            problem("tools.admin.audit", "environment variable X is not set"),
            problem("hangar.toml", "resource \"secret://plans\": bad"),
            problem("plugins/broken.wasm", "not a component"),
            problem("hangar.toml", "prompt \"open.prompt\" is offered twice"),
        ];
        let health = Health::new(
            Live::new(Pipeline::new(Arc::new(Catalog::default()))),
            problems,
            &config,
        );
        let paths = |report: Value| -> Vec<String> {
            assert_eq!(report["status"], "degraded");
            report["problems"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["error"].as_str().unwrap().to_string())
                .collect()
        };
        let public = paths(health.report(None));
        assert_eq!(
            public,
            ["not a component", "prompt \"open.prompt\" is offered twice"]
        );
        assert_eq!(paths(health.report(Some(&principal("user")))), public);
        assert_eq!(paths(health.report(Some(&principal("admin")))).len(), 4);
    }

    #[test]
    fn a_healthy_server_says_ok() {
        let health = Health::new(
            Live::new(Pipeline::new(Arc::new(Catalog::default()))),
            Vec::new(),
            &Config::default(),
        );
        assert_eq!(
            health.report(None),
            json!({ "status": "ok", "tools": 0, "problems": [],
                    "reload": { "reloads": 0, "failed": 0, "last": null } })
        );
    }
}
