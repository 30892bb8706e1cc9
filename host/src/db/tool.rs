//! A DB tool: one SQL statement, served as a tool (`[[tools]]`) or a
//! resource (`[[resources]]`), built from the entry's DB keys, and run for
//! one call (validate, bind, cache, connector) with its result cache.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::cache::{CacheStats, KeyPrefix, ResultCache};
use super::connectors::{Connector, Connectors};
use super::inputs::Inputs;
use super::outcome::{DbFailure, Rows};
use super::template::{self, Compiled, ParamStyle, TemplateError};
use hangar_config::{DbConfig, InputSpec, InputType, ResourceConfig, ToolConfig};
use hangar_core::call::{
    CallError, CancelToken, Content, ErrorKind, Principal, ResourceContents, Stage, ToolResult,
};
use hangar_core::cluster::Cluster;

/// One SQL statement, served as a tool (`[[tools]]`) or a resource
/// (`[[resources]]`): its inputs, compiled statement, connector, read-only
/// rule, row cap and result cache.
pub struct DbTool {
    /// `tool NAME` or `resource URI`, for messages.
    pub(super) label: String,
    inputs: Inputs,
    /// The compiled statement, or why it cannot run (a missing env variable).
    statement: Result<Compiled, TemplateError>,
    connector: Result<Arc<Connector>, TemplateError>,
    read_only: bool,
    max_rows: usize,
    cache: Option<ResultCache<Served>>,
    /// The start of its cache keys, the tool's name or the resource's URI
    /// (template) and the statement (with `cache` and a statement only).
    key_prefix: Option<KeyPrefix>,
    /// The cache's second tier (`[cluster]`), with `cache` only.
    pub(super) shared: Option<Arc<Cluster>>,
    /// Of a resource's contents.
    mime_type: String,
    /// The connector it runs on, by its `[connectors.NAME]` name.
    use_: String,
}

/// Rows as served, with their JSON text made once (and cached with them).
pub(super) struct Served {
    pub(super) rows: Rows,
    pub(super) text: String,
}

/// A `[[tools]]` or a `[[resources]]` entry with a statement, as the
/// statement is built from it.
struct Spec<'a> {
    label: String,
    name: &'a str,
    /// The entry's connector, statement, read-only rule, row cap and cache.
    db: &'a DbConfig,
    /// Its inputs: a tool's as declared, a resource's with its variables.
    inputs: BTreeMap<String, InputSpec>,
    /// What to tell about a placeholder naming no input.
    unbound: &'a dyn Fn(&str) -> String,
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
        let spec = Spec {
            label: format!("tool {}", cfg.name),
            name: &cfg.name,
            db: &cfg.db,
            inputs: cfg.db.inputs.clone(),
            unbound: &|p| {
                format!(
                    "{{{{ inputs.{p} }}}} is not a declared input (add inputs.{p} = {{ type = ... }})"
                )
            },
        };
        DbTool::build(spec, connectors, env)
    }

    /// Builds a DB resource from its `[[resources]]` entry. `variables` are
    /// its URI template's (none for a fixed `uri`): each is an input, typed
    /// by `inputs.NAME` (a string when not declared) and always given. The
    /// only other inputs are bound from claims; a placeholder naming neither
    /// is an error, as is an input declared for neither.
    pub fn for_resource(
        cfg: &ResourceConfig,
        variables: &[&str],
        connectors: &Connectors,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> anyhow::Result<DbTool> {
        let key = cfg.key();
        let mut inputs = BTreeMap::new();
        for &var in variables {
            let mut spec = cfg.db.inputs.get(var).cloned().unwrap_or(InputSpec {
                ty: InputType::String,
                description: None,
                required: true,
                default: None,
                items: None,
                from_claim: None,
            });
            if spec.from_claim.is_some() {
                anyhow::bail!(
                    "resource {key}: inputs.{var} is a template variable, so it cannot also come from a claim"
                );
            }
            spec.required = true;
            inputs.insert(var.to_string(), spec);
        }
        for (name, spec) in &cfg.db.inputs {
            if inputs.contains_key(name) {
                continue;
            }
            if spec.from_claim.is_none() {
                anyhow::bail!(
                    "resource {key}: inputs.{name} is neither a variable of the URI template nor bound from a claim (from_claim = \"...\")"
                );
            }
            inputs.insert(name.clone(), spec.clone());
        }
        let variables = if variables.is_empty() {
            "none".to_string()
        } else {
            variables.join(", ")
        };
        let unbound = |p: &str| {
            format!(
                "{{{{ inputs.{p} }}}} names no variable of the URI template (its variables: {variables}) and no from_claim input"
            )
        };
        let spec = Spec {
            label: format!("resource {key}"),
            name: key,
            db: &cfg.db,
            inputs,
            unbound: &unbound,
        };
        let mut db = DbTool::build(spec, connectors, env)?;
        if let Some(mime) = &cfg.mime_type {
            db.mime_type = mime.clone();
        }
        Ok(db)
    }

    fn build(
        spec: Spec<'_>,
        connectors: &Connectors,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> anyhow::Result<DbTool> {
        let label = spec.label;
        let db = spec.db;
        let statement = db
            .statement
            .as_deref()
            .expect("DB tools and resources have a statement");
        let use_ = db
            .connector
            .as_deref()
            .ok_or_else(|| anyhow::anyhow!("{label}: a statement needs `use = \"<connector>\"`"))?;
        let connector = connectors
            .get(use_)
            .ok_or_else(|| anyhow::anyhow!("{label}: no connector named {use_:?}"))?
            .clone();
        let style = match &connector {
            Ok(c) => c.style(),
            Err(_) => ParamStyle::Dollar,
        };
        let compiled = template::compile(statement, style, env);
        if let Err(TemplateError::Invalid(why)) = &compiled {
            anyhow::bail!("{label}: {why}");
        }
        let inputs = Inputs::new(spec.inputs);
        if let Ok(c) = &compiled
            && let Some(unbound) = c
                .params
                .iter()
                .find(|p| !inputs.names().any(|n| n == p.as_str()))
        {
            anyhow::bail!("{label}: {}", (spec.unbound)(unbound));
        }
        let key_prefix = match (&compiled, &db.cache) {
            (Ok(c), Some(_)) => Some(KeyPrefix::new(spec.name, &c.sql)),
            _ => None,
        };
        Ok(DbTool {
            use_: use_.to_string(),
            label,
            key_prefix,
            inputs,
            statement: compiled,
            connector,
            read_only: db.read_only,
            max_rows: db.max_rows,
            cache: db.cache.as_ref().map(|c| {
                let cache = ResultCache::new(c.ttl, c.max_bytes, c.max_entry_bytes);
                match connectors.shared() {
                    Some(_) => cache.with_shared_tier(),
                    None => cache,
                }
            }),
            shared: db.cache.as_ref().and(connectors.shared().cloned()),
            mime_type: "application/json".into(),
        })
    }

    /// The `[connectors.NAME]` it runs on.
    pub fn connector_name(&self) -> &str {
        &self.use_
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
        Some(format!("{}: {err}", self.label))
    }

    /// Its connector, if it could be set up.
    pub fn connector(&self) -> Option<&Arc<Connector>> {
        self.connector.as_ref().ok()
    }

    /// Drops its cached results; false when it keeps none.
    pub fn clear_cache(&self) -> bool {
        self.cache.as_ref().map(ResultCache::clear).is_some()
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

    /// Runs the tool: its rows as JSON text and as `structuredContent`.
    /// The inputs named in `blobs` (uploads) are bound as those bytes.
    pub async fn execute(
        &self,
        args: &Value,
        principal: Option<&Principal>,
        cancel: &CancelToken,
        blobs: &HashMap<String, bytes::Bytes>,
    ) -> Result<ToolResult, CallError> {
        let empty = Map::new();
        let served = self
            .run(args.as_object().unwrap_or(&empty), principal, cancel, blobs)
            .await?;
        Ok(tool_result(&served))
    }

    /// Reads the resource at `uri`, whose template matched with `variables`
    /// (name, decoded text): each is converted to its input's type (a text
    /// that does not convert is invalid), then bound like a tool's argument.
    /// The contents are one JSON array of row objects; no row is not found.
    pub async fn read_resource(
        &self,
        uri: &str,
        variables: &[(String, String)],
        principal: Option<&Principal>,
        cancel: &CancelToken,
    ) -> Result<Vec<ResourceContents>, CallError> {
        let mut args = Map::new();
        let mut problems = Vec::new();
        for (name, text) in variables {
            match self.inputs.parse_text(name, text) {
                Ok(v) => {
                    args.insert(name.clone(), v);
                }
                Err(why) => problems.push(why),
            }
        }
        if !problems.is_empty() {
            return Err(CallError::new(
                Stage::Validate,
                ErrorKind::Invalid,
                format!("invalid URI: {}", problems.join("; ")),
            ));
        }
        let served = self
            .run(&args, principal, cancel, &Default::default())
            .await?;
        if served.rows.rows.is_empty() {
            return Err(CallError::resource_not_found(uri));
        }
        Ok(vec![ResourceContents {
            uri: uri.to_string(),
            mime_type: Some(self.mime_type.clone()),
            text: Some(served.text.clone()),
            blob: None,
            meta: None,
        }])
    }

    /// Validate → env → bind → cache → connector → cache store.
    async fn run(
        &self,
        args: &Map<String, Value>,
        principal: Option<&Principal>,
        cancel: &CancelToken,
        blobs: &HashMap<String, bytes::Bytes>,
    ) -> Result<Arc<Served>, CallError> {
        let args = self
            .inputs
            .validate(args, principal.map(|p| &p.claims))
            .map_err(|m| CallError::new(Stage::Validate, ErrorKind::Invalid, m))?;
        let env_error =
            |e: &TemplateError| CallError::new(Stage::Env, ErrorKind::Failed, e.to_string());
        let statement = self.statement.as_ref().map_err(env_error)?;
        let connector = self.connector.as_ref().map_err(env_error)?;
        let params: Vec<Value> = statement.params.iter().map(|p| args[p].clone()).collect();
        let blobs: Vec<Option<bytes::Bytes>> = if blobs.is_empty() {
            Vec::new()
        } else {
            statement
                .params
                .iter()
                .map(|p| blobs.get(p).cloned())
                .collect()
        };
        let key = self.key_prefix.as_ref().map(|p| p.key(&params));
        if let (Some(cache), Some(key)) = (&self.cache, &key) {
            if let Some(hit) = cache.get(key) {
                return Ok(hit);
            }
            if let Some(hit) = self.shared_get(key).await {
                cache.shared_hit();
                let bytes = 2 * hit.text.len() as u64;
                cache.put(*key, hit.clone(), bytes);
                return Ok(hit);
            }
        }
        let rows = connector
            .query(
                &statement.sql,
                &params,
                &blobs,
                self.read_only,
                self.max_rows,
                cancel,
            )
            .await
            .map_err(|f| match f {
                DbFailure::Unavailable(m) => CallError::new(Stage::Connector, ErrorKind::Failed, m),
                DbFailure::Invalid { index, why } => {
                    let input = statement.params.get(index).map_or("?", String::as_str);
                    CallError::new(
                        Stage::Validate,
                        ErrorKind::Invalid,
                        format!("{input}: {why}"),
                    )
                }
                DbFailure::Cancelled => CallError::cancelled(Stage::Connector),
                DbFailure::Query(m) => CallError::new(
                    Stage::Connector,
                    ErrorKind::Failed,
                    format!("query failed: {m}"),
                ),
            })?;
        let text = serde_json::to_string(&rows.rows).expect("rows serialize");
        let served = Arc::new(Served { rows, text });
        if let (Some(cache), Some(key)) = (&self.cache, key) {
            // The text, and the rows as values, which take about as much again.
            let bytes = 2 * served.text.len() as u64;
            if bytes <= cache.max_entry_bytes() {
                self.shared_put(&key, &served, cache.ttl()).await;
            }
            cache.put(key, served.clone(), bytes);
        }
        Ok(served)
    }
}

fn tool_result(served: &Served) -> ToolResult {
    let rows = &served.rows;
    let mut content = vec![Content::Text {
        text: served.text.clone(),
    }];
    if rows.truncated {
        content.push(Content::Text {
            text: format!("(truncated: more rows than max_rows = {})", rows.rows.len()),
        });
    }
    let mut result = ToolResult {
        content,
        structured_content: Some(json!({ "rows": rows.rows, "truncated": rows.truncated })),
        is_error: false,
        meta: None,
    };
    if rows.truncated {
        // Reading stopped at `max_rows`: how many more there were is unknown.
        result.report_truncated("/rows", None, rows.rows.len());
    }
    result
}
