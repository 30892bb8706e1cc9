//! DB-backed tools: one SQL statement per tool, run natively in the host on
//! a configured connector, with an optional result cache.

mod cache;
mod inputs;
mod pg_numeric;
mod postgres;
mod sqlite;
pub mod template;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::config::{Config, ConnectorConfig, ToolConfig};
use crate::pipeline::{CallError, Content, ErrorKind, Principal, Stage, ToolResult};
pub use cache::CacheStats;
use cache::ResultCache;
use inputs::Inputs;
use template::{Compiled, ParamStyle, TemplateError};

/// Rows of one result, and whether `max_rows` cut them.
pub struct Rows {
    pub rows: Vec<Value>,
    pub truncated: bool,
}

/// Why a statement did not run.
pub enum DbFailure {
    /// No connection could be had (the database is down or unreachable).
    Unavailable(String),
    /// The database refused or failed the statement.
    Query(String),
}

/// A configured database.
pub enum Connector {
    Postgres(postgres::Postgres),
    Sqlite(sqlite::Sqlite),
}

impl Connector {
    fn style(&self) -> ParamStyle {
        match self {
            Connector::Postgres(_) => ParamStyle::Dollar,
            Connector::Sqlite(_) => ParamStyle::QuestionNumbered,
        }
    }

    async fn query(
        &self,
        sql: &str,
        params: &[Value],
        read_only: bool,
        max_rows: usize,
    ) -> Result<Rows, DbFailure> {
        match self {
            Connector::Postgres(pg) => pg.query(sql, params, read_only, max_rows).await,
            Connector::Sqlite(lite) => lite.query(sql, params, read_only, max_rows).await,
        }
    }
}

/// Every connector by name; one that could not be set up keeps its error,
/// which its tools report at the env stage.
pub struct Connectors {
    by_name: BTreeMap<String, Result<Arc<Connector>, TemplateError>>,
}

impl Connectors {
    /// Sets up every configured connector. Postgres pools connect lazily, so
    /// a database that is down does not stop startup.
    pub fn open(
        config: &Config,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> anyhow::Result<Connectors> {
        let mut by_name = BTreeMap::new();
        for (name, cfg) in &config.connectors {
            let connector = match cfg {
                ConnectorConfig::Postgres(pg) => template::substitute_env(&pg.url, env)
                    .map(|url| postgres::Postgres::new(pg, &url).map(Connector::Postgres)),
                ConnectorConfig::Sqlite(lite) => {
                    template::substitute_env(&lite.path, env).map(|path| {
                        let path = config.resolve(Path::new(&path));
                        let init = lite.init.as_deref().map(|p| config.resolve(p));
                        sqlite::Sqlite::open(lite, &path, init.as_deref()).map(Connector::Sqlite)
                    })
                }
            };
            let connector = match connector {
                Ok(Ok(c)) => Ok(Arc::new(c)),
                Ok(Err(e)) => anyhow::bail!("connector {name}: {e}"),
                Err(e) => Err(e),
            };
            by_name.insert(name.clone(), connector);
        }
        Ok(Connectors { by_name })
    }

    /// Env variables that connectors need and do not have, for reporting.
    pub fn problems(&self) -> Vec<(String, String)> {
        self.by_name
            .iter()
            .filter_map(|(name, c)| {
                c.as_ref()
                    .err()
                    .map(|e| (name.clone(), format!("connector {name}: {e}")))
            })
            .collect()
    }
}

/// A tool that runs one SQL statement.
pub struct DbTool {
    name: String,
    inputs: Inputs,
    /// The compiled statement, or why it cannot run (a missing env variable).
    statement: Result<Compiled, TemplateError>,
    connector: Result<Arc<Connector>, TemplateError>,
    read_only: bool,
    max_rows: usize,
    cache: Option<ResultCache>,
}

impl DbTool {
    /// Builds a DB tool from its config entry. Mistakes in the entry (an
    /// unknown connector, a placeholder where a parameter cannot go) are
    /// errors; a missing env variable is kept and reported per call.
    pub fn new(
        cfg: &ToolConfig,
        connectors: &Connectors,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> anyhow::Result<DbTool> {
        let name = &cfg.name;
        let statement = cfg.statement.as_deref().expect("DB tools have a statement");
        let use_ = cfg.connector.as_deref().ok_or_else(|| {
            anyhow::anyhow!("tool {name}: a statement needs `use = \"<connector>\"`")
        })?;
        let connector = connectors
            .by_name
            .get(use_)
            .ok_or_else(|| anyhow::anyhow!("tool {name}: no connector named {use_:?}"))?
            .clone();
        let style = match &connector {
            Ok(c) => c.style(),
            Err(_) => ParamStyle::Dollar,
        };
        let compiled = template::compile(statement, style, env);
        if let Err(TemplateError::Invalid(why)) = &compiled {
            anyhow::bail!("tool {name}: {why}");
        }
        let inputs = Inputs::new(cfg.inputs.clone());
        if let Ok(c) = &compiled
            && let Some(undeclared) = c
                .params
                .iter()
                .find(|p| !inputs.names().any(|n| n == p.as_str()))
        {
            anyhow::bail!(
                "tool {name}: {{{{ inputs.{undeclared} }}}} is not a declared input (add inputs.{undeclared} = {{ type = ... }})"
            );
        }
        Ok(DbTool {
            name: name.clone(),
            inputs,
            statement: compiled,
            connector,
            read_only: cfg.read_only,
            max_rows: cfg.max_rows,
            cache: cfg.cache.as_ref().map(|c| ResultCache::new(c.ttl)),
        })
    }

    pub fn input_schema(&self) -> Value {
        self.inputs.schema()
    }

    /// The shape of `structuredContent`.
    pub fn output_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "rows": { "type": "array", "items": { "type": "object" } },
                "truncated": { "type": "boolean" }
            },
            "required": ["rows", "truncated"]
        })
    }

    /// Why this tool cannot run, if it cannot (for `hangar check`).
    pub fn problem(&self) -> Option<String> {
        let err = self
            .statement
            .as_ref()
            .err()
            .or(self.connector.as_ref().err())?;
        Some(format!("tool {}: {err}", self.name))
    }

    pub fn cache_stats(&self) -> Option<CacheStats> {
        self.cache.as_ref().map(ResultCache::stats)
    }

    /// Removes arguments named like claim-bound inputs: those come from the
    /// principal, whatever the caller sends.
    pub fn drop_claim_inputs(&self, args: &mut Value) {
        if let Value::Object(map) = args {
            for (name, _) in self.inputs.claim_bound() {
                map.remove(name);
            }
        }
    }

    /// Validate → env → bind → cache → connector → cache store.
    pub async fn execute(
        &self,
        args: &Value,
        principal: Option<&Principal>,
    ) -> Result<ToolResult, CallError> {
        let empty = Map::new();
        let args = self
            .inputs
            .validate(
                args.as_object().unwrap_or(&empty),
                principal.map(|p| &p.claims),
            )
            .map_err(|m| CallError::new(Stage::Validate, ErrorKind::Invalid, m))?;
        let env_error =
            |e: &TemplateError| CallError::new(Stage::Env, ErrorKind::Failed, e.to_string());
        let statement = self.statement.as_ref().map_err(env_error)?;
        let connector = self.connector.as_ref().map_err(env_error)?;
        let params: Vec<Value> = statement.params.iter().map(|p| args[p].clone()).collect();
        let key = self
            .cache
            .as_ref()
            .map(|c| c.key(&self.name, &statement.sql, &params));
        if let (Some(cache), Some(key)) = (&self.cache, &key)
            && let Some(hit) = cache.get(key)
        {
            return Ok((*hit).clone());
        }
        let rows = connector
            .query(&statement.sql, &params, self.read_only, self.max_rows)
            .await
            .map_err(|f| match f {
                DbFailure::Unavailable(m) => CallError::new(Stage::Connector, ErrorKind::Failed, m),
                DbFailure::Query(m) => CallError::new(
                    Stage::Connector,
                    ErrorKind::Failed,
                    format!("query failed: {m}"),
                ),
            })?;
        let result = rows_result(rows);
        if let (Some(cache), Some(key)) = (&self.cache, key) {
            cache.put(key, Arc::new(result.clone()));
        }
        Ok(result)
    }
}

fn rows_result(rows: Rows) -> ToolResult {
    let structured = json!({ "rows": rows.rows, "truncated": rows.truncated });
    let text = serde_json::to_string(&structured["rows"]).expect("rows serialize");
    let mut content = vec![Content::Text { text }];
    if rows.truncated {
        content.push(Content::Text {
            text: format!(
                "(truncated: more rows than max_rows = {})",
                structured["rows"].as_array().map_or(0, Vec::len)
            ),
        });
    }
    ToolResult {
        content,
        structured_content: Some(structured),
        is_error: false,
    }
}
