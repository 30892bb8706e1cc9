//! Catalog entries for the DB tools: each `[[tools]]` entry with a
//! `statement` becomes a tool whose schema comes from its declared inputs,
//! run by its statement on its connector.

use std::path::PathBuf;
use std::sync::Arc;

use super::{
    Annotations, Backend, Catalog, CatalogTool, RateLimits, Stages, ToolDef, tool_limiter,
};
use crate::db::{Connectors, DbTool};
use hangar_config::{Config, Limits, ToolConfig};
use hangar_core::call::Meta;
use hangar_core::call::apps::{MetaOf, check_meta};
use hangar_runtime::LoadFailure;

impl Catalog {
    /// Adds a tool for every `[[tools]]` entry with a statement. A mistake
    /// in an entry is an error; what one cannot run without (a missing env
    /// variable) is a problem, and its calls fail naming it.
    pub(super) fn add_db_tools(
        &mut self,
        config: &Config,
        connectors: &Connectors,
        env: &dyn Fn(&str) -> Option<String>,
        problems: &mut Vec<LoadFailure>,
    ) -> anyhow::Result<()> {
        for cfg in config.tools.iter().filter(|t| t.db.statement.is_some()) {
            let db = DbTool::new(cfg, connectors, env)?;
            if let Some(error) = db.problem() {
                problems.push(LoadFailure {
                    path: PathBuf::from(format!("tools.{}", cfg.name)),
                    error,
                });
            }
            let mut tool = db_tool(cfg, db, config.limits);
            tool.def.meta = checked_meta(cfg.meta.as_ref(), MetaOf::Tool)
                .map_err(|e| anyhow::anyhow!("tool {}: {e}", cfg.name))?;
            let stages = self
                .plugins
                .stages_for(config, &tool.def)
                .map_err(|e| anyhow::anyhow!(e))?;
            let rate = RateLimits::new([
                tool_limiter(config, &cfg.name, self.cluster.as_ref()),
                self.server_limiter.clone(),
            ]);
            self.insert(CatalogTool {
                stages,
                rate,
                ..tool
            })?;
        }
        Ok(())
    }
}

/// An entry's `meta`, checked as the `_meta` of a definition `of`.
pub(super) fn checked_meta(meta: Option<&Meta>, of: MetaOf) -> Result<Option<Meta>, String> {
    meta.map(|m| check_meta(serde_json::Value::Object(m.clone()), of))
        .transpose()
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
            meta: None,
        },
        backend: Backend::Sql(Arc::new(db)),
        limits,
        source: PathBuf::from("hangar.toml"),
        stages,
        rate: RateLimits::default(),
    }
}
