//! Catalog entries for the DB resources: each `[[resources]]` entry with a
//! `statement` becomes a resource (a fixed `uri`) or a resource template
//! (`uri_template`, its variables bound as the statement's inputs), served
//! by its statement on its connector, with its auth and `visible_to`.

use std::path::PathBuf;
use std::sync::Arc;

use super::stages::Plugins;
use super::{CatalogResource, CatalogTemplate, Offered, Provider, UriTemplate};
use crate::db::{Connectors, DbTool};
use hangar_config::{Config, ResourceConfig};
use hangar_core::call::apps::MetaOf;
use hangar_core::call::{ResourceDef, TemplateDef};
use hangar_runtime::LoadFailure;

impl Offered {
    /// Adds a resource or template for every `[[resources]]` entry with a
    /// statement. A mistake in an entry is an error; what one cannot run
    /// without is a problem.
    pub(super) fn add_db_resources(
        &mut self,
        config: &Config,
        plugins: &Plugins,
        connectors: &Connectors,
        env: &dyn Fn(&str) -> Option<String>,
        problems: &mut Vec<LoadFailure>,
    ) -> anyhow::Result<()> {
        for cfg in config.resources.iter().filter(|r| r.db.statement.is_some()) {
            let problem = self.add_db_resource(config, plugins, cfg, connectors, env)?;
            problems.extend(problem.map(|error| LoadFailure {
                path: PathBuf::from(format!("resources.{}", cfg.key())),
                error,
            }));
        }
        Ok(())
    }

    /// Adds the DB resource (fixed `uri`) or template (`uri_template`) of a
    /// `[[resources]]` entry with a statement. A mistake in the entry is an
    /// error, as for a DB tool; what it cannot run without (a missing env
    /// variable) is returned as a problem, and its reads fail naming it.
    fn add_db_resource(
        &mut self,
        config: &Config,
        plugins: &Plugins,
        cfg: &ResourceConfig,
        connectors: &Connectors,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> anyhow::Result<Option<String>> {
        let key = cfg.key();
        let label = if key.is_empty() {
            format!(
                "[[resources]] entry {:?}",
                cfg.name.as_deref().unwrap_or("")
            )
        } else {
            format!("resource {key}")
        };
        cfg.check().map_err(|e| anyhow::anyhow!("{label}: {e}"))?;
        let matcher = match &cfg.uri_template {
            Some(t) => Some(UriTemplate::parse(t).map_err(|e| anyhow::anyhow!("{label}: {e}"))?),
            None => None,
        };
        let variables: Vec<&str> = matcher
            .as_ref()
            .map(|m| m.variables().collect())
            .unwrap_or_default();
        let db = DbTool::for_resource(cfg, &variables, connectors, env)?;
        let problem = db.problem();
        let access = plugins
            .access(config, &label, cfg.auth.as_ref(), cfg.visible_to.as_ref())
            .map_err(|e| anyhow::anyhow!(e))?;
        let provider = Provider::Sql(Arc::new(db));
        let limits = config.limits.overridden_by(&cfg.limits);
        let name = cfg.name.clone().unwrap_or_else(|| key.to_string());
        let meta = super::db_tools::checked_meta(cfg.meta.as_ref(), MetaOf::Resource)
            .map_err(|e| anyhow::anyhow!("{label}: {e}"))?;
        let mime_type = Some(
            cfg.mime_type
                .clone()
                .unwrap_or_else(|| "application/json".into()),
        );
        let added = match matcher {
            Some(matcher) => self.add_template(CatalogTemplate {
                def: TemplateDef {
                    uri_template: key.to_string(),
                    name,
                    title: cfg.title.clone(),
                    description: cfg.description.clone(),
                    mime_type,
                    meta,
                },
                matcher,
                provider,
                limits,
                access,
            }),
            None => self.add_resource(CatalogResource {
                def: ResourceDef {
                    uri: key.to_string(),
                    name,
                    title: cfg.title.clone(),
                    description: cfg.description.clone(),
                    mime_type,
                    size: None,
                    meta,
                },
                provider,
                limits,
                access,
            }),
        };
        added.map_err(|e| anyhow::anyhow!(e))?;
        Ok(problem)
    }
}
